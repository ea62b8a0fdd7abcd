"""The sandbox Admin's state: a Scenario as flyteadmin's tables would hold it, with the columns
its list filters and sort keys may name."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    node_execution_pb2,
    task_execution_pb2,
)
from flyteidl.core import (
    catalog_pb2,
    identifier_pb2,
    literals_pb2,
    security_pb2,
)
from grpc import StatusCode as Status

from forensics.model import UTC
from forensics.sandbox.admin_protos import (
    Mode,
    NodePhase,
    TaskPhase,
    WfPhase,
    array_shape,
    duration_ns,
    execution_identifier,
    literal_map,
    node_proto,
    proto_time,
    set_duration,
    set_time,
    task_execution_proto,
    task_key,
)
from forensics.sandbox.admin_query import (
    Abort,
    Column,
)
from forensics.sandbox.scenario import (
    SandboxExecution,
    SandboxLaunchPlan,
    SandboxNode,
    SandboxTask,
    Scenario,
)


@dataclass
class ExecRow:
    row: int
    execution: execution_pb2.Execution
    inputs: literals_pb2.LiteralMap
    nodes: list[NodeRow] = field(default_factory=list)
    # The workflow's outputs (GetExecutionData `full_outputs`): a finished single-task run's.
    outputs: literals_pb2.LiteralMap = field(default_factory=literals_pb2.LiteralMap)


@dataclass
class NodeRow:
    row: int
    proto: node_execution_pb2.NodeExecution
    parent: str | None
    tasks: list[task_execution_pb2.TaskExecution] = field(default_factory=list)
    task_defs: list[SandboxTask] = field(default_factory=list)
    inputs: literals_pb2.LiteralMap = field(default_factory=literals_pb2.LiteralMap)


EXEC_COLUMNS: dict[str, Column] = {
    "id": Column("int", lambda r: r.row),
    "execution_project": Column("str", lambda r: r.execution.id.project),
    "execution_domain": Column("str", lambda r: r.execution.id.domain),
    "execution_name": Column("str", lambda r: r.execution.id.name),
    "phase": Column("str", lambda r: WfPhase.Name(r.execution.closure.phase)),
    "mode": Column("int", lambda r: r.execution.spec.metadata.mode),
    # ExecutionState: 0 ACTIVE, 1 ARCHIVED (flyteadmin `models.Execution.State`)
    "state": Column("int", lambda r: r.execution.closure.state_change_details.state),
    "user": Column("str", lambda r: r.execution.spec.metadata.principal),
    # flyteadmin: the lower-cased resource type of what was launched (`launch_plan`, `task`)
    "launch_entity": Column(
        "str",
        lambda r: identifier_pb2.ResourceType.Name(
            r.execution.spec.launch_plan.resource_type
        ).lower(),
    ),
    "execution_created_at": Column("time", lambda r: proto_time(r.execution.closure, "created_at")),
    "execution_updated_at": Column("time", lambda r: proto_time(r.execution.closure, "updated_at")),
    "created_at": Column("time", lambda r: proto_time(r.execution.closure, "created_at")),
    "updated_at": Column("time", lambda r: proto_time(r.execution.closure, "updated_at")),
    "started_at": Column("time", lambda r: proto_time(r.execution.closure, "started_at")),
    "duration": Column("duration", lambda r: duration_ns(r.execution.closure)),
}
NODE_COLUMNS: dict[str, Column] = {
    "id": Column("int", lambda r: r.row),
    "node_id": Column("str", lambda r: r.proto.id.node_id),
    "phase": Column("str", lambda r: NodePhase.Name(r.proto.closure.phase)),
    "started_at": Column("time", lambda r: proto_time(r.proto.closure, "started_at")),
    "duration": Column("duration", lambda r: duration_ns(r.proto.closure)),
}
TASK_EXEC_COLUMNS: dict[str, Column] = {
    "retry_attempt": Column("int", lambda r: r.id.retry_attempt),
    "phase": Column("str", lambda r: TaskPhase.Name(r.closure.phase)),
    "node_id": Column("str", lambda r: r.id.node_execution_id.node_id),
    "started_at": Column("time", lambda r: proto_time(r.closure, "started_at")),
}


class AdminState:
    """Executions, node and task executions, tasks and projects as Admin would store them."""

    def __init__(self, scenario: Scenario, namespace_template: str) -> None:
        self.lock = threading.RLock()
        self.namespace_template = namespace_template
        self.executions: dict[tuple[str, str, str], ExecRow] = {}
        self.tasks: dict[tuple[str, str, str, str], SandboxTask] = {}
        self.domains = list(scenario.domains)
        self._rows = 0
        # ListExecutions answers per query, valid while `version` (bumped by every change to
        # `executions`) stands: offset paging re-reads the same rows page after page, and
        # filtering every row again per page made a large sweep quadratic.
        self.version = 0
        self._listings: OrderedDict[tuple[Any, ...], tuple[int, list[ExecRow]]] = OrderedDict()
        self.launch_plans: dict[tuple[str, str, str, str], SandboxLaunchPlan] = {}
        # Per launch plan, the first execution of it: the shape of its compiled workflow.
        self.shapes: dict[tuple[str, str, str, str], ExecRow] = {}
        for t in scenario.tasks:
            self.tasks[task_key(t)] = t
        for lp in scenario.launch_plans:
            self.launch_plans[(lp.project, lp.domain, lp.name, lp.version)] = lp
            for _, t in lp.nodes:
                self.tasks.setdefault(task_key(t), t)
        for ex in sorted(scenario.executions, key=lambda e: e.created_at):
            self._seed(ex)
            self._derive_launch_plan(ex)

    def _derive_launch_plan(self, ex: SandboxExecution) -> None:
        key = (ex.launch_plan[0] or ex.project, ex.launch_plan[1] or ex.domain, *ex.launch_plan[2:])
        lp = self.launch_plans.setdefault(key, SandboxLaunchPlan(*key, created_at=ex.created_at))
        self.shapes.setdefault(key, self.executions[(ex.project, ex.domain, ex.name)])
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

    def listing(self, key: tuple[Any, ...], compute: Callable[[], list[ExecRow]]) -> list[ExecRow]:
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
            spec.metadata.reference_execution.CopyFrom(
                execution_identifier(*ex.reference_execution)
            )
        if ex.parent is not None:
            # propeller's launch-plan node launches the child with mode CHILD_WORKFLOW, the
            # parent's node execution id and nesting + 1 (flytepropeller
            # `nodes/subworkflow/launchplan/admin.go` Launch).
            project, domain, name, node_id = ex.parent
            spec.metadata.mode = Mode.Value("CHILD_WORKFLOW")
            spec.metadata.nesting = 1
            spec.metadata.parent_node_execution.CopyFrom(
                identifier_pb2.NodeExecutionIdentifier(
                    node_id=node_id, execution_id=execution_identifier(project, domain, name)
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
        # flyteadmin `transformers/execution.go::CreateExecutionModel` sets the workflow it runs
        # (the sandbox's launch plan's workflow has the launch plan's name and version).
        closure.workflow_id.CopyFrom(spec.launch_plan)
        closure.workflow_id.resource_type = identifier_pb2.WORKFLOW
        started = (
            ex.created_at + timedelta(seconds=1)
            if ex.phase not in ("UNDEFINED", "QUEUED")
            else None
        )
        # flyteadmin moves an execution's updated_at only on workflow-level events
        # (flyteadmin `pkg/repositories/transformers/execution.go`; node and task events never
        # touch the row): a terminal execution's is its end, a running one's the
        # RUNNING event's, however recently its nodes changed.
        terminal = ex.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")
        set_time(closure, "created_at", ex.created_at)
        set_time(closure, "updated_at", ex.updated_at if terminal else started or ex.created_at)
        set_time(closure, "started_at", started)
        if ex.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"):
            set_duration(closure, started, ex.updated_at)
        if ex.archived:
            closure.state_change_details.state = execution_pb2.EXECUTION_ARCHIVED
            set_time(closure.state_change_details, "occurred_at", ex.updated_at)
        execution = execution_pb2.Execution(
            id=execution_identifier(ex.project, ex.domain, ex.name), spec=spec, closure=closure
        )
        rec = ExecRow(self.next_row(), execution, literal_map(ex.inputs))
        start_node = node_proto(ex, "start-node", "SUCCEEDED", ex.created_at, ex.created_at)
        rec.nodes.append(NodeRow(self.next_row(), start_node, None))
        for node in ex.nodes:
            rec.nodes.append(self.node_row(ex, node))
        if ex.phase == "SUCCEEDED":
            end = node_proto(ex, "end-node", "SUCCEEDED", ex.updated_at, ex.updated_at)
            rec.nodes.append(NodeRow(self.next_row(), end, None))
        self.executions[(ex.project, ex.domain, ex.name)] = rec
        self.version += 1

    def node_row(self, ex: SandboxExecution, node: SandboxNode) -> NodeRow:
        """A node execution of `ex` and its task executions, as propeller's events leave them."""
        starts = [a.started_at for a in node.attempts]
        ends = [a.ended_at for a in node.attempts if a.ended_at is not None]
        start = min(starts) if starts else ex.created_at
        end = (
            max(ends)
            if ends and node.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")
            else None
        )
        proto = node_proto(ex, node.node_id, node.phase, start, end)
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
        elif node.phase == "RECOVERED":  # copied by propeller's attemptRecovery: no attempt
            proto.closure.output_uri = f"{ex.node_data_dir(node.node_id)}/0/outputs.pb"
        if node.child_execution is not None:
            # A launch-plan node: Admin links the child execution; it has no task executions.
            # (flyteidl spells this one field `executionId` in admin/node_execution.proto.)
            proto.closure.workflow_node_metadata.executionId.CopyFrom(
                execution_identifier(*node.child_execution)
            )
            proto.closure.ClearField("task_node_metadata")
        rec = NodeRow(
            self.next_row(), proto, node.parent_unique_id, inputs=literal_map(node.inputs)
        )
        for a in node.attempts:
            self.tasks.setdefault(task_key(a.task), a.task)
            te = task_execution_proto(ex, node, a, self.namespace_template)
            if node.is_array:
                array_shape(te, ex, node, a)
            rec.tasks.append(te)
            rec.task_defs.append(a.task)
        return rec

    def check_concurrency(self, launch_plan: identifier_pb2.Identifier) -> None:
        """flyteadmin `checkLaunchPlanConcurrency` (v1.16.8) with behaviour SKIP."""
        key = (launch_plan.project, launch_plan.domain, launch_plan.name, launch_plan.version)
        lp = self.launch_plans.get(key)
        if lp is None or lp.concurrency_max is None:
            return
        if self.active_count(key[:3]) >= lp.concurrency_max:
            raise Abort(
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
        set_time(closure, "created_at", now)
        set_time(closure, "updated_at", now)
        new = execution_pb2.Execution(
            id=execution_identifier(project, domain, name), spec=spec, closure=closure
        )
        copy = literals_pb2.LiteralMap()
        copy.CopyFrom(inputs)
        self.executions[(project, domain, name)] = ExecRow(self.next_row(), new, copy)
        self.version += 1
        return new

    def create_from(
        self, original: ExecRow, name: str, mode: str, overwrite_cache: bool
    ) -> execution_pb2.Execution:
        """A new execution launched from `original` (relaunch / recover), QUEUED, no nodes yet."""
        o = original.execution
        spec = execution_pb2.ExecutionSpec()
        spec.CopyFrom(o.spec)  # parent_node_execution included, as flyteadmin copies it
        spec.metadata.mode = Mode.Value(mode)
        spec.metadata.reference_execution.CopyFrom(o.id)
        spec.overwrite_cache = overwrite_cache
        return self.insert(spec, o.id.project, o.id.domain, name, original.inputs)
