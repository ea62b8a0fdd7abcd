"""`ScanRun` against in-process fakes of Loki, Admin and S3: what it finds, and that it finds
the same whichever source answers first (the order its steps depend on, docs in scan/run.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from support.fakes import (
    SIG_AT,
    T0,
    WINDOW,
    FakeAdmin,
    FakeLoki,
    FakeStore,
    attempt,
    execution,
    fake_sources,
    healthy,
    signalled,
    silent_green,
    wrote_outputs,
)

from forensics.config import LokiSettings, Settings
from forensics.detect import Cleared
from forensics.model import AttemptRecord, Report
from forensics.scan.run import ScanRun
from forensics.scan.scope import ScanScope


def incident(loki: FakeLoki, admin: FakeAdmin, store: FakeStore):
    """One silent green success (affected) and one healthy one (cleared)."""
    sources = fake_sources(loki=loki, admin=admin, store=store)
    return silent_green(sources), healthy(sources)


def scan(loki, admin, store, scope=ScanScope()) -> Report:
    return ScanRun(fake_sources(loki=loki, admin=admin, store=store), WINDOW, scope).run()


def verdicts(report: Report) -> list[tuple[str, str]]:
    return [(str(f.attempt), f.verdict) for f in report.findings]


def test_the_affected_attempt_is_found_and_the_healthy_one_cleared():
    loki, admin, store = FakeLoki(), FakeAdmin(), FakeStore()
    bad, _ = incident(loki, admin, store)
    started = time.monotonic()
    report = scan(loki, admin, store)
    assert time.monotonic() - started < 2
    assert verdicts(report) == [(str(bad.ref), "affected")]
    assert report.findings[0].signal is not None and report.findings[0].signal.at == SIG_AT
    assert report.summary.attempts_examined == 2
    assert report.summary.cleared == {Cleared.OUTPUTS_WRITTEN.value: 1}
    assert report.gaps == ()


class SlowLoki(FakeLoki):
    """Loki that answers only once `go` is set: the sweep finishes first."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def read_shards(self, *args, **kw):
        assert self.go.wait(5)
        yield from super().read_shards(*args, **kw)


class SweptAdmin(FakeAdmin):
    """Admin that says when an execution's attempts have been swept."""

    def __init__(self, then) -> None:
        super().__init__()
        self.then = then

    def sweep_attempts(self, ex):
        swept = super().sweep_attempts(ex)
        self.then(ex)
        return swept


def late_signals():
    """Loki answering only after every execution was swept (and a moment more, for the run to
    take in the sweep's answer)."""
    loki = SlowLoki()
    swept: set[str] = set()

    def then(ex):
        swept.add(ex.ref.name)
        if len(swept) == 2:
            threading.Timer(0.05, loki.go.set).start()

    return loki, SweptAdmin(then)


def test_an_attempt_swept_before_the_signals_are_final_waits_for_its_signal():
    # Released at once, it would be judged without its signal: `suspected`, not `affected`.
    loki, admin = late_signals()
    store = FakeStore()
    bad, _ = incident(loki, admin, store)
    report = scan(loki, admin, store)
    assert verdicts(report) == [(str(bad.ref), "affected")]
    assert report.summary.attempts_examined == 2


class LateAdmin(FakeAdmin):
    """Admin whose listings answer only once Loki's signals were all read."""

    def __init__(self, loki: FakeLoki) -> None:
        super().__init__()
        self.loki = loki
        self.go = threading.Event()

    def list_execution_pages(self, *args, **kw):
        assert self.go.wait(5)
        yield from super().list_execution_pages(*args, **kw)


class TellingLoki(FakeLoki):
    def __init__(self) -> None:
        super().__init__()
        self.read = threading.Event()

    def read_shards(self, *args, **kw):
        yield from super().read_shards(*args, **kw)
        self.read.set()


def early_signals():
    loki = TellingLoki()
    admin = LateAdmin(loki)
    threading.Thread(target=lambda: loki.read.wait(5) and admin.go.set(), daemon=True).start()
    return loki, admin


def test_an_attempt_swept_after_the_signals_are_final_is_judged_with_its_signal():
    loki, admin = early_signals()
    store = FakeStore()
    bad, _ = incident(loki, admin, store)
    report = scan(loki, admin, store)
    assert verdicts(report) == [(str(bad.ref), "affected")]


def plain_task_signalled(loki: FakeLoki, admin: FakeAdmin, store: FakeStore) -> AttemptRecord:
    """An execution with an elastic node and a plain task's node whose pod logged SIGTERM and
    wrote no outputs.pb: the sweep passes the plain node over unless the evidence points at it."""
    ex = execution("m3n8b2v7c6x1z5l9k4j0")
    elastic = attempt(ex, "n0")
    plain = attempt(ex, "n1", task_type="python-task", version=0)
    admin.add(ex, [elastic, plain])
    for a, wrote in ((elastic, True), (plain, False)):
        wrote_outputs(store, a, outputs=wrote)
    signalled(loki, plain)
    return plain


@pytest.mark.parametrize("order", ["signals first", "sweep first"])
def test_a_node_the_sweep_passed_over_is_listed_when_a_signal_points_at_it(order):
    if order == "signals first":
        loki, admin = early_signals()
    else:
        loki = SlowLoki()
        admin = SweptAdmin(lambda ex: threading.Timer(0.05, loki.go.set).start())
    store = FakeStore()
    plain = plain_task_signalled(loki, admin, store)
    report = scan(loki, admin, store)
    assert verdicts(report) == [(str(plain.ref), "affected")]
    assert report.summary.attempts_examined == 2
    # Listed once: by the sweep when the signal was known, else when it became known.
    assert admin.calls["ListTaskExecutions"] == 2


