"""A loopback Flyte Admin gRPC server (flyteidl's AdminServiceServicer) seeded from a Scenario.

State (`_AdminState`: protos built from the scenario dataclasses) is kept apart from the protocol
layer (`_Servicer`: validation, filters, pagination and errors as flyteadmin does them), as moto
splits models from responses. What it reproduces from flyteadmin (flyteorg/flyte v1):

- Filters (`util/filters.go`, `common/filters.go`): the string is split on `+`; each part must
  match `(.+)\\((.+),\\s?(.+)\\)` (else `invalid value for filters`); an entity prefix
  (`execution.`, `node_execution.`, ...) must be joinable (`'<e>' entity is not allowed in
  filters`); the column must exist in the model (`'<e>.<field>' is invalid filter`, entity codes
  `e`, `ne`, `te`, ...); then the function must be known (`unrecognized filter function: X`).
  Values stay strings (the database casts them); `;` separates list values.
- Pagination: `token` is a decimal offset (`invalid pagination token X for ListExecutions`); the
  response token is `str(offset + len)` exactly when `len == limit`; `limit == 0` is rejected.
  ListExecutions adds `state = ACTIVE` unless a filter names `state`. Sort keys must be columns
  (`invalid sort key 'x'`).
- ListNodeExecutions without `unique_parent_id` returns top-level nodes only, start-node and
  end-node included; with it, that parent's children (NOT_FOUND for an unknown parent).
- RelaunchExecution: NOT_FOUND for an unknown original, then name validation (lower-cased,
  `^[a-z][a-z\\-0-9]*$`, at most 63), then ALREADY_EXISTS for a taken name; a random 20-character
  name when none is given; the new execution has mode RELAUNCH, `reference_execution`, the same
  inputs and the request's `overwrite_cache`.

- RelaunchExecution copies the original's whole spec, `parent_node_execution` included (so a
  relaunched child re-attaches to its parent's node), whatever the original's phase (flyteadmin
  v1.16.8 `execution_manager.go::RelaunchExecution` has no phase check). CreateExecution keeps the
  request's spec metadata (mode, `reference_execution`; `principal` is Admin's) and needs the
  launch plan version to exist. Both check the launch plan's concurrency policy before the name
  is inserted (`checkLaunchPlanConcurrency`: QUEUED/RUNNING executions of the launch plan name,
  any version; at the limit ALREADY_EXISTS "concurrency limit (N) reached for launch plan X;
  skipping execution").
- GetLaunchPlan, ListLaunchPlans (one named launch plan's versions) and GetWorkflow (the compiled
  closure with each task's template: image, flytekit runtime version, cache settings).

Columns the sandbox cannot evaluate (closures, joins to other tables) answer UNIMPLEMENTED rather
than being silently ignored. Every call is recorded (`calls`) — RecoverExecution too, so tests
can assert it is never used.
"""

from __future__ import annotations

import operator
import random
import re
import string
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NoReturn

import grpc
from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    launch_plan_pb2,
    node_execution_pb2,
    project_pb2,
    task_execution_pb2,
    task_pb2,
    workflow_pb2,
)
from flyteidl.core import (
    catalog_pb2,
    compiler_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    security_pb2,
    tasks_pb2,
    types_pb2,
)
from flyteidl.core import execution_pb2 as core_execution_pb2
from flyteidl.core import (
    workflow_pb2 as core_workflow_pb2,
)
from flyteidl.event import event_pb2
from flyteidl.service import admin_pb2_grpc
from google.protobuf import message as pb_message
from google.protobuf.timestamp_pb2 import Timestamp

from forensics.model import UTC, ExecutionRef
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLaunchPlan,
    SandboxNode,
    SandboxTask,
    Scenario,
)
from forensics.timeutil import fromisoformat

Status = grpc.StatusCode
WfPhase = core_execution_pb2.WorkflowExecution.Phase
NodePhase = core_execution_pb2.NodeExecution.Phase
TaskPhase = core_execution_pb2.TaskExecution.Phase
Mode = execution_pb2.ExecutionMetadata.ExecutionMode

PAGE_TOKEN_FAULTS = ("early", "bogus", "repeat")


@dataclass
class AdminFaults:
    """Faults the sandbox Admin injects; safe to change while the server runs.

    `failures[method]` is a queue of status codes: each call of `method` pops one and fails
    with it. `lose_relaunch_response` relaunches for real, then answers UNAVAILABLE (that many
    times). `page_token` breaks the next-page token of `page_token_methods`: `early` drops it
    on a full page, `bogus` returns a non-numeric token, `repeat` returns the request's token.
    `unregistered_tasks` are unknown to GetTask (dynamic tasks need not be registered).
    `max_inline_bytes` mimics Admin's remote-data limit: larger inputs are only linked.
    `drop_cancelled`: a call whose client went away during its latency is not performed (as a
    Go flyteadmin's cancelled request context aborts its transaction); by default it is.
    """

    latency: float = 0.0
    latency_by_method: dict[str, float] = field(default_factory=dict)
    failures: dict[str, list[grpc.StatusCode]] = field(default_factory=dict)
    lose_relaunch_response: int = 0
    page_token: str | None = None
    page_token_methods: frozenset[str] = frozenset({"ListExecutions"})
    unregistered_tasks: set[tuple[str, str, str, str]] = field(default_factory=set)
    max_inline_bytes: int | None = None
    drop_cancelled: bool = False
    # Fail every list call whose `filters` contains the key (e.g. "mode" for relaunch look-ups).
    failing_filters: dict[str, grpc.StatusCode] = field(default_factory=dict)

    def fail_next(
        self, method: str, times: int = 1, code: grpc.StatusCode = Status.UNAVAILABLE
    ) -> None:
        """Make the next `times` calls of `method` fail with `code`."""
        self.failures.setdefault(method, []).extend([code] * times)


# -- time and identifiers ---------------------------------------------------------------------


def _ts(t: datetime | None) -> Timestamp | None:
    if t is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(t.astimezone(UTC))
    return ts


def _set_time(msg: Any, name: str, t: datetime | None) -> None:
    if t is not None:
        getattr(msg, name).CopyFrom(_ts(t))


def _set_duration(msg: Any, start: datetime | None, end: datetime | None) -> None:
    if start is not None and end is not None:
        msg.duration.FromTimedelta(end - start)


def _wf_id(p: str, d: str, n: str) -> identifier_pb2.WorkflowExecutionIdentifier:
    return identifier_pb2.WorkflowExecutionIdentifier(project=p, domain=d, name=n)


def _task_key(t: SandboxTask) -> tuple[str, str, str, str]:
    return (t.project, t.domain, t.name, t.version)


def _task_identifier(t: SandboxTask) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK,
        project=t.project,
        domain=t.domain,
        name=t.name,
        version=t.version,
    )


def _lp_identifier(lp: SandboxLaunchPlan, resource_type: int) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=resource_type,
        project=lp.project,
        domain=lp.domain,
        name=lp.name,
        version=lp.version,
    )


def _metadata_prefix(wf: identifier_pb2.WorkflowExecutionIdentifier) -> str:
    return f"s3://flyte-metadata/metadata/propeller/{wf.project}-{wf.domain}-{wf.name}"


def _go_proto(msg: pb_message.Message) -> str:
    """Roughly how Go's `%v` prints a proto identifier in flyteadmin's messages."""
    return " ".join(f'{f.name}:"{v}"' for f, v in msg.ListFields())


