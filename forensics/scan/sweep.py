"""The Admin sweep: the executions whose attempts may have ended in the window, listed in pages,
and the relaunches that exist already of the executions found."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from forensics.errors import SourceError
from forensics.model import (
    ExecutionRecord,
    ExecutionRef,
    Finding,
    Gap,
    Window,
    recovered_note,
)
from forensics.scan.lookups import Lookups
from forensics.scan.resolve import Projects
from forensics.scan.scope import ScanScope
from forensics.sources.admin_filters import attempts_may_end_during
from forensics.sources.admin_types import Reruns

Listing = tuple[str, str, str]  # project, domain, ListExecutions filters


def listings(
    projects: Projects, scope: ScanScope, window: Window, margin: timedelta = timedelta(0)
) -> list[Listing]:
    """Two disjoint listings per project and domain in scope: the executions that changed in
    the window, and those still running with an older `updated_at` (flyteadmin moves it only on
    workflow-level events, docs/upstream.md): every attempt that ended in the window is in one of them.
    Archived executions are listed too, and both are widened by the tolerated clock skew
    `margin` (`attempts_may_end_during`)."""
    if projects.domains_of is None:
        return []  # ListProjects failed: the gap is recorded
    domains_of = projects.domains_of
    names = list(scope.projects) or sorted(domains_of)
    pairs = [
        (p, d) for p in names for d in domains_of[p] if not scope.domains or d in scope.domains
    ]
    return [
        (project, domain, filters)
        for project, domain in pairs
        for filters in attempts_may_end_during(window.start, window.end, margin)
    ]


def relaunch_listings(
    findings: Sequence[Finding], executions: Mapping[ExecutionRef, ExecutionRecord]
) -> list[tuple[str, str, datetime]]:
    """The RELAUNCH listings that fill the findings' `relaunched_as`: one per project and domain
    with findings, since its earliest finding's execution was created."""
    scopes: dict[tuple[str, str], datetime] = {}
    for f in findings:
        ex = executions.get(f.attempt.execution)
        since = ex.created_at if ex and ex.created_at else f.succeeded_at
        key = (f.attempt.execution.project, f.attempt.execution.domain)
        if since is not None and (key not in scopes or since < scopes[key]):
            scopes[key] = since
    return [(project, domain, since) for (project, domain), since in sorted(scopes.items())]


def relaunches_in(lookups: Lookups, project: str, domain: str, since: datetime) -> Reruns | Gap:
    """The existing relaunches and recoveries in one project and domain, or the gap."""
    try:
        return lookups.relaunches(project, domain, since)
    except SourceError as e:
        # relaunched_as would read "not relaunched" for what is merely unknown.
        return Gap(
            "admin",
            since,
            None,
            f"existing relaunches in {project}/{domain} "
            f"could not be listed, relaunched_as may be missing: {e.cause}",
            failure=e.kind,
        )


def with_relaunches(findings: Sequence[Finding], found: Sequence[Reruns]) -> list[Finding]:
    """The findings with `relaunched_as` filled from the listings' answers, and each RECOVERED
    copy named (`recovered_as`, and a note): it copied the false success, it is no relaunch."""
    relaunches: dict[ExecutionRef, ExecutionRef] = {}
    recoveries: dict[ExecutionRef, tuple[ExecutionRef, ...]] = {}
    for answer in found:
        relaunches.update(answer.relaunches)
        recoveries.update(answer.recoveries)
    out = []
    for f in findings:
        ex = f.attempt.execution
        f = replace(f, relaunched_as=relaunches.get(ex))
        copies = recoveries.get(ex, ())
        if copies:
            notes = tuple(recovered_note(r) for r in copies)
            f = replace(f, recovered_as=copies, evidence=(*f.evidence, *notes))
        out.append(f)
    return out
