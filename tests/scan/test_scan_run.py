"""The scan's shape: one run object, one decision for scan, show and relaunch, one way to run
bounded concurrent work. Against the reference incident in the sandbox (real clients)."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime

import pytest
from support import paths
from support.scan import sandbox_fixtures

from forensics.concurrency import stream
from forensics.config import load_settings
from forensics.detect import Cleared, Decision, Verdict
from forensics.model import UTC, ExecutionRef, Summary, Window
from forensics.relaunch.recheck import recheck_of
from forensics.sandbox.incident import reference_scenario
from forensics.scan.examine import examine
from forensics.scan.run import ScanRun
from forensics.scan.scope import ScanScope
from forensics.sources import Sources
from forensics.timeline import build_timeline

pytestmark = pytest.mark.integration

WINDOW = Window(datetime(2026, 9, 4, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))
DOCS = paths.DOCS / "verdicts.md"


box, env = sandbox_fixtures(reference_scenario)


@pytest.fixture
def sources():
    with Sources.from_settings(load_settings()) as s:
        yield s


def test_a_scan_run_declares_all_it_owns_before_it_runs(sources):
    run = ScanRun(sources, WINDOW, ScanScope())
    declared = set(vars(run))
    report = run.run()
    assert report.findings  # the incident's silent successes
    assert set(vars(run)) == declared  # run() grew nothing


def test_scan_show_and_relaunch_judge_each_finding_alike(sources):
    # One decision (`detect.decide`) and one pod join: the timeline and the re-check of each
    # finding's execution say what the scan said about that attempt.
    report = ScanRun(sources, WINDOW, ScanScope()).run()
    now = datetime(2026, 9, 11, tzinfo=UTC)
    for f in report.findings:
        ref: ExecutionRef = f.attempt.execution
        exam = examine(sources, ref, now=now)
        (mine,) = [e for e in exam.attempts if e.attempt.ref == f.attempt]
        assert mine.decision is not None and mine.decision.verdict == f.verdict, f.attempt
        tl = build_timeline(sources, ref, now=now)
        (shown,) = [
            a
            for a in tl.attempts
            if (a.attempt.ref.node_id, a.attempt.ref.attempt)
            == (f.attempt.node_id, f.attempt.attempt)
        ]
        assert shown.verdict == f.verdict, f.attempt
        if f.verdict == "affected":
            assert recheck_of(exam).verdict in ("affected", "suspected")


def test_the_sources_are_closed_together():
    with Sources.from_settings(load_settings()) as s:
        admin = s.admin
    with pytest.raises(Exception, match="closed channel"):  # grpc refuses a closed channel
        admin.project_domains()


def test_every_verdict_and_cleared_class_is_dispatched_and_documented():
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", DOCS.read_text(), re.M))
    for cleared in Cleared:
        assert not Decision(cleared).is_finding
        assert cleared.value in documented, f"{cleared.value} is not in docs/verdicts.md"
    assert {v for v in Verdict if Decision(v).is_finding} == {Verdict.AFFECTED, Verdict.SUSPECTED}
    # The enums are their strings wherever they go: JSON, CSV, the summary's counters.
    summary = Summary()
    summary.clear(Cleared.OUTPUTS_WRITTEN)
    assert summary.as_dict()["cleared"] == {"outputs-written": 1}
    assert type(next(iter(summary.cleared))) is str
    assert f"{Verdict.AFFECTED}" == str(Verdict.AFFECTED) == "affected"


def test_a_failing_job_surfaces_in_the_caller_after_what_it_emitted():
    def good(emit):
        emit("a")

    def bad(emit):
        emit("b")
        raise RuntimeError("boom")

    seen = []
    with pytest.raises(RuntimeError, match="boom"):
        for item in stream("t-stream", [good, bad], 2, buffer=4):
            seen.append(item)
    assert sorted(seen) == ["a", "b"]


def test_closing_a_stream_ends_its_workers():
    def endless(emit):
        while emit(1):
            pass

    items = stream("t-close", [endless, endless], 2, buffer=2)
    assert next(items) == 1
    items.close()
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and _alive("t-close-"):
        time.sleep(0.02)
    assert not _alive("t-close-")


def _alive(prefix: str) -> bool:
    return any(t.name.startswith(prefix) and t.is_alive() for t in threading.enumerate())