def _random_name() -> str:
    return random.choice(string.ascii_lowercase) + "".join(
        random.choices(string.ascii_lowercase + string.digits, k=19)
    )


def _generated_name(attempt: SandboxAttempt) -> str:
    """PyTorchJob pods are `<generated>-master-0` / `<generated>-worker-N`; plain pods are it."""
    first = attempt.pods[0] if attempt.pods else ""
    if attempt.task.task_type == "pytorch":
        m = re.fullmatch(r"(.+)-(master|worker)-\d+", first)
        if m:
            return m.group(1)
    return first


# -- filters and sorting (flyteadmin's syntax and errors) --------------------------------------

# Entity codes (`common/entity.go`) and filter prefixes (`util/filters.go`).
EXECUTION, NODE_EXECUTION, TASK_EXECUTION, TASK = "e", "ne", "te", "t"
_PREFIXES = {
    "task": "t",
    "workflow": "w",
    "launch_plan": "l",
    "execution": "e",
    "node_execution": "ne",
    "task_execution": "te",
    "entities": "nen",
    "named_entity_metadata": "nem",
    "project": "p",
    "signal": "s",
    "admin_tag": "at",
    "execution_admin_tag": "eat",
}
_JOINS = {
    EXECUTION: {"e", "l", "w", "t", "at"},
    NODE_EXECUTION: {"ne", "e"},
    TASK_EXECUTION: {"te", "t", "e", "ne"},
    "p": {"p"},
}


def _names(text: str) -> set[str]:
    return set(text.split())


_BASE = _names("id created_at updated_at deleted_at")
_EXEC_KEY = _names("execution_project execution_domain execution_name execution_org")
# gorm DB names of each model (`repositories/models/*.go`, via `modelColumns`).
_COLUMNS: dict[str, set[str]] = {
    EXECUTION: _BASE
    | _EXEC_KEY
    | _names(
        "launch_plan_id workflow_id task_id phase closure spec started_at execution_created_at "
        "execution_updated_at duration abort_cause mode source_execution_id "
        "parent_node_execution_id cluster inputs_uri user_inputs_uri error_kind error_code user "
        "state launch_entity"
    ),
    NODE_EXECUTION: _BASE
    | _EXEC_KEY
    | _names(
        "node_id phase input_uri closure started_at node_execution_created_at "
        "node_execution_updated_at duration node_execution_metadata parent_id "
        "parent_task_execution_id error_kind error_code cache_status "
        "dynamic_workflow_remote_closure_reference internal_data"
    ),
    TASK_EXECUTION: _BASE
    | _EXEC_KEY
    | _names(
        "project domain name version node_id retry_attempt phase phase_version input_uri closure "
        "started_at task_execution_created_at task_execution_updated_at duration"
    ),
    TASK: _BASE | _names("project domain name version closure digest type"),
    "l": _BASE | _names("project domain name version spec closure state"),
    "w": _BASE | _names("project domain name version closure digest"),
    "at": _BASE | {"name"},
    "p": _BASE | _names("identifier name description labels state org"),
}
_FILTER_RE = re.compile(r"(.+)\((.+),\s?(.+)\)")
_FUNCS = {"contains", "not_like", "gt", "gte", "lt", "lte", "eq", "ne", "value_in", "value_not_in"}
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}


class _Abort(Exception):
    """A gRPC status to answer with."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _db_error(message: str) -> NoReturn:
    # flyteadmin's postgres transformer: any non-unique-violation error -> Unknown.
    raise _Abort(Status.UNKNOWN, f"failed database operation with {message}")


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


@dataclass(frozen=True)
class _Column:
    kind: str  # "str" | "int" | "time" | "duration"
    get: Callable[[Any], Any]


@dataclass(frozen=True)
class _Filter:
    function: str
    column: _Column
    values: tuple[Any, ...]

    def __call__(self, row: Any) -> bool:
        v = self.column.get(row)
        if v is None:  # SQL NULL compares false
            return False
        f, vals = self.function, self.values
        if f in ("value_in", "value_not_in"):
            return (v in vals) == (f == "value_in")
        if len(vals) != 1:
            _db_error(f'syntax error in "{f}" with a list of values')
        x = vals[0]
        if f in ("contains", "not_like"):
            if self.column.kind != "str":
                _db_error("operator does not exist: LIKE on a non-text column")
            if f == "contains":
                return x in v
            pattern = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in x)
            return re.fullmatch(pattern, v, re.S) is None
        return _COMPARE[f](v, x)


def _typed(kind: str, raw: str) -> Any:
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            _db_error(f'invalid input syntax for type integer: "{raw}"')
    if kind == "time":
        try:
            t = fromisoformat(raw.replace(" ", "T"))  # Postgres reads `Z` on every Python
        except ValueError:
            _db_error(f'invalid input syntax for type timestamp with time zone: "{raw}"')
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    return raw


def _go_duration_ns(raw: str) -> int:
    """flyteadmin `prepareValues` for `duration`: a bare float is seconds, else Go ParseDuration."""
    try:
        return int(float(raw) * 10**9)
    except ValueError:
        pass
    sign = -1 if raw.startswith("-") else 1
    body = raw.lstrip("+-")
    parts = _GO_DURATION.findall(body)
    if not body or "".join(n + u for n, u in parts) != body:
        raise _Abort(Status.INVALID_ARGUMENT, f"Failed to parse duration [{raw}]")
    return sign * int(sum(float(n) * _GO_UNITS[u] for n, u in parts))


def parse_filters(text: str, entity: str, columns: dict[str, _Column]) -> list[_Filter]:
    """flyteadmin's `ParseFilters` for `entity`, compiled to predicates over the sandbox rows."""
    out: list[_Filter] = []
    for expression in text.split("+"):
        m = _FILTER_RE.search(expression)
        if m is None:
            raise _Abort(Status.INVALID_ARGUMENT, "invalid value for filters")
        function, field_name, raw = m.group(1), m.group(2), m.group(3)
        referenced = entity
        for prefix, code in _PREFIXES.items():
            if field_name.startswith(prefix + "."):
                referenced, field_name = code, field_name[len(prefix) + 1 :]
                break
        if referenced not in _JOINS[entity]:
            raise _Abort(
                Status.INVALID_ARGUMENT, f"'{referenced}' entity is not allowed in filters"
            )
        if field_name not in _COLUMNS[referenced]:
            raise _Abort(Status.INVALID_ARGUMENT, f"'{referenced}.{field_name}' is invalid filter")
        values = raw.split(";")
        if field_name.lower() == "duration":
            values = [_go_duration_ns(v) for v in values]  # type: ignore[misc]
        if function not in _FUNCS:
            raise _Abort(Status.INVALID_ARGUMENT, f"unrecognized filter function: {function}")
        column = columns.get(field_name) if referenced == entity else None
        if column is None:
            raise _Abort(
                Status.UNIMPLEMENTED,
                f"the sandbox Admin does not evaluate filters on {referenced}.{field_name}",
            )
        typed = tuple(
            v if isinstance(v, int) and column.kind == "duration" else _typed(column.kind, v)
            for v in values
        )
        out.append(_Filter(function, column, typed))
    return out


