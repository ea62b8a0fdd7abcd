"""The sandbox Flyte Admin against flyteadmin's behaviour (the flyteadmin sources).

These tests talk to the server through flyteidl's plain gRPC stub, not through our client, so the
server's token rules, filter syntax and errors are checked against flyteadmin itself rather than
against whatever the client happens to expect.
"""

from __future__ import annotations

from datetime import timedelta

import grpc
import pytest
from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    node_execution_pb2,
    task_execution_pb2,
)
from flyteidl.core import execution_pb2 as core_execution_pb2
from flyteidl.core import identifier_pb2
from flyteidl.service.admin_pb2_grpc import AdminServiceStub
from support.admin_scenarios import (
    DOMAIN,
    ELASTIC,
    PROJECT,
    PYTORCH,
    T0,
    attempt,
    dynamic_execution,
    execution,
    many,
    pytorch_execution,
)

from forensics.model import UTC, ExecutionRef
from forensics.sandbox.admin_server import AdminFaults
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxNode,
    SandboxTask,
    Scenario,
)

pytestmark = pytest.mark.integration

# -- fixtures ---------------------------------------------------------------------------------


def _wf(name: str) -> identifier_pb2.WorkflowExecutionIdentifier:
    return identifier_pb2.WorkflowExecutionIdentifier(project=PROJECT, domain=DOMAIN, name=name)


def _list(
    stub: AdminServiceStub, *, limit: int = 100, token: str = "", filters: str = "", sort=None
):
    return stub.ListExecutions(
        common_pb2.ResourceListRequest(
            id=common_pb2.NamedEntityIdentifier(project=PROJECT, domain=DOMAIN),
            limit=limit,
            token=token,
            filters=filters,
            sort_by=sort,
        )
    )


