"""The Admin sweep: which executions the window's listings return, and existing relaunches."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from support.fakes import T0, WINDOW, FakeAdmin, attempt, execution, fake_sources

from forensics.config import Settings
from forensics.detect import Decision, Verdict, build_finding
from forensics.errors import SourceError
from forensics.model import Checkpoint, ExecutionRef, Gap, ObjectCheck
from forensics.scan import sweep
from forensics.scan.collect import collect
from forensics.scan.lookups import Lookups
from forensics.scan.scope import ScanScope

DAYS_AGO = WINDOW.start - timedelta(days=3)


class SweepingAdmin(FakeAdmin):
    """Admin recording each execution swept (in order) and the most calls it had in flight."""

    def __init__(self, call_seconds: float = 0.0) -> None:
        super().__init__()
        self.swept: list[str] = []
        self.call_seconds = call_seconds
        self.in_flight = self.most_in_flight = 0
        self._flight = threading.Lock()

    def _call(self, rpc: str, target: str) -> None:
        with self._flight:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.call_seconds)
            super()._call(rpc, target)
        finally:
            with self._flight:
                self.in_flight -= 1

    def sweep_attempts(self, ex):
        with self._flight:
            self.swept.append(ex.ref.name)
        return super().sweep_attempts(ex)


def swept(admin: SweepingAdmin, scope=ScanScope(), workers: int = 4) -> tuple[list[str], list[Gap]]:
    """The names the scan swept (in the order swept, repeats kept) and its Admin gaps."""
    collected = collect(fake_sources(Settings(workers=workers), admin=admin), WINDOW, scope)
    return admin.swept, [g for g in collected.gaps if g.source == "admin"]


def test_every_execution_an_attempt_may_have_ended_in_is_listed_once():
    admin = SweepingAdmin()
    admin.page_size = 2  # several pages per listing
    inside = [execution(f"in{i:018d}") for i in range(5)]
    for ex in inside:
        admin.add(ex)
    # Running since days ago: Admin moved its updated_at only when it started.
    running = execution("runningxxxxxxxxxxxxx", phase="RUNNING", created=DAYS_AGO, updated=DAYS_AGO)
    admin.add(running)
    archived = execution("archivedxxxxxxxxxxxx")
    admin.add(archived, archived=True)
    # Ended before the window, or created after it: no attempt of theirs ended in it.
    admin.add(execution("beforexxxxxxxxxxxxxx", created=DAYS_AGO, updated=DAYS_AGO))
    late = WINDOW.end + timedelta(hours=1)
    admin.add(execution("afterxxxxxxxxxxxxxxx", created=late, updated=late))
    names, errors = swept(admin)
    assert errors == []
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(
        [ex.ref.name for ex in inside] + [running.ref.name, archived.ref.name]
    )


def test_the_scope_limits_the_listings_to_its_projects_and_domains():
    admin = SweepingAdmin()
    admin.add(execution("a" * 20, project="gs1", domain="production"))
    admin.add(execution("b" * 20, project="gs1", domain="development"))
    admin.add(execution("c" * 20, project="nlp", domain="production"))
    names, _ = swept(admin, ScanScope(projects=("gs1",), domains=("production",)))
    assert names == ["a" * 20]


class BrokenMidway(SweepingAdmin):
    """Admin whose listings fail at their third page, as a connection reset does."""

    def list_execution_pages(self, *args, **kw):
        for i, page in enumerate(super().list_execution_pages(*args, **kw)):
            if i == 2:
                raise SourceError("admin", "ListExecutions: UNAVAILABLE: connection reset")
            yield page


def test_a_listing_that_fails_midway_says_why_and_keeps_what_it_read():
    admin = BrokenMidway()
    admin.page_size = 1
    for i in range(3):
        admin.add(execution(f"e{i:019d}"))
    names, gaps = swept(admin)
    assert sorted(names) == ["e0000000000000000000", "e0000000000000000001"]
    # One listing had three pages (the other, of running executions, one): one gap, the window.
    assert [(g.error, g.start, g.end) for g in gaps] == [
        (
            "gs1/production: ListExecutions: UNAVAILABLE: connection reset",
            WINDOW.start,
            WINDOW.end,
        )
    ]


def finding_of(ex):
    att = attempt(ex)
    decision = Decision(Verdict.AFFECTED, outputs=ObjectCheck("missing"))
    return build_finding(decision, ex, att, None, Checkpoint(None, "unknown"), {})


def test_findings_name_the_relaunch_that_exists_already():
    admin = FakeAdmin()
    original = execution("o" * 20)
    other = execution("p" * 20)
    admin.add(original)
    admin.add(other)
    relaunched = execution(
        "r" * 20, created=T0 + timedelta(hours=1), mode="RELAUNCH", reference=original.ref
    )
    admin.add(relaunched, archived=True)  # archived in the console: still a relaunch
    findings = [finding_of(original), finding_of(other)]
    listings = sweep.relaunch_listings(findings, {original.ref: original, other.ref: other})
    assert listings == [("gs1", "production", original.created_at)]  # one per project/domain
    lookups = Lookups(fake_sources(admin=admin))
    found = [sweep.relaunches_in(lookups, *x) for x in listings]
    assert not any(isinstance(f, Gap) for f in found)
    out = sweep.with_relaunches(findings, found)
    assert [f.relaunched_as for f in out] == [relaunched.ref, None]


def test_relaunches_that_cannot_be_listed_are_a_gap_not_a_no():
    admin = FakeAdmin()
    ex = execution("o" * 20)
    admin.add(ex)
    admin.fail("ListExecutions")
    findings = [finding_of(ex)]
    (listing,) = sweep.relaunch_listings(findings, {ex.ref: ex})
    gap = sweep.relaunches_in(Lookups(fake_sources(admin=admin)), *listing)
    assert isinstance(gap, Gap)
    out = sweep.with_relaunches(findings, [])
    assert out[0].relaunched_as is None
    gaps = [gap]
    assert [(g.source, g.start) for g in gaps] == [("admin", ex.created_at)]
    assert "relaunched_as may be missing" in gaps[0].error
    assert ExecutionRef("gs1", "production", "o" * 20) == ex.ref


@pytest.mark.parametrize("workers", [1, 3])
def test_the_sweep_keeps_workers_admin_calls_in_flight_and_never_more(workers):
    # Listing pages and sweeps share the admin pool's workers, one Admin call at a time each:
    # `--workers` bounds the calls in flight with no semaphore, and a page is read while the
    # executions of the one before are swept (the pool never waits for a listing).
    admin = SweepingAdmin(call_seconds=0.002)
    admin.page_size = 4
    for i in range(24):
        admin.add(execution(f"e{i:019d}"))
    names, gaps = swept(admin, workers=workers)
    assert gaps == [] and sorted(names) == sorted(f"e{i:019d}" for i in range(24))
    assert admin.most_in_flight == workers


def test_a_bug_in_the_sweep_stops_the_scan_and_is_raised():
    class Buggy(SweepingAdmin):
        def sweep_attempts(self, ex):
            raise ZeroDivisionError("a bug")

    admin = Buggy()
    for i in range(12):
        admin.add(execution(f"e{i:019d}"))
    with pytest.raises(ZeroDivisionError):
        swept(admin)
