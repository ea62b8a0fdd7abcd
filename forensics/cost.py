"""What the storm cost (docs/report.md `cost`): per finding and in totals per project and day.

A silent success lost the whole attempt: its outputs were never written, so whatever ran
downstream and any relaunch redo it. The GPU-hours (CPU-hours) lost are the attempt's run time
(Admin's start to its end) times the GPUs (CPUs) of every pod its task template requests
(`sources/task_resources.py`); a number the template does not give stays None and `unknown`
says why, never a guess. The newest checkpoint's age at the signal is the work a resume from
that checkpoint would redo.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from forensics.model import AttemptRecord, AttemptRef, Checkpoint, Cost, Finding, SignalHit
from forensics.sources.admin_types import TaskResources

HOUR = 3600.0


def _hours(seconds: float | None, per_attempt: float | None) -> float | None:
    if seconds is None or per_attempt is None:
        return None
    return round(seconds / HOUR * per_attempt, 4)


def checkpoint_age(checkpoint: Checkpoint, signal: SignalHit | None) -> float | None:
    """Seconds from the newest checkpoint write to the signal (None: no signal, no checkpoint
    written before it, or its listing unknown)."""
    if signal is None or checkpoint.latest is None or checkpoint.state != "present":
        return None
    age = (signal.at - checkpoint.latest).total_seconds()
    return age if age >= 0 else None


def cost_of(
    att: AttemptRecord,
    resources: TaskResources | None,
    checkpoint: Checkpoint,
    signal: SignalHit | None,
    why_no_template: str | None = None,
) -> Cost:
    """One finding's cost from its attempt and its task's requests (module docstring)."""
    unknown: list[str] = []
    run = None
    if att.started_at is not None and att.ended_at is not None:
        run = max(0.0, (att.ended_at - att.started_at).total_seconds())
    else:
        unknown.append("Admin records no start or end for the attempt")
    if resources is None:
        unknown.append(why_no_template or "no task template")
        return Cost(
            run_seconds=run,
            pods=None,
            gpus_per_pod=None,
            cpus_per_pod=None,
            accelerator=None,
            gpu_hours=None,
            cpu_hours=None,
            checkpoint_age_seconds=checkpoint_age(checkpoint, signal),
            source=None,
            unknown=tuple(unknown),
        )
    unknown += resources.unknown
    pods = resources.pods
    one_kind = len(pods) == 1
    return Cost(
        run_seconds=run,
        pods=resources.pod_count,
        gpus_per_pod=pods[0].gpus if one_kind else None,
        cpus_per_pod=pods[0].cpus if one_kind else None,
        accelerator=resources.accelerator,
        gpu_hours=_hours(run, resources.gpus),
        cpu_hours=_hours(run, resources.cpus),
        checkpoint_age_seconds=checkpoint_age(checkpoint, signal),
        source=resources.source,
        unknown=tuple(unknown),
    )


def finding_day(f: Finding) -> str:
    """The UTC day a finding is counted on: its signal's, else its false success's."""
    at = f.signal.at if f.signal else f.succeeded_at
    return at.strftime("%Y-%m-%d") if at else "unknown"


def _add(bucket: dict[str, Any], row: CostRow) -> None:
    bucket["findings"] += 1
    for key in ("gpu_hours", "cpu_hours"):
        value = getattr(row, key)
        if value is None:
            bucket[f"{key}_unknown"] += 1
        else:
            bucket[key] = round(bucket[key] + value, 4)


def _bucket() -> dict[str, Any]:
    return {
        "findings": 0,
        "gpu_hours": 0.0,
        "cpu_hours": 0.0,
        "gpu_hours_unknown": 0,
        "cpu_hours_unknown": 0,
    }


def totals(findings: Iterable[Finding]) -> dict[str, Any]:
    """The findings' GPU- and CPU-hours: all, per project, per UTC day; `*_unknown` counts the
    findings whose number is unknown (not in the sum, so a total is a lower bound then)."""
    return totals_of(
        CostRow(
            f.attempt.execution.project,
            finding_day(f),
            f.cost.gpu_hours if f.cost else None,
            f.cost.cpu_hours if f.cost else None,
        )
        for f in findings
    )


class CostRow(NamedTuple):
    """What the totals need of one finding (from a `Finding`, or from a report's JSON)."""

    project: str
    day: str  # YYYY-MM-DD (UTC), or "unknown"
    gpu_hours: float | None
    cpu_hours: float | None


def totals_of(rows: Iterable[CostRow]) -> dict[str, Any]:
    """`totals` over plain rows: the report's `summary.cost` (docs/report.md)."""
    total = _bucket()
    by_project: dict[str, dict[str, Any]] = {}
    by_day: dict[str, dict[str, Any]] = {}
    for row in rows:
        for bucket in (
            total,
            by_project.setdefault(row.project, _bucket()),
            by_day.setdefault(row.day, _bucket()),
        ):
            _add(bucket, row)
    total["by_project"] = dict(sorted(by_project.items()))
    total["by_day"] = dict(sorted(by_day.items()))
    return total


def known_sum(bucket: Mapping[str, Any], key: str) -> float | None:
    """A total of `totals` (`gpu_hours`, `cpu_hours`) as a headline may state it: None
    (unknown) when every finding in it has that number unknown — a sum of nothing known is not
    0 hours; otherwise the sum (a lower bound when some are unknown)."""
    findings = int(bucket.get("findings", 0))
    if findings and int(bucket.get(f"{key}_unknown", 0)) >= findings:
        return None
    return bucket.get(key)


TaskKey = tuple[str, str, str, str]


def price(
    findings: list[Finding],
    attempts: Mapping[AttemptRef, AttemptRecord],
    resources_of: Callable[[TaskKey], TaskResources | str],
) -> list[Finding]:
    """`findings` with their `cost`; `resources_of(task_id)` answers the task's requests or why
    it cannot (a string), and is asked once per distinct task."""
    known: dict[TaskKey, TaskResources | str] = {}
    out = []
    for f in findings:
        att = attempts.get(f.attempt)
        if att is None:
            out.append(f)
            continue
        found: TaskResources | str = "Admin records no task for the attempt"
        if att.task_id is not None:
            if att.task_id not in known:
                known[att.task_id] = resources_of(att.task_id)
            found = known[att.task_id]
        res = found if isinstance(found, TaskResources) else None
        why = found if isinstance(found, str) else None
        out.append(replace(f, cost=cost_of(att, res, f.checkpoint, f.signal, why)))
    return out