def _status(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


# -- pagination -------------------------------------------------------------------------------


def test_page_token_is_the_next_offset_and_only_on_a_full_page(serve) -> None:
    _, stub = serve(Scenario(executions=many(7)))
    tokens, names = [], []
    token = ""
    while True:
        page = _list(stub, limit=3, token=token)
        names += [e.id.name for e in page.executions]
        tokens.append(page.token)
        if not page.token:
            break
        token = page.token
    assert tokens == ["3", "6", ""]
    assert names == [f"x{i:04d}" for i in range(7)]


def test_exact_multiple_ends_with_an_empty_page(serve) -> None:
    # flyteadmin returns a token whenever len(page) == limit, even at the very end.
    _, stub = serve(Scenario(executions=many(6)))
    assert _list(stub, limit=3).token == "3"
    assert _list(stub, limit=3, token="3").token == "6"
    last = _list(stub, limit=3, token="6")
    assert (len(last.executions), last.token) == (0, "")


def test_limit_zero_is_invalid(serve) -> None:
    _, stub = serve(Scenario(executions=many(2)))
    assert _status(lambda: _list(stub, limit=0)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value for limit",
    )


@pytest.mark.parametrize("token", ["abc", "-1"])
def test_bad_token_is_invalid_pagination_token(serve, token: str) -> None:
    _, stub = serve(Scenario(executions=many(2)))
    assert _status(lambda: _list(stub, token=token)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"invalid pagination token {token} for ListExecutions",
    )


# -- filters ----------------------------------------------------------------------------------


def test_filters_select_on_phase_and_time_with_z_times(serve) -> None:
    scenario = Scenario(
        executions=[
            execution("old", created=T0 - timedelta(days=3), updated=T0 - timedelta(days=2)),
            execution("live", created=T0 - timedelta(days=3), updated=T0 + timedelta(hours=2)),
            execution("failed", phase="FAILED"),
            execution("later", created=T0 + timedelta(days=9)),
        ]
    )
    _, stub = serve(scenario)
    filters = (
        "gte(execution_updated_at,2026-09-10T00:00:00Z)"
        "+lt(execution_created_at,2026-09-11T00:00:00.000001Z)"
        "+eq(phase,SUCCEEDED)"
    )
    assert [e.id.name for e in _list(stub, filters=filters).executions] == ["live"]
    listed = _list(stub, filters="value_in(phase,FAILED;SUCCEEDED)").executions
    assert {e.id.name for e in listed} == {"old", "live", "failed", "later"}


def test_python_isoformat_plus_offset_breaks_the_filter(serve) -> None:
    # flyteadmin splits on `+` (`util/filters.go`), so `+00:00` leaves a fragment that is no
    # expression.
    _, stub = serve(Scenario(executions=many(1)))
    code, details = _status(
        lambda: _list(stub, filters="gte(execution_created_at,2026-09-10T00:00:00+00:00)")
    )
    assert (code, details) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid value for filters")


@pytest.mark.parametrize(
    ("filters", "details"),
    [
        ("eq(bogus,1)", "'e.bogus' is invalid filter"),
        ("eq(node_execution.phase,SUCCEEDED)", "'ne' entity is not allowed in filters"),
        ("like(phase,SUCCEEDED)", "unrecognized filter function: like"),
        # The column is checked before the function, as in flyteadmin's ParseFilters.
        ("like(bogus,1)", "'e.bogus' is invalid filter"),
        ("phase=SUCCEEDED", "invalid value for filters"),
    ],
)
def test_filter_errors_read_like_flyteadmin(serve, filters: str, details: str) -> None:
    _, stub = serve(Scenario(executions=many(1)))
    assert _status(lambda: _list(stub, filters=filters)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        details,
    )


def test_entity_prefix_and_mode_number(serve) -> None:
    scenario = Scenario(
        executions=[execution("orig"), execution("again", mode="RELAUNCH", reference="orig")]
    )
    _, stub = serve(scenario)
    # `mode` is stored as the ExecutionMode number; RELAUNCH is 3.
    assert [e.id.name for e in _list(stub, filters="eq(execution.mode,3)").executions] == ["again"]


def test_implicit_active_state_filter_unless_state_is_named(serve) -> None:
    _, stub = serve(Scenario(executions=many(3)))
    assert len(_list(stub).executions) == 3
    assert len(_list(stub, filters="eq(state,0)").executions) == 3
    assert len(_list(stub, filters="eq(state,1)").executions) == 0  # archived: none here


def test_sort_by_must_be_a_column(serve) -> None:
    _, stub = serve(Scenario(executions=many(3)))
    desc = common_pb2.Sort(key="execution_created_at", direction=common_pb2.Sort.DESCENDING)
    assert [e.id.name for e in _list(stub, sort=desc).executions] == ["x0002", "x0001", "x0000"]
    bogus = common_pb2.Sort(key="createdAt", direction=common_pb2.Sort.ASCENDING)
    assert _status(lambda: _list(stub, sort=bogus)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid sort key 'createdAt'",
    )


# -- node and task executions -----------------------------------------------------------------


def _nodes(stub: AdminServiceStub, name: str, parent: str = "") -> list[str]:
    page = stub.ListNodeExecutions(
        node_execution_pb2.NodeExecutionListRequest(
            workflow_execution_id=_wf(name), limit=100, unique_parent_id=parent
        )
    )
    return [n.id.node_id for n in page.node_executions]


def test_top_level_nodes_include_start_and_end_but_not_children(serve) -> None:
    _, stub = serve(Scenario(executions=[dynamic_execution("dyn")]))
    assert _nodes(stub, "dyn") == ["start-node", "n0", "n1", "end-node"]
    assert _nodes(stub, "dyn", parent="n1") == ["n1-0-dn0"]
    code, details = _status(lambda: _nodes(stub, "dyn", parent="n9"))
    assert code == grpc.StatusCode.NOT_FOUND and "node execution" in details


def test_nested_node_keeps_unique_id_and_spec_id(serve) -> None:
    _, stub = serve(Scenario(executions=[dynamic_execution("dyn")]))
    node = stub.GetNodeExecution(
        node_execution_pb2.NodeExecutionGetRequest(
            id=identifier_pb2.NodeExecutionIdentifier(node_id="n1-0-dn0", execution_id=_wf("dyn"))
        )
    )
    assert (node.id.node_id, node.metadata.spec_node_id, node.metadata.retry_group) == (
        "n1-0-dn0",
        "dn0",
        "0",
    )
    parent = stub.ListNodeExecutions(
        node_execution_pb2.NodeExecutionListRequest(workflow_execution_id=_wf("dyn"), limit=10)
    ).node_executions[2]
    assert parent.metadata.is_parent_node and parent.metadata.is_dynamic


def _tasks(stub: AdminServiceStub, name: str, node: str) -> list:
    return list(
        stub.ListTaskExecutions(
            task_execution_pb2.TaskExecutionListRequest(
                node_execution_id=identifier_pb2.NodeExecutionIdentifier(
                    node_id=node, execution_id=_wf(name)
                ),
                limit=100,
            )
        ).task_executions
    )


def test_task_execution_closure_as_propeller_reports_it(serve) -> None:
    _, stub = serve(Scenario(executions=[dynamic_execution("dyn")]))
    failed, ok = _tasks(stub, "dyn", "n1-0-dn0")
    data_dir = "s3://flyte-metadata/metadata/propeller/gs1-production-dyn/n1-0-dn0/data"
    # output_uri names outputs.pb and is reported on success only (whether or not it exists).
    assert ok.closure.output_uri == f"{data_dir}/1/outputs.pb"
    assert not failed.closure.HasField("output_uri")
    assert failed.closure.error.message == "OOMKilled"
    assert failed.input_uri == ok.input_uri == f"{data_dir}/inputs.pb"
    assert core_execution_pb2.TaskExecution.Phase.Name(failed.closure.phase) == "RETRYABLE_FAILED"
    assert ok.closure.task_type == "python-task"
    assert ok.closure.metadata.generated_name == "dyn-n1-0-dn0-1"
    pod = ok.closure.log_context.pods[0]
    assert (pod.namespace, pod.pod_name) == ("gs1-production", "dyn-n1-0-dn0-1")
    assert ok.closure.duration.ToTimedelta() == timedelta(minutes=30)


def test_pytorch_job_generated_name_is_the_job_not_a_worker(serve) -> None:
    _, stub = serve(Scenario(executions=[pytorch_execution("job")]))
    (te,) = _tasks(stub, "job", "n0")
    assert te.closure.metadata.generated_name == "job-n0-0"
    assert [p.pod_name for p in te.closure.log_context.pods] == [
        "job-n0-0-worker-0",
        "job-n0-0-worker-1",
    ]
    assert te.closure.log_context.pods[0].containers[0].container_name == "pytorch"


def test_get_task_serves_the_template_and_not_found_for_unregistered(serve) -> None:
    faults = AdminFaults(unregistered_tasks={(PROJECT, DOMAIN, "train.multinode", "v7")})
    ex = execution(
        "a", nodes=[SandboxNode("n0", "SUCCEEDED", [attempt("a", "n0", 0, task=PYTORCH)])]
    )
    _, stub = serve(Scenario(executions=[ex], tasks=[ELASTIC]), faults)

    def get(t: SandboxTask):
        return stub.GetTask(
            common_pb2.ObjectGetRequest(
                id=identifier_pb2.Identifier(
                    resource_type=identifier_pb2.TASK,
                    project=t.project,
                    domain=t.domain,
                    name=t.name,
                    version=t.version,
                )
            )
        )

    template = get(ELASTIC).closure.compiled_task.template
    assert (template.type, template.task_type_version) == ("python-task", 1)
    assert _status(lambda: get(PYTORCH))[0] == grpc.StatusCode.NOT_FOUND


# -- relaunch ---------------------------------------------------------------------------------


def _relaunch(stub: AdminServiceStub, name: str, new: str = "", overwrite: bool = True):
    return stub.RelaunchExecution(
        execution_pb2.ExecutionRelaunchRequest(id=_wf(name), name=new, overwrite_cache=overwrite)
    )


def test_relaunch_creates_a_queued_relaunch_with_the_same_inputs(serve) -> None:
    ex = execution("orig", inputs={"checkpoint_dir": "s3://exa-models/checkpoints/run-1/"})
    server, stub = serve(Scenario(executions=[ex]))
    new = _relaunch(stub, "orig", "orig-rerun").id
    assert new.name == "orig-rerun"
    got = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=new))
    meta = got.spec.metadata
    assert execution_pb2.ExecutionMetadata.ExecutionMode.Name(meta.mode) == "RELAUNCH"
    assert meta.reference_execution.name == "orig"
    assert got.spec.overwrite_cache
    assert core_execution_pb2.WorkflowExecution.Phase.Name(got.closure.phase) == "QUEUED"
    data = stub.GetExecutionData(execution_pb2.WorkflowExecutionGetDataRequest(id=new))
    assert data.full_inputs.literals["checkpoint_dir"].scalar.primitive.string_value == (
        "s3://exa-models/checkpoints/run-1/"
    )
    assert server.relaunches_of(ExecutionRef(PROJECT, DOMAIN, "orig")) == [
        ExecutionRef(PROJECT, DOMAIN, "orig-rerun")
    ]