def test_a_signalled_pod_no_listing_returned_is_resolved_by_its_name():
    # The execution was last updated before the window (archived, so no listing holds it): its
    # pod's name leads to it, one GetExecution.
    loki, admin, store = FakeLoki(), FakeAdmin(), FakeStore()
    ex = execution("q1w2e3r4t5y6u7i8o9p0", updated=WINDOW.start - timedelta(hours=1))
    att = attempt(ex)
    admin.add(ex, [att])
    signalled(loki, att)
    wrote_outputs(store, att, outputs=False)
    report = scan(loki, admin, store)
    assert verdicts(report) == [(str(att.ref), "affected")]
    assert admin.calls["GetExecution"] == 1


def test_what_a_source_could_not_answer_is_a_gap_and_the_rest_is_still_judged():
    loki, admin, store = FakeLoki(), FakeAdmin(), FakeStore()
    bad, _ = incident(loki, admin, store)
    other = execution("z9x8c7v6b5n4m3l2k1j0", project="nlp")
    admin.add(other, [attempt(other)])
    admin.fail("ListExecutions", "UNAVAILABLE: no healthy upstream", target="nlp/")
    broken = T0 + timedelta(hours=6)  # the last 6-hour shard; the signal's shard reads
    loki.fail(broken, broken + timedelta(minutes=1))
    settings = Settings(workers=4, loki=LokiSettings(shard=timedelta(hours=6)))
    report = ScanRun(fake_sources(settings, loki=loki, admin=admin, store=store), WINDOW).run()
    assert verdicts(report) == [(str(bad.ref), "affected")]
    assert [(g.source, g.start, g.end) for g in report.gaps] == [
        ("admin", WINDOW.start, WINDOW.end),
        ("admin", WINDOW.start, WINDOW.end),  # both listings of nlp/production
        # The attempts ended at T0, a shard where Loki holds no task log at all.
        ("loki", T0, broken),
        ("loki", broken, WINDOW.end),
    ]
    assert all("nlp/production" in g.error for g in report.gaps if g.source == "admin")
    assert report.gaps[2].error.startswith("logs absent")
    assert report.gaps[3].error == "HTTP 502 after 5 retries"


class StalledLoki(FakeLoki):
    """Loki whose shards never answer (until the test ends)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def scan(self, *args, **kw):
        from forensics.concurrency import stream

        def stalled(emit):
            self.release.wait(30)

        yield from stream("t-stalled-loki", [stalled], 1, buffer=1)


class BrokenAdmin(FakeAdmin):
    def sweep_attempts(self, ex, pointed=lambda n: False):
        raise RuntimeError("a bug in the sweep")


def test_an_error_in_the_sweep_stops_the_scan_while_loki_is_still_reading():
    loki, admin, store = StalledLoki(), BrokenAdmin(), FakeStore()
    incident(loki, admin, store)
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="a bug in the sweep"):
            scan(loki, admin, store)
        assert time.monotonic() - started < 5  # the stalled Loki read did not hold it up
        deadline = time.monotonic() + 5  # and the Loki read itself ended (it watches the stop)
        while time.monotonic() < deadline and any(
            t.name.startswith("loki") and t.is_alive() for t in threading.enumerate()
        ):
            time.sleep(0.05)
        assert not any(t.name.startswith("loki") and t.is_alive() for t in threading.enumerate())
    finally:
        loki.release.set()


class NodeReadsCounted(FakeAdmin):
    def __init__(self) -> None:
        super().__init__()
        self.node_reads = threading.Semaphore(0)

    def with_node(self, att: AttemptRecord) -> AttemptRecord:
        """The node execution read, naming Flyte's own checkpoint prefix."""
        out = super().with_node(att)
        self.node_reads.release()
        return replace(out, checkpoint_uri=f"s3://ck/{att.ref.execution.name}/")


class ListsAfterTwoNodeReads(FakeStore):
    """S3 whose checkpoint listings answer only once Admin read two node executions."""

    def __init__(self, admin: NodeReadsCounted) -> None:
        super().__init__()
        self.admin = admin
        self.waited = False

    def list_prefix(self, uri: str):
        if not self.waited:
            self.waited = True
            assert all(self.admin.node_reads.acquire(timeout=5) for _ in range(2))
        return super().list_prefix(uri)


def test_a_findings_checkpoint_admin_read_does_not_wait_for_another_findings_listing():
    # Admin and S3 each get `--workers` at once: with one worker, the second finding's node
    # read runs while the first finding's checkpoint is being listed (one pool for both
    # waited here for five seconds, then failed).
    loki, admin = FakeLoki(), NodeReadsCounted()
    store = ListsAfterTwoNodeReads(admin)
    affected = []
    for name in ("azvg5f9v9974m78fvlf7", "bq7k2m9x4c8d1f6h3j5n"):
        ex = execution(name)
        att = replace(attempt(ex), node_read=False)  # listed directly: its node not read
        admin.add(ex, [att])
        signalled(loki, att)
        wrote_outputs(store, att, outputs=False)
        affected.append((str(att.ref), "affected"))
    sources = fake_sources(Settings(workers=1), loki=loki, admin=admin, store=store)
    started = time.monotonic()
    report = ScanRun(sources, WINDOW).run()
    assert time.monotonic() - started < 4
    assert sorted(verdicts(report)) == affected
    assert [f.checkpoint.state for f in report.findings] == ["empty", "empty"]
