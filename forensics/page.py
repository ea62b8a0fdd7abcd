"""What the incident page draws beyond the report: every attempt of each affected execution and
of its relaunch (docs/report.md, "The incident page").

A scan's report lists findings only; the page's timelines show every node attempt of the
executions the findings belong to, so it reads them after the scan: per execution one
GetExecution and `list_attempts`, and the same for an existing relaunch; and for a finding
whose checkpoint holds objects, when each was written (one S3 listing). A read that fails is
a gap of the page (drawn, and exit 3), never a silently shorter timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from forensics.errors import SourceError
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    Finding,
    Gap,
    Report,
)

if TYPE_CHECKING:  # the page's renderer imports this module: no flytekit for it
    from forensics.sources import Sources


@dataclass(frozen=True)
class ExecutionView:
    """One affected execution as the page draws it, with its relaunch when one exists."""

    ref: ExecutionRef
    execution: ExecutionRecord | None
    attempts: tuple[AttemptRecord, ...]
    findings: tuple[Finding, ...]
    relaunch: ExecutionRecord | None = None
    relaunch_attempts: tuple[AttemptRecord, ...] = ()
    # every write under a finding's checkpoint prefix (S3 LastModified), per attempt
    checkpoint_writes: Mapping[AttemptRef, tuple[datetime, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class IncidentPage:
    """A scan's report and the executions its page draws; `gaps` are the page's own reads."""

    report: Report
    executions: tuple[ExecutionView, ...]
    gaps: tuple[Gap, ...] = ()
    # Made from a saved JSON report (`merge -o html`): no source was read, so the executions'
    # timelines and the hourly signals (not in the JSON) are not drawn, and the page says so.
    saved: bool = False

    @property
    def relaunches(self) -> tuple[datetime, ...]:
        """When each existing relaunch of a finding's execution was created."""
        return tuple(
            v.relaunch.created_at
            for v in self.executions
            if v.relaunch is not None and v.relaunch.created_at is not None
        )


def saved_page(report: Report) -> IncidentPage:
    """The page of a saved or merged report (`merge -o html`): what the report holds, nothing
    read from a source (docs/report.md, "The incident page")."""
    return IncidentPage(report, (), saved=True)


def _read(
    sources: Sources, ref: ExecutionRef, gaps: list[Gap]
) -> tuple[ExecutionRecord | None, tuple[AttemptRecord, ...]]:
    try:
        ex = sources.admin.get_execution(ref)
        return ex, tuple(sources.admin.list_attempts(ref))
    except SourceError as e:
        gaps.append(
            Gap("admin", None, None, f"{ref} (for the page's timeline): {e.cause}", failure=e.kind)
        )
        return None, ()


def _writes(sources: Sources, f: Finding, gaps: list[Gap]) -> tuple[datetime, ...]:
    """When each object under the finding's checkpoint was written (none when it holds none)."""
    ck = f.checkpoint
    if ck.state != "present" or not ck.uri:
        return ()
    try:
        return tuple(sources.store.object_times(ck.uri))
    except SourceError as e:
        gaps.append(
            Gap("s3", None, None, f"checkpoint {ck.uri} (for the page): {e.cause}", failure=e.kind)
        )
        return ()


def gather_page(sources: Sources, report: Report) -> IncidentPage:
    """Read every attempt of the findings' executions and of their relaunches."""
    by_execution: dict[ExecutionRef, list[Finding]] = {}
    for f in report.findings:
        by_execution.setdefault(f.attempt.execution, []).append(f)
    gaps: list[Gap] = []
    views = []
    for ref, findings in by_execution.items():
        ex, attempts = _read(sources, ref, gaps)
        relaunch, relaunch_attempts = None, ()
        again = next((f.relaunched_as for f in findings if f.relaunched_as), None)
        if again is not None:
            relaunch, relaunch_attempts = _read(sources, again, gaps)
        writes = {f.attempt: _writes(sources, f, gaps) for f in findings}
        views.append(
            ExecutionView(ref, ex, attempts, tuple(findings), relaunch, relaunch_attempts, writes)
        )
    return IncidentPage(report, tuple(views), tuple(gaps))