def test_relaunch_without_a_name_gets_a_generated_one(serve) -> None:
    _, stub = serve(Scenario(executions=[execution("orig")]))
    name = _relaunch(stub, "orig").id.name
    assert len(name) == 20 and name[0].isalpha() and name == name.lower()


def test_relaunch_duplicate_name_is_already_exists(serve) -> None:
    server, stub = serve(Scenario(executions=[execution("orig")]))
    _relaunch(stub, "orig", "orig-rerun")
    code, details = _status(lambda: _relaunch(stub, "orig", "orig-rerun"))
    assert code == grpc.StatusCode.ALREADY_EXISTS
    assert details.startswith("value with matching already exists")
    assert len(server.relaunches_of(ExecutionRef(PROJECT, DOMAIN, "orig"))) == 1


@pytest.mark.parametrize(
    ("name", "details"),
    [
        ("9lives", "invalid name format: 9lives"),
        ("under_score", "invalid name format: under_score"),
        ("orig-rerun\n", "invalid name format: orig-rerun\n"),  # Go's `$`: end of text only
        ("a" * 64, f"size of name exceeded length 63 : {'a' * 64}"),
    ],
)
def test_relaunch_name_validation(serve, name: str, details: str) -> None:
    _, stub = serve(Scenario(executions=[execution("orig")]))
    assert _status(lambda: _relaunch(stub, "orig", name)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        details,
    )


