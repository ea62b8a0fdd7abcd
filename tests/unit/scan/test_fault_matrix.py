"""The scan's fault matrix against the in-process fakes (support/fakes.py, failures injected by
support/faulty.py): under each fault a source's client could not recover from, the report says
`complete: false` with gaps covering everything it lost, keeps everything else as the fault-free
run has it, and never claims more than the evidence it could read. The same matrix through the
CLI against the loopback servers, retries included: tests/scan/test_reliability_scan.py."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from support.fakes import (
    FakeAdmin,
    FakeLoki,
    FakeStore,
    attempt,
    execution,
    fake_sources,
    pod_labels,
    signal_line,
    signalled,
    wrote_outputs,
)
from support.faulty import Faulty, assert_incomplete_without_a_hole, assert_same_as

from forensics.config import CheckpointSettings, Settings
from forensics.errors import NotFoundError, SourceError
from forensics.model import UTC, AttemptRecord, Report, Window
from forensics.scan import ScanScope, scan

DAY = timedelta(days=1)
START = datetime(2026, 9, 9, tzinfo=UTC)
WINDOW = Window(START, START + 3 * DAY)  # three one-day Loki shards
SHARD_1 = Window(START, START + DAY)
# name, project, when its attempt ended, whether its pod logged SIGTERM, whether it wrote outputs
ATTEMPTS = [
    ("aaaa1111bbbb2222cc01", "gs1", START + timedelta(hours=12), True, False),  # affected
    ("bbbb1111bbbb2222cc02", "gs1", START + DAY + timedelta(hours=12), False, True),  # cleared
    ("cccc1111bbbb2222cc03", "gs1", START + 2 * DAY + timedelta(hours=12), True, False),
    ("dddd1111bbbb2222cc04", "nlp", START + DAY + timedelta(hours=18), True, False),
]
FIRST = "gs1:production:aaaa1111bbbb2222cc01/n0/0"
GHOST = "g0h0o0s0t0e0x0e0c0u0"  # a pod's execution that Admin does not know (deleted)


class World:
    """Three fakes holding the attempts of `ATTEMPTS`: each pod logged a line while it ran (so
    Loki holds task logs wherever attempts ended) and, if signalled, torch's SIGTERM line."""

    def __init__(self) -> None:
        self.loki, self.admin, self.store = FakeLoki(), FakeAdmin(), FakeStore()
        self.attempts: dict[str, AttemptRecord] = {}
        for name, project, ended, sig, outputs in ATTEMPTS:
            created, updated = ended - timedelta(hours=2), ended + timedelta(minutes=1)
            ex = execution(name, project=project, created=created, updated=updated)
            att = attempt(ex, ended=ended)
            self.admin.add(ex, [att])
            self.loki.push(pod_labels(att), ended - timedelta(minutes=30), "step 100 loss 0.1")
            if sig:
                signalled(self.loki, att, ended - timedelta(seconds=7))
            wrote_outputs(self.store, att, outputs)
            self.attempts[name] = att

    def scan(self, *, loki=None, admin=None, store=None, settings=None) -> Report:
        sources = fake_sources(
            settings or Settings(workers=4),
            loki=loki or self.loki,
            admin=admin or self.admin,
            store=store or self.store,
        )
        return scan(sources, WINDOW, ScanScope())


@pytest.fixture(scope="module")
def baseline() -> Report:
    report = World().scan()
    assert report.complete
    assert [(str(f.attempt), f.verdict) for f in report.findings] == [
        (FIRST, "affected"),
        ("nlp:production:dddd1111bbbb2222cc04/n0/0", "affected"),
        ("gs1:production:cccc1111bbbb2222cc03/n0/0", "affected"),
    ]
    assert report.summary.cleared == {"outputs-written": 1}
    return report


def by_attempt(report: Report) -> dict[str, object]:
    return {str(f.attempt): f for f in report.findings}


# -- Loki ------------------------------------------------------------------------------------


def test_a_loki_shard_lost_is_one_gap_at_its_boundaries_and_the_rest_is_as_without_it(baseline):
    w = World()
    w.loki.fail(SHARD_1.start, SHARD_1.end, "HTTP 503 from Loki after 4 attempts")
    report = w.scan()
    (gap,) = report.gaps
    assert (gap.source, gap.start, gap.end) == ("loki", SHARD_1.start, SHARD_1.end)
    assert "HTTP 503 from Loki after 4 attempts" in gap.error
    assert_incomplete_without_a_hole(report, baseline)
    got, want = by_attempt(report), by_attempt(baseline)
    assert {k: v for k, v in got.items() if k != FIRST} == {
        k: v for k, v in want.items() if k != FIRST
    }
    # Its signal was in the lost shard: Admin and S3 alone still flag it, as suspected.
    assert got[FIRST].verdict == "suspected" and got[FIRST].signal is None


def test_every_loki_shard_lost_is_gaps_over_the_whole_window_and_nothing_affected(baseline):
    w = World()
    w.loki.fail(WINDOW.start, WINDOW.end, "HTTP 502 from Loki after 4 attempts")
    report = w.scan()
    loki_gaps = sorted((g.start, g.end) for g in report.gaps if g.source == "loki")
    assert loki_gaps == [(START + i * DAY, START + (i + 1) * DAY) for i in range(3)]
    assert_incomplete_without_a_hole(report, baseline)
    assert report.summary.affected == 0  # no signal evidence at all: suspected only


