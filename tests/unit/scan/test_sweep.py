"""The Admin sweep: which executions the window's listings return, and existing relaunches."""

from __future__ import annotations

import threading
from datetime import timedelta

from support.fakes import T0, WINDOW, FakeAdmin, attempt, execution, fake_sources

from forensics.config import Settings
from forensics.detect import Decision, Verdict, build_finding
from forensics.model import Checkpoint, ExecutionRef, Gap, ObjectCheck
from forensics.scan import sweep
from forensics.scan.lookups import Lookups, executions_under
from forensics.scan.resolve import Projects
from forensics.scan.scope import ScanScope

DAYS_AGO = WINDOW.start - timedelta(days=3)


def swept(admin: FakeAdmin, scope=ScanScope()) -> tuple[list[str], list[str]]:
    """The names listed (in order, repeats kept) and the listings' errors."""
    slots = threading.BoundedSemaphore(4)
    projects = Projects(Settings())
    projects.load(admin, scope, slots)
    names: list[str] = []
    errors = []
    for project, domain, filters in sweep.listings(projects, scope, WINDOW):
        executions = executions_under(admin, slots, project, domain, filters)
        error = sweep.list_executions(executions, lambda ex: names.append(ex.ref.name))
        if error is not None:
            errors.append(error)
    return names, errors


def test_every_execution_an_attempt_may_have_ended_in_is_listed_once():
    admin = FakeAdmin()
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
    assert sorted(names) == sorted(
        [ex.ref.name for ex in inside] + [running.ref.name, archived.ref.name]
    )


def test_the_scope_limits_the_listings_to_its_projects_and_domains():
    admin = FakeAdmin()
    admin.add(execution("a" * 20, project="gs1", domain="production"))
    admin.add(execution("b" * 20, project="gs1", domain="development"))
    admin.add(execution("c" * 20, project="nlp", domain="production"))
    names, _ = swept(admin, ScanScope(projects=("gs1",), domains=("production",)))
    assert names == ["a" * 20]


def test_a_listing_that_fails_midway_says_why_and_keeps_what_it_read():
    admin = FakeAdmin()
    admin.page_size = 1
    for i in range(3):
        admin.add(execution(f"e{i:019d}"))
    pages = 0
    original = admin._call

    def third_page_fails(rpc, target):
        nonlocal pages
        if rpc == "ListExecutions":
            pages += 1
            if pages == 3:
                admin.fail("ListExecutions", "UNAVAILABLE: connection reset")
        original(rpc, target)

    admin._call = third_page_fails  # type: ignore[method-assign]
    names, errors = swept(admin)
    assert names == ["e0000000000000000000", "e0000000000000000001"]
    assert [e.cause for e in errors] == [
        "ListExecutions: UNAVAILABLE: connection reset",
        "ListExecutions: UNAVAILABLE: connection reset",
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


class CountingSlots(threading.BoundedSemaphore):
    """The scan's slots, counting how often one is taken."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.taken = 0

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        got = super().acquire(blocking, timeout)
        self.taken += got
        return got

    __enter__ = acquire


def test_a_listing_takes_a_slot_per_page_read_not_per_execution_handed_on():
    # The slots bound Admin calls in flight; a listing that took one for every execution it
    # handed on (most of them read from a page already in hand) kept the sweep's calls waiting.
    admin = FakeAdmin()
    admin.page_size = 2
    for i in range(5):
        admin.add(execution(f"e{i:019d}"))
    slots = CountingSlots(1)
    held_while_read = []
    original = admin._call

    def call(rpc, target):
        if rpc == "ListExecutions":
            free = slots.acquire(blocking=False)
            if free:
                slots.release()
                slots.taken -= 1  # this probe is not the listing's
            held_while_read.append(not free)
        return original(rpc, target)

    admin._call = call
    names = []
    executions = executions_under(admin, slots, "gs1", "production", "")
    error = sweep.list_executions(executions, lambda ex: names.append(ex.ref.name))
    assert error is None and len(names) == 5
    assert held_while_read == [True] * 3  # pages of 2, 2 and 1
    assert slots.taken == 4  # the three pages and the end of the listing