def test_relaunch_of_unknown_execution_is_not_found_before_name_checks(serve) -> None:
    _, stub = serve(Scenario(executions=[execution("orig")]))
    code, details = _status(lambda: _relaunch(stub, "ghost", "9-bad-name"))
    assert code == grpc.StatusCode.NOT_FOUND
    assert (
        details == "missing entity of type execution with identifier "
        'project:"gs1" domain:"production" name:"ghost"'
    )


def test_recover_is_implemented_and_recorded(serve) -> None:
    server, stub = serve(Scenario(executions=[execution("orig")]))
    stub.RecoverExecution(execution_pb2.ExecutionRecoverRequest(id=_wf("orig"), name="rec"))
    assert [r.name for r in server.calls_of("RecoverExecution")] == ["rec"]
    mode = server.executions[ExecutionRef(PROJECT, DOMAIN, "rec")].spec.metadata.mode
    assert execution_pb2.ExecutionMetadata.ExecutionMode.Name(mode) == "RECOVERED"


# -- faults -----------------------------------------------------------------------------------


def test_fail_next_fails_exactly_that_many_calls(serve) -> None:
    faults = AdminFaults()
    faults.fail_next("GetExecution", 2, grpc.StatusCode.UNAVAILABLE)
    server, stub = serve(Scenario(executions=[execution("a")]), faults)
    get = execution_pb2.WorkflowExecutionGetRequest(id=_wf("a"))
    for _ in range(2):
        assert _status(lambda: stub.GetExecution(get))[0] == grpc.StatusCode.UNAVAILABLE
    assert stub.GetExecution(get).id.name == "a"
    assert server.call_counts()["GetExecution"] == 3


