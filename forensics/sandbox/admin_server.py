"""A loopback Flyte Admin gRPC server (flyteidl's AdminServiceServicer) seeded from a Scenario.

State (`admin_state.AdminState`, its protos built by `admin_protos`) is kept apart from the
protocol layer (`_Servicer` here: validation and errors as flyteadmin does them; filters, sort keys
and pagination in `admin_query`), as moto splits models from responses. Every RPC of the
servicer reads `AdminServer`'s fault switches (`AdminFaults`) and call log.

It answers the reads the tool makes (executions, node and task executions, their data, tasks,
launch plans, compiled workflows, projects) with flyteadmin's filters, pagination, sort keys and
error texts, and the writes `relaunch` makes: RelaunchExecution and CreateExecution, with
flyteadmin's name validation, uniqueness (ALREADY_EXISTS) and launch plan concurrency limit.
Columns the sandbox cannot evaluate (closures, joins to other tables) answer UNIMPLEMENTED rather
than being silently ignored. Every call is recorded (`calls`) — RecoverExecution too, so tests
can assert it is never used. What flyteadmin does, and where it was read: docs/upstream.md,
"Flyte Admin" under "The sandbox servers".
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent import futures
from datetime import datetime
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
    compiler_pb2,
    identifier_pb2,
    literals_pb2,
)
from flyteidl.service import admin_pb2_grpc
from google.protobuf import message as pb_message
from grpc import StatusCode as Status

from forensics.model import UTC, ExecutionRef
from forensics.sandbox.admin_faults import PAGE_TOKEN_FAULTS, AdminFaults
from forensics.sandbox.admin_protos import (
    go_proto,
    launch_plan_proto,
    metadata_prefix,
    random_name,
    task_key,
    task_template,
    workflow_proto,
)
from forensics.sandbox.admin_query import (
    EXECUTION,
    NODE_EXECUTION,
    TASK_EXECUTION,
    Abort,
    Filter,
    page_of,
    parse_filters,
    sorted_rows,
)
from forensics.sandbox.admin_runs import Outcome, Run, Runner, Step, recovery_steps, texts
from forensics.sandbox.admin_state import (
    EXEC_COLUMNS,
    NODE_COLUMNS,
    TASK_EXEC_COLUMNS,
    AdminState,
    ExecRow,
    NodeRow,
)
from forensics.sandbox.admin_workflows import (
    compiled_graph,
    compiled_rows,
    single_task_closure,
    single_task_node_id,
    single_task_workflow_id,
)
from forensics.sandbox.blobs import Blobs, MemoryBlobs
from forensics.sandbox.scenario import (
    SandboxExecution,
    SandboxLaunchPlan,
    SandboxTask,
    Scenario,
)

# -- protocol ---------------------------------------------------------------------------------


def _rpc(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record the call, apply faults, and turn `Abort` into the gRPC status."""
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
            if server._runner.runs:  # propeller moves on between requests
                with self.state.lock:
                    server._runner.advance()
            return fn(self, request, context)
        except Abort as a:
            context.abort(a.code, a.details)

    handler.__name__ = method
    handler.__doc__ = fn.__doc__
    return handler


def _require(value: str, what: str) -> None:
    if not value:
        raise Abort(Status.INVALID_ARGUMENT, f"missing {what}")


def _check_limit(limit: int) -> None:
    if limit == 0:
        raise Abort(Status.INVALID_ARGUMENT, "invalid value for limit")


def _not_found(kind: str, ident: pb_message.Message) -> NoReturn:
    raise Abort(
        Status.NOT_FOUND, f"missing entity of type {kind} with identifier {go_proto(ident)}"
    )


def _lp_key(i: identifier_pb2.Identifier) -> tuple[str, str, str, str]:
    return (i.project, i.domain, i.name, i.version)


def _check_task_inputs(task: SandboxTask, inputs: literals_pb2.LiteralMap) -> None:
    """flyteadmin `validation/execution_validator.go` CheckAndFetchInputsForExecution against
    the task's interface (the skeleton launch plan's expected inputs; none has a default)."""
    for name in inputs.literals:
        if name not in task.inputs:
            raise Abort(Status.INVALID_ARGUMENT, f"invalid input {name}")
    for name in task.inputs:
        if name not in inputs.literals:
            raise Abort(Status.INVALID_ARGUMENT, f"expected_inputs {name} missing")