def _sorted(
    rows: list[Any],
    sort_by: common_pb2.Sort | None,
    entity: str,
    columns: dict[str, _Column],
    has: bool,
) -> list[Any]:
    if not has:
        return rows  # no ORDER BY: the sandbox keeps insertion (row id) order
    key = sort_by.key  # type: ignore[union-attr]
    if key not in _COLUMNS[entity]:
        raise _Abort(Status.INVALID_ARGUMENT, f"invalid sort key '{key}'")
    column = columns.get(key)
    if column is None:
        raise _Abort(Status.UNIMPLEMENTED, f"the sandbox Admin does not sort by {key}")
    present = [r for r in rows if column.get(r) is not None]
    nulls = [r for r in rows if column.get(r) is None]
    if sort_by.direction == common_pb2.Sort.ASCENDING:  # type: ignore[union-attr]
        return sorted(present, key=column.get) + nulls  # Postgres: NULLS LAST ascending
    return nulls + sorted(present, key=column.get, reverse=True)


def _page(rows: list[Any], limit: int, token: str, rpc: str) -> tuple[list[Any], str]:
    try:
        offset = int(token) if token else 0
    except ValueError:
        offset = -1
    if offset < 0:
        raise _Abort(Status.INVALID_ARGUMENT, f"invalid pagination token {token} for {rpc}")
    page = rows[offset : offset + limit]
    return page, str(offset + len(page)) if len(page) == limit else ""


# -- state --------------------------------------------------------------------------------------


@dataclass
class _Exec:
    row: int
    execution: execution_pb2.Execution
    inputs: literals_pb2.LiteralMap
    nodes: list[_Node] = field(default_factory=list)


@dataclass
class _Node:
    row: int
    proto: node_execution_pb2.NodeExecution
    parent: str | None
    tasks: list[task_execution_pb2.TaskExecution] = field(default_factory=list)
    task_defs: list[SandboxTask] = field(default_factory=list)
    inputs: literals_pb2.LiteralMap = field(default_factory=literals_pb2.LiteralMap)


_EXEC_COLUMNS: dict[str, _Column] = {
    "id": _Column("int", lambda r: r.row),
    "execution_project": _Column("str", lambda r: r.execution.id.project),
    "execution_domain": _Column("str", lambda r: r.execution.id.domain),
    "execution_name": _Column("str", lambda r: r.execution.id.name),
    "phase": _Column("str", lambda r: WfPhase.Name(r.execution.closure.phase)),
    "mode": _Column("int", lambda r: r.execution.spec.metadata.mode),
    "state": _Column("int", lambda r: 0),  # every sandbox execution is ACTIVE
    "user": _Column("str", lambda r: r.execution.spec.metadata.principal),
    "launch_entity": _Column("str", lambda r: "launch_plan"),
    "execution_created_at": _Column("time", lambda r: _dt(r.execution.closure, "created_at")),
    "execution_updated_at": _Column("time", lambda r: _dt(r.execution.closure, "updated_at")),
    "created_at": _Column("time", lambda r: _dt(r.execution.closure, "created_at")),
    "updated_at": _Column("time", lambda r: _dt(r.execution.closure, "updated_at")),
    "started_at": _Column("time", lambda r: _dt(r.execution.closure, "started_at")),
    "duration": _Column("duration", lambda r: _ns(r.execution.closure)),
}
_NODE_COLUMNS: dict[str, _Column] = {
    "id": _Column("int", lambda r: r.row),
    "node_id": _Column("str", lambda r: r.proto.id.node_id),
    "phase": _Column("str", lambda r: NodePhase.Name(r.proto.closure.phase)),
    "started_at": _Column("time", lambda r: _dt(r.proto.closure, "started_at")),
    "duration": _Column("duration", lambda r: _ns(r.proto.closure)),
}
_TASK_EXEC_COLUMNS: dict[str, _Column] = {
    "retry_attempt": _Column("int", lambda r: r.id.retry_attempt),
    "phase": _Column("str", lambda r: TaskPhase.Name(r.closure.phase)),
    "node_id": _Column("str", lambda r: r.id.node_execution_id.node_id),
    "started_at": _Column("time", lambda r: _dt(r.closure, "started_at")),
}


def _literal_map(values: dict[str, str | list[str]]) -> literals_pb2.LiteralMap:
    """String literals; a list becomes a collection of them (a map task's per-subtask inputs)."""

    def one(v: str) -> literals_pb2.Literal:
        return literals_pb2.Literal(
            scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(string_value=v))
        )

    literals = {}
    for k, v in values.items():
        if isinstance(v, list):
            literals[k] = literals_pb2.Literal(
                collection=literals_pb2.LiteralCollection(literals=[one(x) for x in v])
            )
        else:
            literals[k] = one(v)
    return literals_pb2.LiteralMap(literals=literals)


def _dt(msg: Any, name: str) -> datetime | None:
    return getattr(msg, name).ToDatetime(tzinfo=UTC) if msg.HasField(name) else None


def _ns(closure: Any) -> int | None:
    return closure.duration.ToNanoseconds() if closure.HasField("duration") else None