def test_lost_relaunch_response_still_relaunched(serve) -> None:
    server, stub = serve(
        Scenario(executions=[execution("orig")]), AdminFaults(lose_relaunch_response=1)
    )
    assert _status(lambda: _relaunch(stub, "orig", "orig-rerun"))[0] == grpc.StatusCode.UNAVAILABLE
    assert server.relaunches_of(ExecutionRef(PROJECT, DOMAIN, "orig")) == [
        ExecutionRef(PROJECT, DOMAIN, "orig-rerun")
    ]


@pytest.mark.parametrize(
    ("kind", "token"), [("early", ""), ("bogus", "not-a-token"), ("repeat", "0")]
)
def test_page_token_faults(serve, kind: str, token: str) -> None:
    _, stub = serve(Scenario(executions=many(4)), AdminFaults(page_token=kind))
    assert _list(stub, limit=2).token == token
    assert _list(stub, limit=3, token="3").token == ""  # a partial page is left alone


# -- launch plans, CreateExecution, concurrency, children (flyteadmin v1.16.8) ------------------


def _lp(version: str = "v1") -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=identifier_pb2.LAUNCH_PLAN,
        project=PROJECT,
        domain=DOMAIN,
        name="wf.train",
        version=version,
    )


def test_relaunch_at_a_concurrency_limit_is_already_exists_before_the_name_is_checked(
    serve,
) -> None:
    from forensics.sandbox.scenario import SandboxLaunchPlan

    running = execution("busy", phase="RUNNING")
    scenario = Scenario(
        executions=[execution("orig"), running, execution("taken")],
        launch_plans=[SandboxLaunchPlan(PROJECT, DOMAIN, "wf.train", "v1", concurrency_max=1)],
    )
    server, stub = serve(scenario)
    # `checkLaunchPlanConcurrency` runs in launchExecution, before the row is inserted, so even
    # a taken name answers with the concurrency message.
    for name in ("orig-rerun", "taken"):
        code, details = _status(lambda n=name: _relaunch(stub, "orig", n))
        assert code == grpc.StatusCode.ALREADY_EXISTS
        assert (
            details == "concurrency limit (1) reached for launch plan wf.train; skipping execution"
        )
    assert server.relaunches_of(ExecutionRef(PROJECT, DOMAIN, "orig")) == []


def test_create_execution_keeps_the_request_metadata_and_needs_the_launch_plan(serve) -> None:
    _, stub = serve(Scenario(executions=[execution("orig")]))
    spec = execution_pb2.ExecutionSpec(
        launch_plan=_lp(),
        metadata=execution_pb2.ExecutionMetadata(
            mode=execution_pb2.ExecutionMetadata.RELAUNCH,
            reference_execution=_wf("orig"),
            principal="someone-else",
        ),
    )
    req = execution_pb2.ExecutionCreateRequest(
        project=PROJECT, domain=DOMAIN, name="orig-v1", spec=spec
    )
    new = stub.CreateExecution(req).id
    got = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=new)).spec.metadata
    assert got.mode == execution_pb2.ExecutionMetadata.RELAUNCH
    assert got.reference_execution.name == "orig" and got.principal == "sandbox"
    assert _status(lambda: stub.CreateExecution(req))[0] == grpc.StatusCode.ALREADY_EXISTS
    req.spec.launch_plan.version = "v9"
    req.name = "orig-v9"
    code, details = _status(lambda: stub.CreateExecution(req))
    assert code == grpc.StatusCode.NOT_FOUND and "LAUNCH_PLAN" in details