class _Servicer(admin_pb2_grpc.AdminServiceServicer):
    """The AdminService methods the tool uses; every other method is flyteidl's UNIMPLEMENTED."""

    def __init__(self, server: AdminServer) -> None:
        self.server = server
        self.state = server._state

    # executions
    def _execution(self, wf: identifier_pb2.WorkflowExecutionIdentifier) -> ExecRow:
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
                url=f"{metadata_prefix(wf)}/inputs.pb",
                bytes=rec.inputs.ByteSize(),
            )
            resp = execution_pb2.WorkflowExecutionGetDataResponse(inputs=blob)
            limit = self.server.faults.max_inline_bytes
            if limit is None or rec.inputs.ByteSize() <= limit:
                resp.full_inputs.CopyFrom(rec.inputs)
            resp.full_outputs.CopyFrom(rec.outputs)
            return resp

    @_rpc
    def ListExecutions(self, request: common_pb2.ResourceListRequest, context: Any) -> Any:
        if not request.HasField("id"):
            raise Abort(Status.INVALID_ARGUMENT, "missing id")
        _require(request.id.project, "project")
        _require(request.id.domain, "domain")
        _check_limit(request.limit)
        filters = parse_filters(request.filters, EXECUTION, EXEC_COLUMNS) if request.filters else []
        if not any(f.column is EXEC_COLUMNS["state"] for f in filters):
            filters.append(Filter("eq", EXEC_COLUMNS["state"], (0,)))  # implicit ACTIVE
        ident = [("execution_project", request.id.project), ("execution_domain", request.id.domain)]
        if request.id.name:
            ident.append(("execution_name", request.id.name))
        filters += [Filter("eq", EXEC_COLUMNS[c], (v,)) for c, v in ident]
        key = (
            *(v for _, v in ident),
            request.filters,
            request.HasField("sort_by"),
            request.sort_by.key,
            request.sort_by.direction,
        )

        def compute() -> list[ExecRow]:
            # The project/domain (and name) columns are compared first, as an index would.
            rows = [
                r
                for r in self.state.executions.values()
                if (r.execution.id.project, r.execution.id.domain) == (ident[0][1], ident[1][1])
            ]
            rows.sort(key=lambda r: r.row)
            rows = [r for r in rows if all(f(r) for f in filters)]
            return sorted_rows(
                rows, request.sort_by, EXECUTION, EXEC_COLUMNS, request.HasField("sort_by")
            )

        with self.state.lock:
            rows = self.state.listing(key, compute)
            page, token = page_of(rows, request.limit, request.token, "ListExecutions")
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
            raise Abort(Status.INVALID_ARGUMENT, "missing workflow_execution_id")
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
                parse_filters(request.filters, NODE_EXECUTION, NODE_COLUMNS)
                if request.filters
                else []
            )
            rows = [n for n in rows if all(f(n) for f in filters)]
            rows = sorted_rows(
                rows, request.sort_by, NODE_EXECUTION, NODE_COLUMNS, request.HasField("sort_by")
            )
            page, token = page_of(rows, request.limit, request.token, "ListNodeExecutions")
            token = self.server._token_fault(
                "ListNodeExecutions", request.token, token, len(page) == request.limit
            )
            return node_execution_pb2.NodeExecutionList(
                node_executions=[n.proto for n in page], token=token
            )

    def _node(self, ident: identifier_pb2.NodeExecutionIdentifier) -> NodeRow:
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
            self._node_outputs(node, resp)
            if node.proto.metadata.is_dynamic:
                wf = request.id.execution_id
                rec = self.state.executions[(wf.project, wf.domain, wf.name)]
                # The dynamic's compiled closure holds the tasks of every node it generated,
                # those inside its sub-workflows too (flytepropeller v1.16.8 `nodes/dynamic/
                # dynamic_workflow.go` buildDynamicWorkflow: CompileWorkflow(wf,
                # djSpec.GetSubworkflows(), compileTasks(djSpec.GetTasks()))): `compiled_rows`
                # descends sub-workflows; a nested dynamic's children are compiled later, by it.
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
                dyn.compiled_workflow.CopyFrom(compiled_rows(rec.nodes, request.id.node_id, dyn.id))
            return resp

    def _node_outputs(
        self, node: NodeRow, resp: node_execution_pb2.NodeExecutionGetDataResponse
    ) -> None:
        """flyteadmin v1.16.8 `util/data.go` GetOutputs: the outputs.pb at the closure's
        output_uri, inline; a missing one is a warning and an empty LiteralMap."""
        uri = node.proto.closure.output_uri
        if not uri:
            return
        body = self.server.blobs.read(uri)
        outputs = literals_pb2.LiteralMap()
        if body is not None:
            outputs.ParseFromString(body)
        resp.outputs.CopyFrom(common_pb2.UrlBlob(url=uri, bytes=len(body or b"")))
        resp.full_outputs.CopyFrom(outputs)

    # task executions and tasks
    @_rpc
    def ListTaskExecutions(
        self, request: task_execution_pb2.TaskExecutionListRequest, context: Any
    ) -> Any:
        if not request.HasField("node_execution_id"):
            raise Abort(Status.INVALID_ARGUMENT, "missing node_execution_id")
        _check_limit(request.limit)
        with self.state.lock:
            try:
                rows = list(self._node(request.node_execution_id).tasks)
            except Abort:
                rows = []  # flyteadmin lists nothing for an unknown node
            filters = (
                parse_filters(request.filters, TASK_EXECUTION, TASK_EXEC_COLUMNS)
                if request.filters
                else []
            )
            rows = [t for t in rows if all(f(t) for f in filters)]
            rows = sorted_rows(
                rows,
                request.sort_by,
                TASK_EXECUTION,
                TASK_EXEC_COLUMNS,
                request.HasField("sort_by"),
            )
            page, token = page_of(rows, request.limit, request.token, "ListTaskExecutions")
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
            except Abort:
                tasks = []
            for t in tasks:
                if (
                    t.id.retry_attempt == request.id.retry_attempt
                    and t.id.task_id == request.id.task_id
                ):
                    return t
            _not_found("task execution", request.id)

    def _task(self, i: identifier_pb2.Identifier) -> SandboxTask:
        key = (i.project, i.domain, i.name, i.version)
        t = self.state.tasks.get(key)
        if t is None or key in self.server.faults.unregistered_tasks:
            _not_found("TASK", i)
        return t

    @_rpc
    def GetTask(self, request: common_pb2.ObjectGetRequest, context: Any) -> Any:
        i = request.id
        with self.state.lock:
            t = self._task(i)
            closure = task_pb2.TaskClosure(
                compiled_task=compiler_pb2.CompiledTask(template=task_template(t))
            )
            return task_pb2.Task(id=i, closure=closure)

    @_rpc
    def ListProjects(self, request: project_pb2.ProjectListRequest, context: Any) -> Any:
        if request.filters:
            raise Abort(Status.UNIMPLEMENTED, "the sandbox Admin does not filter projects")
        with self.state.lock:
            ids = sorted(
                {p for (p, _, _) in self.state.executions} | {t[0] for t in self.state.tasks}
            )
        domains = [project_pb2.Domain(id=d, name=d) for d in self.state.domains]
        projects = [project_pb2.Project(id=p, name=p, domains=domains) for p in ids]
        if request.limit == 0:  # unverified against flyteadmin: the sandbox returns everything
            return project_pb2.Projects(projects=projects)
        page, token = page_of(projects, request.limit, request.token, "ListProjects")
        return project_pb2.Projects(projects=page, token=token)

    # relaunch / recover
    def _new_name(self, project: str, domain: str, name: str, lp: Any) -> str:
        """Name validation, the launch plan's concurrency limit, then the unique key — in
        flyteadmin's order (the concurrency check runs in launchExecution, before the insert)."""
        if name:
            if len(name) > 63:
                raise Abort(
                    Status.INVALID_ARGUMENT, f"size of name exceeded length 63 : {name.lower()}"
                )
            # flyteadmin `validation.go`: `^[a-z][a-z\-0-9]*$` in Go's RE2, where `$` is the
            # end of the text, so a name with a final newline is refused: a whole-string match.
            if not re.fullmatch(r"[a-z][a-z\-0-9]*", name.lower()):
                raise Abort(Status.INVALID_ARGUMENT, f"invalid name format: {name.lower()}")
        else:
            name = random_name()
        self.state.check_concurrency(lp)
        if (project, domain, name) in self.state.executions:
            raise Abort(
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
        if request.spec.launch_plan.resource_type == identifier_pb2.TASK:
            return self._create_single_task(request)
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
            raise Abort(Status.UNAVAILABLE, "injected fault: execution created, response lost")
        return execution_pb2.ExecutionCreateResponse(id=new.id)

    def _create_single_task(self, request: execution_pb2.ExecutionCreateRequest) -> Any:
        """flyteadmin v1.16.8 `execution_manager.go` launchSingleTaskExecution: the task must be
        registered; the inputs are checked against its interface; the execution runs the
        skeleton workflow `.flytegen.<task>` whose one node is named after the task; the
        request's metadata (its mode included) is kept, only the principal set."""
        ident = request.spec.launch_plan
        inputs = request.inputs if request.inputs.literals else request.spec.inputs
        with self.state.lock:
            task = self._task(ident)
            _check_task_inputs(task, inputs)
            name = self._new_name(request.project, request.domain, request.name, ident)
            spec = execution_pb2.ExecutionSpec()
            spec.CopyFrom(request.spec)
            spec.metadata.principal = "sandbox"
            new = self.state.insert(spec, request.project, request.domain, name, inputs)
            new.closure.workflow_id.CopyFrom(single_task_workflow_id(task))
            node_id = single_task_node_id(task.name)
            step = Step(node_id, task, bindings={v: ("", v) for v in task.inputs})
            values = texts(inputs)
            self.server._runner.add(
                Run(
                    (request.project, request.domain, name), time.monotonic(), [step], inputs=values
                )
            )
        if self.server._take_lost_relaunch():
            raise Abort(Status.UNAVAILABLE, "injected fault: execution created, response lost")
        return execution_pb2.ExecutionCreateResponse(id=new.id)

    @_rpc
    def GetLaunchPlan(self, request: common_pb2.ObjectGetRequest, context: Any) -> Any:
        with self.state.lock:
            return launch_plan_proto(self._launch_plan(request.id))

    @_rpc
    def ListLaunchPlans(self, request: common_pb2.ResourceListRequest, context: Any) -> Any:
        _check_limit(request.limit)
        if request.filters:
            raise Abort(Status.UNIMPLEMENTED, "the sandbox Admin does not filter launch plans")
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
            page, token = page_of(rows, request.limit, request.token, "ListLaunchPlans")
            return launch_plan_pb2.LaunchPlanList(
                launch_plans=[launch_plan_proto(lp) for lp in page], token=token
            )

    @_rpc
    def GetWorkflow(self, request: common_pb2.ObjectGetRequest, context: Any) -> Any:
        i = request.id
        with self.state.lock:
            if i.name.startswith(".flytegen."):
                task = self._task(
                    identifier_pb2.Identifier(
                        resource_type=identifier_pb2.TASK,
                        project=i.project,
                        domain=i.domain,
                        name=i.name.removeprefix(".flytegen."),
                        version=i.version,
                    )
                )
                closure = workflow_pb2.WorkflowClosure(compiled_workflow=single_task_closure(task))
                return workflow_pb2.Workflow(id=single_task_workflow_id(task), closure=closure)
            lp = self._launch_plan(i)
            wf = workflow_proto(lp)
            if lp.graph:
                compiled = compiled_graph(wf.id, lp.graph, lp.inputs)
                wf.closure.compiled_workflow.CopyFrom(compiled)
                return wf
            shape = self.state.shapes.get((i.project, i.domain, i.name, i.version))
            if shape is not None:  # the nodes its executions ran, nested ones included
                declared = wf.closure.compiled_workflow.primary.template.nodes
                compiled = compiled_rows(
                    shape.nodes, None, wf.id, declared, [t for _, t in lp.nodes]
                )
                wf.closure.compiled_workflow.CopyFrom(compiled)
            return wf

    @_rpc
    def RelaunchExecution(
        self, request: execution_pb2.ExecutionRelaunchRequest, context: Any
    ) -> Any:
        resp = self._launch_from(request, "RELAUNCH", request.overwrite_cache)
        if self.server._take_lost_relaunch():
            raise Abort(Status.UNAVAILABLE, "injected fault: relaunch performed, response lost")
        return resp

    @_rpc
    def RecoverExecution(self, request: execution_pb2.ExecutionRecoverRequest, context: Any) -> Any:
        """flyteadmin v1.16.8 RecoverExecution: no phase check, the original's spec and inputs,
        mode RECOVERED, `reference_execution` the original; propeller then copies every node
        that SUCCEEDED (`admin_runs`)."""
        resp = self._launch_from(request, "RECOVERED", False)
        with self.state.lock:
            original = self._execution(request.id)
            lp = self.state.launch_plans.get(_lp_key(original.execution.spec.launch_plan))
            steps = recovery_steps(original, lp.graph if lp is not None else [])
            key = (resp.id.project, resp.id.domain, resp.id.name)
            run = Run(key, time.monotonic(), steps, inputs=texts(original.inputs))
            self.server._runner.add(run)
        return resp


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
        blobs: Blobs | None = None,
    ) -> None:
        self.faults = faults or AdminFaults()
        self._state = AdminState(scenario, namespace_template)
        # flyteadmin's and propeller's data store: the sandbox S3 in a stack, else a dict.
        self.blobs: Blobs = blobs if blobs is not None else MemoryBlobs(scenario)
        self._runner = Runner(self._state, self.blobs, self._outcome)
        self._calls: list[tuple[str, Any]] = []
        self._calls_lock = threading.Lock()
        self._workers = workers
        self._server: grpc.Server | None = None
        self.endpoint: str | None = None

    # lifecycle
    def start(self) -> str:
        # flyteadmin v1.16.8 sets no keepalive enforcement policy (flyteorg/flyte
        # flyteadmin/pkg/server/service.go:140-151), so grpc-go v1.80.0's default holds: a ping
        # sooner than 5 minutes after the last is a strike, the third a GOAWAY too_many_pings
        # (keepalive/keepalive.go:94, internal/transport/defaults.go:40, http2_server.go:864,
        # 868-914). C-core's names for the same (include/grpc/impl/channel_arg_names.h).
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._workers),
            options=[
                ("grpc.http2.min_ping_interval_without_data_ms", 5 * 60 * 1000),
                ("grpc.http2.max_ping_strikes", 2),
            ],
        )
        admin_pb2_grpc.add_AdminServiceServicer_to_server(self.servicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        self.endpoint = f"127.0.0.1:{port}"
        return self.endpoint

    def servicer(self) -> admin_pb2_grpc.AdminServiceServicer:
        """What `start` serves; a subclass may wrap it (the scale benchmark records the answers
        for its Go replay of this server, tests/bench/admin_replay)."""
        return _Servicer(self)

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
                self._state.tasks[task_key(t)] = t
            self._state._seed(ex)

    # the runs of created executions (single-task and recovered): `admin_runs`
    @property
    def run_seconds(self) -> float | None:
        """Seconds from creation after which a created execution finishes (at the next
        request); 0 (the default): at the first request; None: only on `finish_runs()`."""
        return self._runner.run_seconds

    @run_seconds.setter
    def run_seconds(self, value: float | None) -> None:
        with self._state.lock:
            self._runner.run_seconds = value

    def advance(self) -> None:
        """What any request does first: start queued runs, finish those that are due."""
        with self._state.lock:
            self._runner.advance()

    def finish_runs(self) -> None:
        """Finish every created execution now (however `run_seconds` is set)."""
        with self._state.lock:
            self._runner.advance(finish_all=True)

    def _outcome(self) -> Outcome:
        return Outcome(set(self.faults.failing_tasks), set(self.faults.silent_tasks))

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
