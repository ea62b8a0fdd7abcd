"""`Tally`: what a scan run keeps of each decided attempt, and the report it makes of them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from support.fakes import T0, WINDOW, attempt, execution

from forensics.config import Settings
from forensics.detect import Cleared, Decision, Verdict, build_finding, finding_links
from forensics.model import Checkpoint, Gap, ObjectCheck, SignalHit
from forensics.scan.tally import Tally

MISSING = ObjectCheck("missing")


def hit(att, at):
    return SignalHit("SIGTERM", 15, at, att.namespace, att.pods[0], "train", "agent", "Received")


def record(tally: Tally, name: str, decision: Decision, at=None) -> None:
    """Record one attempt of a fresh execution, signalled at `at` (None: no signal)."""
    ex = execution(name)
    att = attempt(ex)
    signal = hit(att, at) if at is not None else None
    finding = None
    if decision.is_finding:
        links = finding_links(Settings(), ex, signal)
        finding = build_finding(decision, ex, att, signal, Checkpoint(None, "unknown"), links)
    tally.record(decision, ex, att, signal, finding)


def no_relaunches(findings):
    return findings


def test_the_report_is_in_signal_order_whatever_order_the_lanes_recorded_in():
    names = [f"e{i:019d}" for i in range(40)]

    def one(i: int) -> None:
        at = T0 - timedelta(minutes=i)
        record(tally, names[i], Decision(Verdict.AFFECTED, outputs=MISSING), at)

    tally = Tally()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(40)))
    report = tally.report(WINDOW, no_relaunches)
    assert [f.attempt.execution.name for f in report.findings] == names[::-1]
    assert report.summary.attempts_examined == report.summary.affected == 40


def test_every_outcome_is_counted_once_and_the_counts_add_up():
    tally = Tally()
    record(tally, "a" * 20, Decision(Verdict.AFFECTED, outputs=MISSING), T0)
    record(tally, "b" * 20, Decision(Verdict.SUSPECTED, outputs=MISSING))
    record(tally, "c" * 20, Decision(Verdict.PENDING), T0)
    record(tally, "d" * 20, Decision(Cleared.OUTPUTS_WRITTEN, outputs=ObjectCheck("present")))
    tally.clear(Cleared.SIGNAL_NOT_FLYTE_POD, 3)
    s = tally.report(WINDOW, no_relaunches).summary
    assert (s.affected, s.suspected, s.pending) == (1, 1, 1)
    assert s.cleared == {"outputs-written": 1, "signal-not-a-flyte-task-pod": 3}
    assert s.attempts_examined == 7


def test_a_finding_whose_outputs_could_not_be_read_leaves_an_s3_gap_an_expired_one_none():
    # A failed read is a gap a rescan can close; an expired folder no rescan brings back.
    tally = Tally()
    unread = ObjectCheck("unknown", "HTTP 503 SlowDown")
    expired = ObjectCheck("unknown", "the folder has expired", expired=True)
    record(tally, "a" * 20, Decision(Verdict.SUSPECTED, outputs=unread), T0)
    record(tally, "b" * 20, Decision(Verdict.SUSPECTED, outputs=expired), T0)
    report = tally.report(WINDOW, no_relaunches)
    assert [(g.source, g.error) for g in report.gaps] == [
        ("s3", f"s3://meta/{'a' * 20}/n0/0/outputs.pb: HTTP 503 SlowDown")
    ]


def test_gaps_come_out_sorted_by_source_and_time():
    tally = Tally()
    late, early = T0, T0 - timedelta(hours=1)
    tally.add_gap(Gap("loki", late, None, "x"))
    tally.add_gaps([Gap("admin", late, late, "y"), Gap("loki", early, late, "z")])
    gaps = tally.report(WINDOW, no_relaunches).gaps
    assert [(g.source, g.error) for g in gaps] == [("admin", "y"), ("loki", "z"), ("loki", "x")]