def test_a_relaunched_child_keeps_its_parent_node(serve) -> None:
    child = execution("child", mode="CHILD_WORKFLOW")
    child.parent = (PROJECT, DOMAIN, "parent", "n2")
    _, stub = serve(Scenario(executions=[execution("parent", phase="RUNNING"), child]))
    new = _relaunch(stub, "child", "child-rerun").id
    meta = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=new)).spec.metadata
    # RelaunchExecution copies the whole spec: the relaunch re-attaches to the parent's node.
    assert meta.parent_node_execution.node_id == "n2"
    assert meta.parent_node_execution.execution_id.name == "parent"


def test_launch_plans_and_workflows_are_derived_from_the_executions(serve) -> None:
    _, stub = serve(Scenario(executions=[execution("orig")]))
    lp = stub.GetLaunchPlan(common_pb2.ObjectGetRequest(id=_lp()))
    wf = stub.GetWorkflow(common_pb2.ObjectGetRequest(id=lp.spec.workflow_id))
    (node,) = wf.closure.compiled_workflow.primary.template.nodes
    (task,) = wf.closure.compiled_workflow.tasks
    assert node.id == "n0" and node.task_node.reference_id == task.template.id
    assert task.template.metadata.runtime.version == "1.16.31" and task.template.container.image
    listed = stub.ListLaunchPlans(
        common_pb2.ResourceListRequest(
            id=common_pb2.NamedEntityIdentifier(project=PROJECT, domain=DOMAIN, name="wf.train"),
            limit=10,
        )
    )
    assert [p.id.version for p in listed.launch_plans] == ["v1"]


def test_methods_the_sandbox_does_not_serve_are_unimplemented(serve) -> None:
    _, stub = serve(Scenario(executions=[execution("a")]))
    code, _ = _status(
        lambda: stub.TerminateExecution(execution_pb2.ExecutionTerminateRequest(id=_wf("a")))
    )
    assert code == grpc.StatusCode.UNIMPLEMENTED


# -- shapes met in the field (docs/upstream.md) ---------------------------------------------------


def test_ends_updated_at_and_domains_as_flyteadmin_records_them(serve) -> None:
    from flyteidl.admin import project_pb2

    late = T0 + timedelta(minutes=30, microseconds=900_000)
    single = SandboxAttempt(0, "SUCCEEDED", T0, late, ["one-n0-0"], ELASTIC)
    job = SandboxAttempt(0, "SUCCEEDED", T0, late, ["job-n0-0-worker-0"], PYTORCH)
    running = execution(
        "old",
        created=T0 - timedelta(days=3),
        updated=T0 + timedelta(hours=2),  # a node event's time: flyteadmin would not store it
        phase="RUNNING",
        nodes=[SandboxNode("n0", "SUCCEEDED", [attempt("old", "n0", 0)])],
    )
    scenario = Scenario(
        executions=[
            execution("one", nodes=[SandboxNode("n0", "SUCCEEDED", [single])]),
            execution("job", nodes=[SandboxNode("n0", "SUCCEEDED", [job])]),
            running,
        ],
        domains=["dev", "prod"],
    )
    _, stub = serve(scenario)
    # A single pod's end is FinishedAt, whole seconds; propeller stamps a PyTorchJob's itself.
    (one,) = _tasks(stub, "one", "n0")
    assert one.closure.duration.ToTimedelta() == timedelta(minutes=30)
    (pt,) = _tasks(stub, "job", "n0")
    assert pt.closure.duration.ToTimedelta() == timedelta(minutes=30, microseconds=900_000)
    # updated_at moves on workflow-level events only: a running execution's is its start.
    ex = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=_wf("old")))
    assert ex.closure.updated_at.ToDatetime(tzinfo=UTC) == T0 - timedelta(days=3, seconds=-1)
    # ListProjects lists the configured domains for every project.
    projects = stub.ListProjects(project_pb2.ProjectListRequest(limit=10)).projects
    assert [[d.id for d in p.domains] for p in projects] == [["dev", "prod"]]
