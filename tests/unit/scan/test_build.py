"""`build_report`: the report of what a scan collected and judged — a pure function, every list
in a stable order whatever order the attempts come in."""

from __future__ import annotations

import random
from datetime import timedelta

from support.fakes import T0, WINDOW, attempt, execution

from forensics.cli import exits
from forensics.config import Settings
from forensics.detect import Cleared, Decision, Verdict, build_finding, finding_links
from forensics.model import AttemptRef, Checkpoint, Gap, ObjectCheck, ReportStatus, SignalHit
from forensics.scan.build import Judged, build_report, quiet
from forensics.scan.collect import Collected
from forensics.scan.evidence import Evidence
from forensics.scan.scope import ScanScope

MISSING = ObjectCheck("missing")


def hit(att, at):
    return SignalHit("SIGTERM", 15, at, att.namespace, att.pods[0], "train", "agent", "Received")


def judged(name: str, decision: Decision, at=None) -> Judged:
    """One attempt of a fresh execution, signalled at `at` (None: no signal), as judged."""
    ex = execution(name)
    att = attempt(ex)
    signal = hit(att, at) if at is not None else None
    finding = None
    if decision.is_finding:
        links = finding_links(Settings(), ex, signal)
        finding = build_finding(decision, ex, att, signal, Checkpoint(None, "unknown"), links)
    return Judged(Evidence(ex, att, signal, outputs=decision.outputs), decision, finding)


def collected(gaps=(), cleared=()) -> Collected:
    return Collected(WINDOW, ScanScope(), (), tuple(gaps), tuple(cleared))


def test_the_report_is_in_signal_order_whatever_order_the_attempts_come_in():
    names = [f"e{i:019d}" for i in range(40)]
    items = [
        judged(names[i], Decision(Verdict.AFFECTED, outputs=MISSING), T0 - timedelta(minutes=i))
        for i in range(40)
    ]
    random.Random(7).shuffle(items)
    report = build_report(collected(), items)
    assert [f.attempt.execution.name for f in report.findings] == names[::-1]
    assert report.summary.attempts_examined == report.summary.affected == 40
    assert build_report(collected(), items[::-1]) == report


def test_every_outcome_is_counted_once_and_the_counts_add_up():
    items = [
        judged("a" * 20, Decision(Verdict.AFFECTED, outputs=MISSING), T0),
        judged("b" * 20, Decision(Verdict.SUSPECTED, outputs=MISSING)),
        judged("c" * 20, Decision(Verdict.PENDING), T0),
        judged("d" * 20, Decision(Cleared.OUTPUTS_WRITTEN, outputs=ObjectCheck("present"))),
    ]
    report = build_report(collected(cleared=[Cleared.SIGNAL_NOT_FLYTE_POD] * 3), items)
    s = report.summary
    assert (s.affected, s.suspected, s.pending) == (1, 1, 1)
    assert s.cleared == {"outputs-written": 1, "signal-not-a-flyte-task-pod": 3}
    assert s.attempts_examined == 7
    assert [p.attempt.execution.name for p in report.pending] == ["c" * 20]


def test_an_attempt_given_as_its_reason_alone_counts_as_it_would_whole():
    # A scan keeps nothing of an attempt cleared with nothing more to say (`quiet`) but its
    # reason; what it says of the others (a signal, a re-run, a verdict) must stay whole.
    rerun = AttemptRef(execution("f" * 20).ref, "n0", 1)
    items = [
        judged("a" * 20, Decision(Verdict.AFFECTED, outputs=MISSING), T0),
        judged("b" * 20, Decision(Verdict.PENDING), T0),
        judged("c" * 20, Decision(Cleared.OUTPUTS_WRITTEN, outputs=ObjectCheck("present"))),
        judged("d" * 20, Decision(Cleared.SIGNAL_FAILED_RETRIED), T0),
        judged("e" * 20, Decision(Cleared.OUTPUTS_DECLARED, rerun=rerun)),
    ]
    reasons = [quiet(j.evidence, j.decision) for j in items]
    assert reasons == [None, None, Cleared.OUTPUTS_WRITTEN, None, None]
    slim = [r or j for r, j in zip(reasons, items, strict=True)]
    assert build_report(collected(), slim) == build_report(collected(), items)
    assert build_report(collected(), slim).summary.cleared["outputs-written"] == 1


def test_a_finding_whose_outputs_could_not_be_read_leaves_an_s3_gap_an_expired_one_none():
    # A failed read is a gap a rescan can close; an expired folder no rescan brings back.
    unread = ObjectCheck("unknown", "HTTP 503 SlowDown")
    expired = ObjectCheck("unknown", "the folder has expired", expired=True)
    items = [
        judged("a" * 20, Decision(Verdict.SUSPECTED, outputs=unread), T0),
        judged("b" * 20, Decision(Verdict.SUSPECTED, outputs=expired), T0),
    ]
    report = build_report(collected(), items)
    assert [(g.source, g.error) for g in report.gaps] == [
        ("s3", f"s3://meta/{'a' * 20}/n0/0/outputs.pb: HTTP 503 SlowDown")
    ]


def test_gaps_come_out_sorted_by_source_and_time():
    late, early = T0, T0 - timedelta(hours=1)
    gaps = [
        Gap("loki", late, None, "x"),
        Gap("admin", late, late, "y"),
        Gap("loki", early, late, "z"),
    ]
    report = build_report(collected(gaps), [])
    assert [(g.source, g.error) for g in report.gaps] == [
        ("admin", "y"),
        ("loki", "z"),
        ("loki", "x"),
    ]


def test_the_status_is_the_reports_and_the_exit_code_follows_it():
    clean = build_report(collected(), [])
    assert clean.status is ReportStatus.CLEAN and exits.for_scan(clean) == 0
    found = build_report(
        collected(), [judged("a" * 20, Decision(Verdict.AFFECTED, outputs=MISSING), T0)]
    )
    assert found.status is ReportStatus.TO_ACT_ON
    assert exits.for_scan(found) == 1 and exits.for_scan(found, exit_zero=True) == 0
    pending = build_report(collected(), [judged("c" * 20, Decision(Verdict.PENDING), T0)])
    assert pending.status is ReportStatus.TO_ACT_ON
    gap = build_report(collected([Gap("loki", T0, T0, "x")]), [])
    assert gap.status is ReportStatus.INCOMPLETE
    assert exits.for_scan(gap, exit_zero=True) == 3
    assert exits.for_scan(clean, page_gaps=True) == 3