# -- Flyte Admin -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rpc", ["ListProjects", "ListExecutions", "ListNodeExecutions", "ListTaskExecutions"]
)
def test_admin_down_for_one_rpc_is_incomplete_and_every_loss_is_inside_an_admin_gap(baseline, rpc):
    w = World()
    w.admin.fail(rpc, "UNAVAILABLE: failed to connect to all addresses")
    report = w.scan()
    assert w.admin.calls[rpc], f"the scan no longer calls {rpc}: pick another RPC"
    assert_incomplete_without_a_hole(report, baseline)
    assert all(g.source == "admin" and "UNAVAILABLE" in g.error for g in report.gaps)


def test_admin_down_for_one_project_leaves_the_others_as_they_were(baseline):
    w = World()
    w.admin.fail("ListExecutions", "UNAVAILABLE: no healthy upstream", target="nlp/")
    report = w.scan()
    assert report.gaps and all(
        g.source == "admin" and "nlp/production" in g.error for g in report.gaps
    )
    assert_incomplete_without_a_hole(report, baseline)
    got, want = by_attempt(report), by_attempt(baseline)
    assert {k: v for k, v in got.items() if k.startswith("gs1:")} == {
        k: v for k, v in want.items() if k.startswith("gs1:")
    }


def test_a_listing_broken_midway_is_a_gap_never_a_short_listing(baseline):
    w = World()
    admin = Faulty(w.admin)
    # The sweep reads a listing page by page where the source protocol has pages
    # (`list_execution_pages`), else execution by execution: broken after the first either way.
    faults = [
        admin.fail(
            method,
            lambda: SourceError(
                "admin", "ListExecutions: a full page came without a next-page token"
            ),
            times=None,
            after=1,
            when=lambda project, domain, **kw: project == "gs1",
        )
        for method in ("list_execution_pages", "list_executions")
    ]
    report = w.scan(admin=admin)
    assert any(f.fired for f in faults)
    assert report.gaps
    for g in report.gaps:
        assert g.source == "admin" and "without a next-page token" in g.error
        assert (g.start, g.end) == (WINDOW.start, WINDOW.end)
    assert_incomplete_without_a_hole(report, baseline)


def test_not_found_for_a_listed_execution_is_never_a_hole(baseline):
    # Deleted between its listing and the read of its attempts (a racing delete).
    w = World()
    admin = Faulty(w.admin)
    fault = admin.fail(
        "sweep_attempts",
        lambda: NotFoundError("admin", "ListNodeExecutions: NOT_FOUND: entry not found"),
        when=lambda ex, *a, **kw: ex.ref.name == "cccc1111bbbb2222cc03",
    )
    report = w.scan(admin=admin)
    assert fault.fired == 1
    if report.complete:
        assert_same_as(report, baseline)
    else:
        assert_incomplete_without_a_hole(report, baseline)


def test_a_signalled_pod_admin_does_not_know_is_unresolved_never_a_finding(baseline):
    w = World()
    at = START + timedelta(hours=3)
    labels = {"namespace": "gs1-production", "pod": f"{GHOST}-n0-0", "container": GHOST}
    w.loki.push(labels, at, signal_line(at))
    report = w.scan()
    assert [u.signal.pod for u in report.unresolved] == [f"{GHOST}-n0-0"]
    assert_same_as(report, baseline)


# -- S3 --------------------------------------------------------------------------------------


def test_outputs_that_cannot_be_read_are_s3_gaps_and_never_affected_on_a_guess(baseline):
    w = World()
    w.store.fail("s3://meta/", "throttled (503 SlowDown) after 3 attempts")
    report = w.scan()
    assert report.gaps and all(g.source == "s3" for g in report.gaps)
    assert all("SlowDown" in g.error for g in report.gaps)
    assert_incomplete_without_a_hole(report, baseline)
    assert report.summary.affected == 0
    assert all(f.outputs_written is None for f in report.findings)


def test_a_checkpoint_bucket_refused_is_unknown_with_the_reason_and_the_verdicts_stand(baseline):
    # Verdicts need outputs.pb (another bucket), not the checkpoint: no gap, nothing weaker.
    w = World()
    w.store.put("s3://models/gs1/aaaa1111bbbb2222cc01/step-1/shard.pt")
    w.store.fail("s3://models/", "AccessDenied (forbidden)")
    template = "s3://models/{project}/{name}/"
    report = w.scan(settings=Settings(workers=4, checkpoints=CheckpointSettings(template=template)))
    assert report.complete
    assert [(str(f.attempt), f.verdict) for f in report.findings] == [
        (str(f.attempt), f.verdict) for f in baseline.findings
    ]
    for f in report.findings:
        ck = f.checkpoint
        assert (ck.state, ck.objects, ck.latest) == ("unknown", 0, None)
        assert ck.reason == "AccessDenied (forbidden)"  # never "empty": it could not be listed
