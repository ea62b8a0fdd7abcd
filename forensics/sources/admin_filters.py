"""flyteadmin's list-filter language: `func(field,value)` filters joined with `+`, and sort keys.

Pure string building, checked against flyteadmin `pkg/manager/impl/util/filters.go` (the `+`
expression separator, `;` between list values) and `pkg/common/filters.go` (the functions).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from forensics.model import rfc3339

# flyteidl `admin/execution.proto` ExecutionMetadata.ExecutionMode: the number the `mode` column
# holds (tests/unit/sources/test_admin_filters.py checks it against flyteidl's own enum).
EXECUTION_MODES = {
    "MANUAL": 0,
    "SCHEDULED": 1,
    "SYSTEM": 2,
    "RELAUNCH": 3,
    "CHILD_WORKFLOW": 4,
    "RECOVERED": 5,
    "TRIGGER": 6,
}
# flyteidl `admin/execution.proto` ExecutionState (checked the same way).
EXECUTION_STATES = {"EXECUTION_ACTIVE": 0, "EXECUTION_ARCHIVED": 1}

# flyteadmin `common/filters.go::filterNameMappings`.
FILTER_FUNCTIONS = frozenset(
    {"eq", "ne", "gt", "gte", "lt", "lte", "contains", "not_like", "value_in", "value_not_in"}
)
# flyteadmin `validation.CheckValidExecutionID`: the name is lower-cased, then must match this and


# `id` is the executions table's own key: unique (stable pages) and increasing, so executions
# created during a scan land after the pages already read instead of shifting them.
DEFAULT_EXECUTION_SORT = "asc(id)"


def admin_filter(function: str, field: str, value: object) -> str:
    """One flyteadmin filter `func(field,value)`; lists join with `;`, datetimes render with `Z`."""
    if function not in FILTER_FUNCTIONS:
        raise ValueError(f"unknown flyteadmin filter function {function!r}")
    if isinstance(value, (list, tuple, set, frozenset)):
        rendered = ";".join(_filter_value(v) for v in value)
    else:
        rendered = _filter_value(value)
    return f"{function}({field},{rendered})"


def _filter_value(value: object) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("filter times must be timezone-aware")
        text = rfc3339(value) or ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    # flyteadmin splits the filter string on `+` before parsing (`util/filters.go`
    # filterExpressionSeperator), and list values on `;`.
    if "+" in text or ";" in text or not text:
        raise ValueError(f"filter value {text!r} cannot be expressed in flyteadmin's filter syntax")
    return text


def updated_since(t: datetime) -> str:
    """Executions whose closure was last updated at or after `t`."""
    return admin_filter("gte", "execution_updated_at", t)


def created_before(t: datetime) -> str:
    """Executions created strictly before `t` (`idx_executions_created_at` serves it)."""
    return admin_filter("lt", "execution_created_at", t)


def created_since(t: datetime) -> str:
    """Executions created at or after `t`."""
    return admin_filter("gte", "execution_created_at", t)


def live_during(start: datetime, end: datetime) -> str:
    """Executions that existed and changed in `[start, end)`: updated ≥ start, created < end."""
    return join_filters([updated_since(start), created_before(end)])


def updated_before(t: datetime) -> str:
    """Executions whose closure was last updated strictly before `t`."""
    return admin_filter("lt", "execution_updated_at", t)


# WorkflowExecution phases before a terminal one (flyteidl `core/execution.proto`); the executions
# table keeps the phase name, filtered as flytectl's `execution.phase in (FAILED;SUCCEEDED)` is.
RUNNING_PHASES = ("UNDEFINED", "QUEUED", "RUNNING", "SUCCEEDING", "FAILING", "ABORTING")


def any_state() -> str:
    """Executions whether active or archived.

    flyteadmin's ListExecutions adds `state = EXECUTION_ACTIVE` unless the request's filters
    name `state` (v1.16.8 `pkg/manager/impl/execution_manager.go` ListExecutions,
    addStateFilter): an execution archived in the console (or `flytectl update execution
    --archive`) is otherwise never listed, whatever its attempts did.
    """
    return admin_filter("value_in", "state", list(EXECUTION_STATES.values()))


def attempts_may_end_during(
    start: datetime, end: datetime, margin: timedelta = timedelta(0)
) -> list[str]:
    """Listings whose union holds every execution an attempt of which may have ended in
    `[start, end)`, each execution in exactly one of them, archived executions included
    (`any_state`).

    `margin` is the clock skew tolerated between an attempt's end and its execution's times: the
    end is the pod's time on its node (flyteplugins `k8s/pod/plugin.go`, the container's
    FinishedAt), `created_at`/`updated_at` are flyteadmin's from propeller's events
    (`transformers/execution.go`). A node `margin` ahead puts an end inside the window while
    `updated_at` lies before `start`; one behind, an end before `end` for an execution created
    after it. The listings are widened by `margin` on both sides; the attempts are still judged
    by their own end in `[start, end)`, so adjacent windows never report one attempt twice
    (docs/configuration.md `clock_skew`).

    flyteadmin moves an execution's `updated_at` only on workflow-level events
    (flyteadmin `pkg/repositories/transformers/execution.go`): a workflow created days ago and still running keeps
    the `updated_at` of its RUNNING event while its nodes succeed inside the window, so
    `live_during` alone misses it. Any execution that has reached a terminal phase since `start`
    has `updated_at >= start`; one whose `updated_at` is older must still be running now. Hence:
    `live_during(start, end)`, plus the executions created before `end`, not updated since
    `start`, and in a non-terminal phase now — few (what runs at scan time), and disjoint.
    """
    start, end = start - margin, end + margin
    still_running = join_filters(
        [phase_in(*RUNNING_PHASES), updated_before(start), created_before(end), any_state()]
    )
    return [join_filters([live_during(start, end), any_state()]), still_running]


def phase_in(*phases: str) -> str:
    """Executions in any of the given WorkflowExecution phases (enum names: `SUCCEEDED`)."""
    return admin_filter("value_in", "phase", list(phases))


def mode_is(mode: str) -> str:
    """Executions launched in `mode` (MANUAL, RELAUNCH, ...); the column holds the enum number."""
    return admin_filter("eq", "mode", EXECUTION_MODES[mode])


def join_filters(filters: str | Iterable[Any] | None) -> str:
    """A filter string, a list of filter strings or flytekit `Filter` objects, joined with `+`."""
    if filters is None:
        return ""
    if isinstance(filters, str):
        return filters
    parts = [f if isinstance(f, str) else f.to_flyte_idl() for f in filters]
    return "+".join(p for p in parts if p)
