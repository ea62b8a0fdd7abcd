"""What a report learns after it is built: the relaunches that exist already of its findings'
executions (`relaunched_as`) and what each finding cost (docs/report.md `cost`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from forensics.concurrency import Pools
from forensics.cost import TaskKey, price, totals
from forensics.detect import Cleared
from forensics.errors import NotFoundError, SourceError
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    Gap,
    Report,
    order_gaps,
)
from forensics.scan import sweep
from forensics.scan.build import Judged
from forensics.scan.lookups import Lookups
from forensics.sources.admin_types import TaskResources


def enrich(
    report: Report,
    judged: Sequence[Judged | Cleared],
    lookups: Lookups,
    workers: int,
) -> Report:
    """`report` with its findings' `relaunched_as` and `cost` filled (and the summary's cost
    totals), read `workers` at a time; a read that failed is a gap."""
    executions: dict[ExecutionRef, ExecutionRecord] = {}
    attempts: dict[AttemptRef, AttemptRecord] = {}
    for j in judged:
        if isinstance(j, Judged) and j.finding is not None:
            executions[j.evidence.execution.ref] = j.evidence.execution
            attempts[j.evidence.attempt.ref] = j.evidence.attempt
    gaps: list[Gap] = []
    listings = sweep.relaunch_listings(report.findings, executions)
    with Pools({"admin": workers}) as pools:
        answers = pools.results(
            [pools.submit("admin", sweep.relaunches_in, lookups, *x) for x in listings]
        )
    found = []
    for answer in answers:
        if isinstance(answer, Gap):
            gaps.append(answer)
        else:
            found.append(answer)
    findings = sweep.with_relaunches(report.findings, found)
    window = report.window

    def resources_of(task_id: TaskKey) -> TaskResources | str:
        """A finding's task requests: a template Admin cannot give is a gap, as any failed
        read is; an unregistered one is only `unknown`."""
        try:
            return lookups.task_resources(task_id)
        except NotFoundError:
            return "the task template is not registered (a dynamic task?)"
        except SourceError as e:
            why = f"task {':'.join(task_id)}: {e.cause}"
            gaps.append(Gap("admin", window.start, window.end, why, failure=e.kind))
            return f"reading the task template failed: {e.cause}"

    findings = price(findings, attempts, resources_of)
    return replace(
        report,
        findings=tuple(findings),
        summary=replace(report.summary, cost=totals(findings)),
        gaps=tuple(order_gaps([*report.gaps, *gaps], window)) if gaps else report.gaps,
    )