class _AdminState:
    """Executions, node and task executions, tasks and projects as Admin would store them."""

    def __init__(self, scenario: Scenario, namespace_template: str) -> None:
        self.lock = threading.RLock()
        self.namespace_template = namespace_template
        self.executions: dict[tuple[str, str, str], _Exec] = {}
        self.tasks: dict[tuple[str, str, str, str], SandboxTask] = {}
        self.domains = list(scenario.domains)
        self._rows = 0
        # ListExecutions answers per query, valid while `version` (bumped by every change to
        # `executions`) stands: offset paging re-reads the same rows page after page, and
        # filtering every row again per page made a large sweep quadratic.
        self.version = 0
        self._listings: OrderedDict[tuple[Any, ...], tuple[int, list[_Exec]]] = OrderedDict()
        self.launch_plans: dict[tuple[str, str, str, str], SandboxLaunchPlan] = {}
        for t in scenario.tasks:
            self.tasks[_task_key(t)] = t
        for lp in scenario.launch_plans:
            self.launch_plans[(lp.project, lp.domain, lp.name, lp.version)] = lp
            for _, t in lp.nodes:
                self.tasks.setdefault(_task_key(t), t)
        for ex in sorted(scenario.executions, key=lambda e: e.created_at):
            self._seed(ex)
            self._derive_launch_plan(ex)

    def _derive_launch_plan(self, ex: SandboxExecution) -> None:
        key = (ex.launch_plan[0] or ex.project, ex.launch_plan[1] or ex.domain, *ex.launch_plan[2:])
        lp = self.launch_plans.setdefault(key, SandboxLaunchPlan(*key, created_at=ex.created_at))
        known = {n for n, _ in lp.nodes}
        for node in ex.nodes:
            if node.parent_unique_id is None and node.attempts and node.node_id not in known:
                lp.nodes.append((node.node_id, node.attempts[-1].task))
                known.add(node.node_id)

    def active_count(self, lp_name: tuple[str, str, str]) -> int:
        """QUEUED/RUNNING executions of a launch plan name, any version (the concurrency count)."""
        active = {WfPhase.Value("QUEUED"), WfPhase.Value("RUNNING")}
        return sum(
            1
            for r in self.executions.values()
            if r.execution.closure.phase in active
            and (
                r.execution.spec.launch_plan.project,
                r.execution.spec.launch_plan.domain,
                r.execution.spec.launch_plan.name,
            )
            == lp_name
        )

    def next_row(self) -> int:
        self._rows += 1
        return self._rows

    def listing(self, key: tuple[Any, ...], compute: Callable[[], list[_Exec]]) -> list[_Exec]:
        """The rows of one ListExecutions query (all pages), computed once per state version."""
        cached = self._listings.get(key)
        if cached is not None and cached[0] == self.version:
            self._listings.move_to_end(key)
            return cached[1]
        rows = compute()
        self._listings[key] = (self.version, rows)
        if len(self._listings) > 64:
            self._listings.popitem(last=False)
        return rows

    # The scenario's executions, as propeller's events would have left them in Admin.
    def _seed(self, ex: SandboxExecution) -> None:
        spec = execution_pb2.ExecutionSpec(
            launch_plan=identifier_pb2.Identifier(
                resource_type=identifier_pb2.LAUNCH_PLAN,
                project=ex.launch_plan[0] or ex.project,
                domain=ex.launch_plan[1] or ex.domain,
                name=ex.launch_plan[2],
                version=ex.launch_plan[3],
            ),
            metadata=execution_pb2.ExecutionMetadata(mode=Mode.Value(ex.mode), principal="sandbox"),
            labels=common_pb2.Labels(values=ex.labels),
        )
        if ex.reference_execution is not None:
            spec.metadata.reference_execution.CopyFrom(_wf_id(*ex.reference_execution))
        if ex.parent is not None:
            # propeller's launch-plan node launches the child with mode CHILD_WORKFLOW, the
            # parent's node execution id and nesting + 1 (flytepropeller
            # `nodes/subworkflow/launchplan/admin.go` Launch).
            project, domain, name, node_id = ex.parent
            spec.metadata.mode = Mode.Value("CHILD_WORKFLOW")
            spec.metadata.nesting = 1
            spec.metadata.parent_node_execution.CopyFrom(
                identifier_pb2.NodeExecutionIdentifier(
                    node_id=node_id, execution_id=_wf_id(project, domain, name)
                )
            )
        if ex.annotations:
            spec.annotations.CopyFrom(common_pb2.Annotations(values=ex.annotations))
        if ex.service_account:
            spec.security_context.CopyFrom(
                security_pb2.SecurityContext(
                    run_as=security_pb2.Identity(k8s_service_account=ex.service_account)
                )
            )
        if ex.raw_output_prefix:
            spec.raw_output_data_config.output_location_prefix = ex.raw_output_prefix
        closure = execution_pb2.ExecutionClosure(phase=WfPhase.Value(ex.phase))
        started = (
            ex.created_at + timedelta(seconds=1)
            if ex.phase not in ("UNDEFINED", "QUEUED")
            else None
        )
        # flyteadmin moves an execution's updated_at only on workflow-level events
        # (flyteadmin `transformers/execution.go`; node and task events never
        # touch the row, FACTS §13): a terminal execution's is its end, a running one's the
        # RUNNING event's, however recently its nodes changed.
        terminal = ex.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")
        _set_time(closure, "created_at", ex.created_at)
        _set_time(closure, "updated_at", ex.updated_at if terminal else started or ex.created_at)
        _set_time(closure, "started_at", started)
        if ex.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"):
            _set_duration(closure, started, ex.updated_at)
        execution = execution_pb2.Execution(
            id=_wf_id(ex.project, ex.domain, ex.name), spec=spec, closure=closure
        )
        rec = _Exec(self.next_row(), execution, _literal_map(ex.inputs))
        start_node = self._node_proto(ex, "start-node", "SUCCEEDED", ex.created_at, ex.created_at)
        rec.nodes.append(_Node(self.next_row(), start_node, None))
        for node in ex.nodes:
            rec.nodes.append(self._node(ex, node))
        if ex.phase == "SUCCEEDED":
            end = self._node_proto(ex, "end-node", "SUCCEEDED", ex.updated_at, ex.updated_at)
            rec.nodes.append(_Node(self.next_row(), end, None))
        self.executions[(ex.project, ex.domain, ex.name)] = rec
        self.version += 1

    def _node_proto(
        self,
        ex: SandboxExecution,
        node_id: str,
        phase: str,
        start: datetime | None,
        end: datetime | None,
    ) -> node_execution_pb2.NodeExecution:
        closure = node_execution_pb2.NodeExecutionClosure(phase=NodePhase.Value(phase))
        _set_time(closure, "started_at", start)
        _set_time(closure, "created_at", start)
        _set_time(closure, "updated_at", end or start)
        _set_duration(closure, start, end)
        return node_execution_pb2.NodeExecution(
            id=identifier_pb2.NodeExecutionIdentifier(
                node_id=node_id, execution_id=_wf_id(ex.project, ex.domain, ex.name)
            ),
            input_uri=f"{ex.node_data_dir(node_id)}/inputs.pb",
            closure=closure,
            metadata=node_execution_pb2.NodeExecutionMetaData(spec_node_id=node_id),
        )

    def _node(self, ex: SandboxExecution, node: SandboxNode) -> _Node:
        starts = [a.started_at for a in node.attempts]
        ends = [a.ended_at for a in node.attempts if a.ended_at is not None]
        start = min(starts) if starts else ex.created_at
        end = (
            max(ends)
            if ends and node.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")
            else None
        )
        proto = self._node_proto(ex, node.node_id, node.phase, start, end)
        proto.metadata.CopyFrom(
            node_execution_pb2.NodeExecutionMetaData(
                spec_node_id=node.spec_node_id or node.node_id,
                is_parent_node=node.is_parent,
                is_dynamic=node.is_dynamic,
                is_array=node.is_array,
                retry_group="0" if node.parent_unique_id else "",
            )
        )
        tnm = proto.closure.task_node_metadata
        tnm.cache_status = catalog_pb2.CACHE_DISABLED
        if node.checkpoint_uri:
            tnm.checkpoint_uri = node.checkpoint_uri
        if node.phase == "SUCCEEDED" and node.attempts:
            last = node.attempts[-1].attempt
            proto.closure.output_uri = f"{ex.node_data_dir(node.node_id)}/{last}/outputs.pb"
        if node.child_execution is not None:
            # A launch-plan node: Admin links the child execution; it has no task executions.
            # (flyteidl spells this one field `executionId` in admin/node_execution.proto.)
            proto.closure.workflow_node_metadata.executionId.CopyFrom(_wf_id(*node.child_execution))
            proto.closure.ClearField("task_node_metadata")
        rec = _Node(self.next_row(), proto, node.parent_unique_id, inputs=_literal_map(node.inputs))
        for a in node.attempts:
            self.tasks.setdefault(_task_key(a.task), a.task)
            te = self._task_execution(ex, node, a)
            if node.is_array:
                _array_shape(te, ex, node, a)
            rec.tasks.append(te)
            rec.task_defs.append(a.task)
        return rec

    def _task_execution(
        self, ex: SandboxExecution, node: SandboxNode, a: SandboxAttempt
    ) -> task_execution_pb2.TaskExecution:
        closure = task_execution_pb2.TaskExecutionClosure(
            phase=TaskPhase.Value(a.phase), task_type=a.task.task_type, reason=a.reason
        )
        # The container plugin takes a single-pod attempt's end from the container's FinishedAt,
        # which Kubernetes keeps in whole seconds (flyteplugins `k8s/pod/plugin.go`,
        # `pod_helper.go`; FACTS §13); for a PyTorchJob propeller stamps the end itself when it
        # observes the job's success, so the scenario's time stands.
        end = a.ended_at
        if end is not None and a.task.task_type != "pytorch":
            end = end.replace(microsecond=0)
        _set_time(closure, "started_at", a.started_at)
        _set_time(closure, "created_at", a.started_at)
        _set_time(closure, "updated_at", end or a.started_at)
        _set_duration(closure, a.started_at, end)
        data_dir = ex.node_data_dir(node.node_id)
        input_uri = f"{data_dir}/inputs.pb"
        if a.inline_outputs:
            # Inline raw-output policy: inputs and outputs travel in the events and flyteadmin
            # offloads both under its own prefix (`transformers/task_execution.go`).
            input_uri = ex.offloaded_uri(node.node_id, a, "offloaded_inputs")
        if a.phase == "SUCCEEDED" and a.inline_outputs:
            closure.output_uri = ex.offloaded_uri(node.node_id, a, "offloaded_outputs")
        elif a.phase == "SUCCEEDED":
            # propeller reports OutputWriter.GetOutputPath() on success, whether or not the task
            # wrote the file — which is the whole incident.
            closure.output_uri = f"{data_dir}/{a.attempt}/outputs.pb"
        elif a.phase in ("FAILED", "RETRYABLE_FAILED"):
            closure.error.CopyFrom(
                core_execution_pb2.ExecutionError(
                    code="USER:Unknown",
                    message=a.reason,
                    kind=core_execution_pb2.ExecutionError.USER,
                )
            )
        generated = _generated_name(a)
        container = "pytorch" if a.task.task_type == "pytorch" else generated
        closure.metadata.CopyFrom(
            event_pb2.TaskExecutionMetadata(
                generated_name=generated,
                plugin_identifier="pytorch" if a.task.task_type == "pytorch" else "container",
            )
        )
        if a.pods:
            namespace = self.namespace_template.format(project=ex.project, domain=ex.domain)
            closure.log_context.primary_pod_name = a.pods[0]
            for pod in a.pods:
                closure.log_context.pods.append(
                    core_execution_pb2.PodLogContext(
                        namespace=namespace,
                        pod_name=pod,
                        primary_container_name=container,
                        containers=[core_execution_pb2.ContainerContext(container_name=container)],
                    )
                )
        return task_execution_pb2.TaskExecution(
            id=identifier_pb2.TaskExecutionIdentifier(
                task_id=_task_identifier(a.task),
                node_execution_id=identifier_pb2.NodeExecutionIdentifier(
                    node_id=node.node_id, execution_id=_wf_id(ex.project, ex.domain, ex.name)
                ),
                retry_attempt=a.attempt,
            ),
            input_uri=input_uri,
            closure=closure,
            is_parent=node.is_parent,
        )

    @staticmethod
    def template(t: SandboxTask) -> tasks_pb2.TaskTemplate:
        outputs = interface_pb2.VariableMap()
        if t.has_outputs:
            outputs.variables["o0"].CopyFrom(
                interface_pb2.Variable(type=types_pb2.LiteralType(simple=types_pb2.STRING))
            )
        metadata = tasks_pb2.TaskMetadata(
            runtime=tasks_pb2.RuntimeMetadata(
                type=tasks_pb2.RuntimeMetadata.FLYTE_SDK, version=t.runtime_version, flavor="python"
            ),
            discoverable=t.cacheable,
            discovery_version=t.cache_version,
        )
        if t.interruptible is not None:
            metadata.interruptible = t.interruptible
        return tasks_pb2.TaskTemplate(
            id=_task_identifier(t),
            type=t.task_type,
            task_type_version=t.task_type_version,
            interface=interface_pb2.TypedInterface(outputs=outputs),
            metadata=metadata,
            # flytekit serializes both single-node and PyTorchJob tasks with a container
            container=tasks_pb2.Container(image=t.image, args=["pyflyte-execute"]),
        )

    def launch_plan_proto(self, lp: SandboxLaunchPlan) -> launch_plan_pb2.LaunchPlan:
        ident = _lp_identifier(lp, identifier_pb2.LAUNCH_PLAN)
        # the launch plan's workflow has the same name and version in the sandbox
        spec = launch_plan_pb2.LaunchPlanSpec(
            workflow_id=_lp_identifier(lp, identifier_pb2.WORKFLOW)
        )
        if lp.concurrency_max is not None:
            spec.concurrency_policy.max = lp.concurrency_max
            spec.concurrency_policy.behavior = (
                launch_plan_pb2.ConcurrencyLimitBehavior.CONCURRENCY_LIMIT_BEHAVIOR_SKIP
            )
        closure = launch_plan_pb2.LaunchPlanClosure(state=launch_plan_pb2.ACTIVE)
        _set_time(closure, "created_at", lp.created_at)
        return launch_plan_pb2.LaunchPlan(id=ident, spec=spec, closure=closure)

    def workflow_proto(self, lp: SandboxLaunchPlan) -> workflow_pb2.Workflow:
        wf_id = self.launch_plan_proto(lp).spec.workflow_id
        nodes = [
            core_workflow_pb2.Node(
                id=node_id,
                task_node=core_workflow_pb2.TaskNode(reference_id=_task_identifier(t)),
            )
            for node_id, t in lp.nodes
        ]
        for node_id in lp.launch_plan_nodes:
            ref = identifier_pb2.Identifier(
                resource_type=identifier_pb2.LAUNCH_PLAN,
                project=lp.project,
                domain=lp.domain,
                name=f"{lp.name}.{node_id}",
                version=lp.version,
            )
            nodes.append(
                core_workflow_pb2.Node(
                    id=node_id, workflow_node=core_workflow_pb2.WorkflowNode(launchplan_ref=ref)
                )
            )
        tasks = {_task_key(t): t for _, t in lp.nodes}
        compiled = compiler_pb2.CompiledWorkflowClosure(
            primary=compiler_pb2.CompiledWorkflow(
                template=core_workflow_pb2.WorkflowTemplate(id=wf_id, nodes=nodes)
            ),
            tasks=[compiler_pb2.CompiledTask(template=self.template(t)) for t in tasks.values()],
        )
        return workflow_pb2.Workflow(
            id=wf_id, closure=workflow_pb2.WorkflowClosure(compiled_workflow=compiled)
        )

    def check_concurrency(self, launch_plan: identifier_pb2.Identifier) -> None:
        """flyteadmin `checkLaunchPlanConcurrency` (v1.16.8) with behaviour SKIP."""
        key = (launch_plan.project, launch_plan.domain, launch_plan.name, launch_plan.version)
        lp = self.launch_plans.get(key)
        if lp is None or lp.concurrency_max is None:
            return
        if self.active_count(key[:3]) >= lp.concurrency_max:
            raise _Abort(
                Status.ALREADY_EXISTS,
                f"concurrency limit ({lp.concurrency_max}) reached for launch plan {lp.name}; "
                "skipping execution",
            )

    def insert(
        self,
        spec: execution_pb2.ExecutionSpec,
        project: str,
        domain: str,
        name: str,
        inputs: literals_pb2.LiteralMap,
    ) -> execution_pb2.Execution:
        """A new execution, QUEUED, no nodes yet (what createExecutionModel inserts)."""
        now = datetime.now(UTC)
        closure = execution_pb2.ExecutionClosure(phase=WfPhase.Value("QUEUED"))
        _set_time(closure, "created_at", now)
        _set_time(closure, "updated_at", now)
        new = execution_pb2.Execution(id=_wf_id(project, domain, name), spec=spec, closure=closure)
        copy = literals_pb2.LiteralMap()
        copy.CopyFrom(inputs)
        self.executions[(project, domain, name)] = _Exec(self.next_row(), new, copy)
        self.version += 1
        return new

    def create_from(
        self, original: _Exec, name: str, mode: str, overwrite_cache: bool
    ) -> execution_pb2.Execution:
        """A new execution launched from `original` (relaunch / recover), QUEUED, no nodes yet."""
        o = original.execution
        spec = execution_pb2.ExecutionSpec()
        spec.CopyFrom(o.spec)  # parent_node_execution included, as flyteadmin copies it
        spec.metadata.mode = Mode.Value(mode)
        spec.metadata.reference_execution.CopyFrom(o.id)
        spec.overwrite_cache = overwrite_cache
        return self.insert(spec, o.id.project, o.id.domain, name, original.inputs)


def _array_shape(
    te: task_execution_pb2.TaskExecution, ex: SandboxExecution, node: SandboxNode, a: SandboxAttempt
) -> None:
    """An array node's one task execution as propeller's ArrayNode (event version 0) reports it:
    task type `container_array`, plugin `k8s-array`, no pod of its own, one ExternalResourceInfo
    per subtask retry with `external_id` = `<array generated name>-n<index>-<retry>`
    (flytepropeller v1.16.8 `nodes/array/event_recorder.go` `finalize`,
    `generateExternalResourceID`), sorted by index then retry as flyteadmin merges them."""
    from forensics.evidence.flyte_names import generated_name

    c = te.closure
    c.task_type = "container_array"
    c.ClearField("log_context")
    array_name = generated_name([ex.name, node.node_id, a.attempt])
    # `finalize` sets only the external resources and the plugin: the array has no pod itself.
    c.metadata.CopyFrom(event_pb2.TaskExecutionMetadata(plugin_identifier="k8s-array"))
    for sub in sorted(node.subtasks, key=lambda s: (s.index, s.retry_attempt)):
        c.metadata.external_resources.append(
            event_pb2.ExternalResourceInfo(
                external_id=f"{array_name}-n{sub.index}-{sub.retry_attempt}",
                index=sub.index,
                retry_attempt=sub.retry_attempt,
                phase=TaskPhase.Value(sub.phase),
                cache_status=catalog_pb2.CACHE_DISABLED,
            )
        )


# -- protocol ---------------------------------------------------------------------------------


def _rpc(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record the call, apply faults, and turn `_Abort` into the gRPC status."""
    method = fn.__name__

    def handler(self: _Servicer, request: Any, context: grpc.ServicerContext) -> Any:
        server = self.server
        server._record(method, request)
        delay, code = server._fault(method, request)
        if delay:
            time.sleep(delay)
            if server.faults.drop_cancelled and not context.is_active():
                context.abort(Status.CANCELLED, "the client went away; not performed")
        if code is not None:
            context.abort(code, f"injected fault: {code.name}")
        try:
            return fn(self, request, context)
        except _Abort as a:
            context.abort(a.code, a.details)

    handler.__name__ = method
    handler.__doc__ = fn.__doc__
    return handler


def _require(value: str, what: str) -> None:
    if not value:
        raise _Abort(Status.INVALID_ARGUMENT, f"missing {what}")


def _check_limit(limit: int) -> None:
    if limit == 0:
        raise _Abort(Status.INVALID_ARGUMENT, "invalid value for limit")


def _not_found(kind: str, ident: pb_message.Message) -> NoReturn:
    raise _Abort(
        Status.NOT_FOUND, f"missing entity of type {kind} with identifier {_go_proto(ident)}"
    )


class _Servicer(admin_pb2_grpc.AdminServiceServicer):
    """The AdminService methods the tool uses; every other method is flyteidl's UNIMPLEMENTED."""

    def __init__(self, server: AdminServer) -> None:
        self.server = server
        self.state = server._state

    # executions
    def _execution(self, wf: identifier_pb2.WorkflowExecutionIdentifier) -> _Exec:
        _require(wf.project, "project")
        _require(wf.domain, "domain")
        _require(wf.name, "name")
        rec = self.state.executions.get((wf.project, wf.domain, wf.name))
        if rec is None:
            _not_found(
                "execution",
                identifier_pb2.Identifier(project=wf.project, domain=wf.domain, name=wf.name),
            )
        return rec

    @_rpc
    def GetExecution(self, request: execution_pb2.WorkflowExecutionGetRequest, context: Any) -> Any:
        with self.state.lock:
            return self._execution(request.id).execution

    @_rpc
    def GetExecutionData(
        self, request: execution_pb2.WorkflowExecutionGetDataRequest, context: Any
    ) -> Any:
        with self.state.lock:
            rec = self._execution(request.id)
            wf = request.id
            blob = common_pb2.UrlBlob(
                url=f"{_metadata_prefix(wf)}/inputs.pb",
                bytes=rec.inputs.ByteSize(),
            )
            resp = execution_pb2.WorkflowExecutionGetDataResponse(inputs=blob)
            limit = self.server.faults.max_inline_bytes
            if limit is None or rec.inputs.ByteSize() <= limit:
                resp.full_inputs.CopyFrom(rec.inputs)
            resp.full_outputs.CopyFrom(literals_pb2.LiteralMap())
            return resp

    @_rpc
    def ListExecutions(self, request: common_pb2.ResourceListRequest, context: Any) -> Any:
        if not request.HasField("id"):
            raise _Abort(Status.INVALID_ARGUMENT, "missing id")
        _require(request.id.project, "project")
        _require(request.id.domain, "domain")
        _check_limit(request.limit)
        filters = (
            parse_filters(request.filters, EXECUTION, _EXEC_COLUMNS) if request.filters else []
        )
        if not any(f.column is _EXEC_COLUMNS["state"] for f in filters):
            filters.append(_Filter("eq", _EXEC_COLUMNS["state"], (0,)))  # implicit ACTIVE
        ident = [("execution_project", request.id.project), ("execution_domain", request.id.domain)]
        if request.id.name:
            ident.append(("execution_name", request.id.name))
        filters += [_Filter("eq", _EXEC_COLUMNS[c], (v,)) for c, v in ident]
        key = (
            *(v for _, v in ident),
            request.filters,
            request.HasField("sort_by"),
            request.sort_by.key,
            request.sort_by.direction,
        )

        def compute() -> list[_Exec]:
            # The project/domain (and name) columns are compared first, as an index would.
            rows = [
                r
                for r in self.state.executions.values()
                if (r.execution.id.project, r.execution.id.domain) == (ident[0][1], ident[1][1])
            ]
            rows.sort(key=lambda r: r.row)
            rows = [r for r in rows if all(f(r) for f in filters)]
            return _sorted(
                rows, request.sort_by, EXECUTION, _EXEC_COLUMNS, request.HasField("sort_by")
            )

        with self.state.lock:
            rows = self.state.listing(key, compute)
            page, token = _page(rows, request.limit, request.token, "ListExecutions")
            token = self.server._token_fault(
                "ListExecutions", request.token, token, len(page) == request.limit
            )
            executions = []
            for r in page:
                e = execution_pb2.Execution()
                e.CopyFrom(r.execution)
                e.spec.ClearField("inputs")  # flyteadmin clears inputs in lists
                executions.append(e)
            return execution_pb2.ExecutionList(executions=executions, token=token)

    # node executions
    @_rpc
    def ListNodeExecutions(
        self, request: node_execution_pb2.NodeExecutionListRequest, context: Any
    ) -> Any:
        if not request.HasField("workflow_execution_id"):
            raise _Abort(Status.INVALID_ARGUMENT, "missing workflow_execution_id")
        _check_limit(request.limit)
        wf = request.workflow_execution_id
        with self.state.lock:
            rec = self.state.executions.get((wf.project, wf.domain, wf.name))
            nodes = rec.nodes if rec is not None else []  # flyteadmin: an empty list
            parent = request.unique_parent_id or None
            if parent is not None and not any(n.proto.id.node_id == parent for n in nodes):
                _not_found(
                    "node execution",
                    identifier_pb2.NodeExecutionIdentifier(node_id=parent, execution_id=wf),
                )
            rows = [n for n in nodes if n.parent == parent]
            filters = (
                parse_filters(request.filters, NODE_EXECUTION, _NODE_COLUMNS)
                if request.filters
                else []
            )
            rows = [n for n in rows if all(f(n) for f in filters)]
            rows = _sorted(
                rows, request.sort_by, NODE_EXECUTION, _NODE_COLUMNS, request.HasField("sort_by")
            )
            page, token = _page(rows, request.limit, request.token, "ListNodeExecutions")
            token = self.server._token_fault(
                "ListNodeExecutions", request.token, token, len(page) == request.limit
            )
            return node_execution_pb2.NodeExecutionList(
                node_executions=[n.proto for n in page], token=token
            )

    def _node(self, ident: identifier_pb2.NodeExecutionIdentifier) -> _Node:
        wf = ident.execution_id
        rec = self.state.executions.get((wf.project, wf.domain, wf.name))
        for n in rec.nodes if rec else []:
            if n.proto.id.node_id == ident.node_id:
                return n
        _not_found("node execution", ident)

    @_rpc
    def GetNodeExecution(
        self, request: node_execution_pb2.NodeExecutionGetRequest, context: Any
    ) -> Any:
        with self.state.lock:
            return self._node(request.id).proto

    @_rpc
    def GetNodeExecutionData(
        self, request: node_execution_pb2.NodeExecutionGetDataRequest, context: Any
    ) -> Any:
        with self.state.lock:
            node = self._node(request.id)
            resp = node_execution_pb2.NodeExecutionGetDataResponse(
                inputs=common_pb2.UrlBlob(url=node.proto.input_uri, bytes=node.inputs.ByteSize()),
                full_inputs=node.inputs,
            )
            if node.proto.metadata.is_dynamic:
                wf = request.id.execution_id
                rec = self.state.executions[(wf.project, wf.domain, wf.name)]
                tasks: dict[tuple[str, str, str, str], SandboxTask] = {}
                for child in rec.nodes:
                    if child.parent == request.id.node_id:
                        tasks.update((_task_key(t), t) for t in child.task_defs)
                dyn = resp.dynamic_workflow
                dyn.id.CopyFrom(
                    identifier_pb2.Identifier(
                        resource_type=identifier_pb2.WORKFLOW,
                        project=wf.project,
                        domain=wf.domain,
                        name=f"{node.proto.metadata.spec_node_id}-dynamic",
                        version="v1",
                    )
                )
                dyn.compiled_workflow.tasks.extend(
                    compiler_pb2.CompiledTask(template=_AdminState.template(t))
                    for t in tasks.values()
                )
            return resp

    # task executions and tasks
    @_rpc
    def ListTaskExecutions(
        self, request: task_execution_pb2.TaskExecutionListRequest, context: Any
    ) -> Any:
        if not request.HasField("node_execution_id"):
            raise _Abort(Status.INVALID_ARGUMENT, "missing node_execution_id")
        _check_limit(request.limit)
        with self.state.lock:
            try:
                rows = list(self._node(request.node_execution_id).tasks)
            except _Abort:
                rows = []  # flyteadmin lists nothing for an unknown node
            filters = (
                parse_filters(request.filters, TASK_EXECUTION, _TASK_EXEC_COLUMNS)
                if request.filters
                else []
            )
            rows = [t for t in rows if all(f(t) for f in filters)]
            rows = _sorted(
                rows,
                request.sort_by,
                TASK_EXECUTION,
                _TASK_EXEC_COLUMNS,
                request.HasField("sort_by"),
            )
            page, token = _page(rows, request.limit, request.token, "ListTaskExecutions")
            token = self.server._token_fault(
                "ListTaskExecutions", request.token, token, len(page) == request.limit
            )
            return task_execution_pb2.TaskExecutionList(task_executions=page, token=token)

    @_rpc
    def GetTaskExecution(
        self, request: task_execution_pb2.TaskExecutionGetRequest, context: Any
    ) -> Any:
        with self.state.lock:
            try:
                tasks = self._node(request.id.node_execution_id).tasks
            except _Abort:
                tasks = []
            for t in tasks:
                if (
                    t.id.retry_attempt == request.id.retry_attempt
                    and t.id.task_id == request.id.task_id
                ):
                    return t
            _not_found("task execution", request.id)

    @_rpc
    def GetTask(self, request: common_pb2.ObjectGetRequest, context: Any) -> Any:
        i = request.id
        key = (i.project, i.domain, i.name, i.version)
        with self.state.lock:
            t = self.state.tasks.get(key)
            if t is None or key in self.server.faults.unregistered_tasks:
                _not_found("TASK", i)
            closure = task_pb2.TaskClosure(
                compiled_task=compiler_pb2.CompiledTask(template=_AdminState.template(t))
            )
            return task_pb2.Task(id=i, closure=closure)

    @_rpc
    def ListProjects(self, request: project_pb2.ProjectListRequest, context: Any) -> Any:
        if request.filters:
            raise _Abort(Status.UNIMPLEMENTED, "the sandbox Admin does not filter projects")
        with self.state.lock:
            ids = sorted(
                {p for (p, _, _) in self.state.executions} | {t[0] for t in self.state.tasks}
            )
        domains = [project_pb2.Domain(id=d, name=d) for d in self.state.domains]
        projects = [project_pb2.Project(id=p, name=p, domains=domains) for p in ids]
        if request.limit == 0:  # unverified against flyteadmin: the sandbox returns everything
            return project_pb2.Projects(projects=projects)
        page, token = _page(projects, request.limit, request.token, "ListProjects")
        return project_pb2.Projects(projects=page, token=token)

    # relaunch / recover
    def _new_name(self, project: str, domain: str, name: str, lp: Any) -> str:
        """Name validation, the launch plan's concurrency limit, then the unique key — in
        flyteadmin's order (the concurrency check runs in launchExecution, before the insert)."""
        if name:
            if len(name) > 63:
                raise _Abort(
                    Status.INVALID_ARGUMENT, f"size of name exceeded length 63 : {name.lower()}"
                )
            if not re.match(r"^[a-z][a-z\-0-9]*$", name.lower()):
                raise _Abort(Status.INVALID_ARGUMENT, f"invalid name format: {name.lower()}")
        else:
            name = _random_name()
        self.state.check_concurrency(lp)
        if (project, domain, name) in self.state.executions:
            raise _Abort(
                Status.ALREADY_EXISTS,
                "value with matching already exists "
                '(duplicate key value violates unique constraint "executions_pkey")',
            )
        return name

    def _launch_from(
        self, request: Any, mode: str, overwrite_cache: bool
    ) -> execution_pb2.ExecutionCreateResponse:
        with self.state.lock:
            original = self._execution(request.id)
            name = self._new_name(
                request.id.project,
                request.id.domain,
                request.name,
                original.execution.spec.launch_plan,
            )
            new = self.state.create_from(original, name, mode, overwrite_cache)
        return execution_pb2.ExecutionCreateResponse(id=new.id)

    def _launch_plan(self, ident: identifier_pb2.Identifier) -> SandboxLaunchPlan:
        key = (ident.project, ident.domain, ident.name, ident.version)
        lp = self.state.launch_plans.get(key)
        if lp is None:
            _not_found("LAUNCH_PLAN", ident)
        return lp

    @_rpc
    def CreateExecution(self, request: execution_pb2.ExecutionCreateRequest, context: Any) -> Any:
        _require(request.project, "project")
        _require(request.domain, "domain")
        with self.state.lock:
            self._launch_plan(request.spec.launch_plan)
            name = self._new_name(
                request.project, request.domain, request.name, request.spec.launch_plan
            )
            spec = execution_pb2.ExecutionSpec()
            spec.CopyFrom(request.spec)
            spec.metadata.principal = "sandbox"  # Admin sets the principal itself
            new = self.state.insert(spec, request.project, request.domain, name, request.inputs)
        if self.server._take_lost_relaunch():
            raise _Abort(Status.UNAVAILABLE, "injected fault: execution created, response lost")
        return execution_pb2.ExecutionCreateResponse(id=new.id)

    @_rpc
    def GetLaunchPlan(self, request: common_pb2.ObjectGetRequest, context: Any) -> Any:
        with self.state.lock:
            return self.state.launch_plan_proto(self._launch_plan(request.id))

    @_rpc
    def ListLaunchPlans(self, request: common_pb2.ResourceListRequest, context: Any) -> Any:
        _check_limit(request.limit)
        if request.filters:
            raise _Abort(Status.UNIMPLEMENTED, "the sandbox Admin does not filter launch plans")
        i = request.id
        with self.state.lock:
            rows = [
                lp
                for (p, d, n, _), lp in self.state.launch_plans.items()
                if (p, d) == (i.project, i.domain) and (not i.name or n == i.name)
            ]
            # created_at, newest first when asked (the only sort the tool uses)
            rows.sort(
                key=lambda lp: (lp.created_at or datetime.min.replace(tzinfo=UTC), lp.version)
            )
            if (
                request.HasField("sort_by")
                and request.sort_by.direction == common_pb2.Sort.DESCENDING
            ):
                rows.reverse()
            page, token = _page(rows, request.limit, request.token, "ListLaunchPlans")
            return launch_plan_pb2.LaunchPlanList(
                launch_plans=[self.state.launch_plan_proto(lp) for lp in page], token=token
            )

    @_rpc
    def GetWorkflow(self, request: common_pb2.ObjectGetRequest, context: Any) -> Any:
        with self.state.lock:
            return self.state.workflow_proto(self._launch_plan(request.id))

    @_rpc
    def RelaunchExecution(
        self, request: execution_pb2.ExecutionRelaunchRequest, context: Any
    ) -> Any:
        resp = self._launch_from(request, "RELAUNCH", request.overwrite_cache)
        if self.server._take_lost_relaunch():
            raise _Abort(Status.UNAVAILABLE, "injected fault: relaunch performed, response lost")
        return resp

    @_rpc
    def RecoverExecution(self, request: execution_pb2.ExecutionRecoverRequest, context: Any) -> Any:
        return self._launch_from(request, "RECOVERED", False)


class AdminServer:
    """A Flyte Admin gRPC server on 127.0.0.1 (free port), seeded from `scenario`.

    `start()` returns the `host:port` endpoint; `calls` is every request received, in order;
    `executions` the current state, relaunches included. Usable as a context manager.
    """

    def __init__(
        self,
        scenario: Scenario,
        faults: AdminFaults | None = None,
        *,
        namespace_template: str = "{project}-{domain}",
        workers: int = 8,
    ) -> None:
        self.faults = faults or AdminFaults()
        self._state = _AdminState(scenario, namespace_template)
        self._calls: list[tuple[str, Any]] = []
        self._calls_lock = threading.Lock()
        self._workers = workers
        self._server: grpc.Server | None = None
        self.endpoint: str | None = None

    # lifecycle
    def start(self) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._workers))
        admin_pb2_grpc.add_AdminServiceServicer_to_server(_Servicer(self), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        self.endpoint = f"127.0.0.1:{port}"
        return self.endpoint

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def __enter__(self) -> AdminServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_execution(self, ex: SandboxExecution, tasks: Iterable[SandboxTask] = ()) -> None:
        """Add an execution (and its tasks) while the server runs, as propeller's events would
        record a new one: later listings include it."""
        with self._state.lock:
            for t in tasks:
                self._state.tasks[_task_key(t)] = t
            self._state._seed(ex)

    # observation
    @property
    def calls(self) -> list[tuple[str, Any]]:
        with self._calls_lock:
            return list(self._calls)

    def calls_of(self, method: str) -> list[Any]:
        """The requests received by one RPC method, in order."""
        return [req for m, req in self.calls if m == method]

    def call_counts(self) -> Counter[str]:
        return Counter(m for m, _ in self.calls)

    @property
    def executions(self) -> dict[ExecutionRef, execution_pb2.Execution]:
        with self._state.lock:
            out = {}
            for (p, d, n), rec in self._state.executions.items():
                e = execution_pb2.Execution()
                e.CopyFrom(rec.execution)
                out[ExecutionRef(p, d, n)] = e
            return out

    def relaunches_of(self, ref: ExecutionRef) -> list[ExecutionRef]:
        """Executions whose `reference_execution` is `ref` (relaunches and recoveries)."""
        out = []
        for r, e in self.executions.items():
            m = e.spec.metadata
            if (
                m.HasField("reference_execution")
                and ExecutionRef(
                    m.reference_execution.project,
                    m.reference_execution.domain,
                    m.reference_execution.name,
                )
                == ref
            ):
                out.append(r)
        return out

    # faults (called from the servicer's threads)
    def _record(self, method: str, request: Any) -> None:
        copy = type(request)()
        copy.CopyFrom(request)
        with self._calls_lock:
            self._calls.append((method, copy))

    def _fault(self, method: str, request: Any) -> tuple[float, grpc.StatusCode | None]:
        f = self.faults
        with self._calls_lock:
            queue = f.failures.get(method)
            code = queue.pop(0) if queue else None
        filters = getattr(request, "filters", "")
        for needle, failing in f.failing_filters.items():
            if code is None and filters and needle in filters:
                code = failing
        return f.latency_by_method.get(method, f.latency), code

    def _take_lost_relaunch(self) -> bool:
        with self._calls_lock:
            if self.faults.lose_relaunch_response > 0:
                self.faults.lose_relaunch_response -= 1
                return True
        return False

    def _token_fault(self, method: str, request_token: str, token: str, full: bool) -> str:
        kind = self.faults.page_token
        if kind is None or method not in self.faults.page_token_methods or not full:
            return token
        if kind == "early":
            return ""
        if kind == "bogus":
            return "not-a-token"
        if kind == "repeat":
            return request_token or "0"
        raise ValueError(f"page_token fault must be one of {PAGE_TOKEN_FAULTS}, not {kind!r}")
