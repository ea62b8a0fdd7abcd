"""The only-lost scenario served: single-task CreateExecution and RecoverExecution over gRPC as
flyteadmin answers them, created executions run to completion, their files in the sandbox S3,
and the scan finding the lost nodes (docs/upstream.md, "Single-task executions and recovery").

Requests go through flyteidl's plain stub, so what is checked is the server, not our client."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import grpc
import pytest
from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    node_execution_pb2,
    task_execution_pb2,
)
from flyteidl.core import identifier_pb2, literals_pb2
from flyteidl.service.admin_pb2_grpc import AdminServiceStub
from support.cli import run
from support.expected import ONLY_LOST_FINDINGS

from forensics.model import ExecutionRef
from forensics.sandbox import only_lost as ol
from forensics.sandbox.admin_protos import NodePhase, TaskPhase, WfPhase, literal_map
from forensics.sandbox.admin_runs import texts
from forensics.sandbox.admin_server import AdminFaults
from forensics.sandbox.scenario import SandboxTask
from forensics.sandbox.stack import Faults, sandbox

pytestmark = pytest.mark.integration

P, D = ol.PIPELINE.project, ol.PIPELINE.domain
SUCCEEDED, FAILED, RUNNING = (WfPhase.Value(p) for p in ("SUCCEEDED", "FAILED", "RUNNING"))
NODE_RECOVERED = NodePhase.Value("RECOVERED")


def _wf(name: str) -> identifier_pb2.WorkflowExecutionIdentifier:
    return identifier_pb2.WorkflowExecutionIdentifier(project=P, domain=D, name=name)


def _task_request(
    task: SandboxTask, name: str, inputs: dict[str, str]
) -> execution_pb2.ExecutionCreateRequest:
    ident = identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK,
        project=task.project,
        domain=task.domain,
        name=task.name,
        version=task.version,
    )
    return execution_pb2.ExecutionCreateRequest(
        project=P,
        domain=D,
        name=name,
        spec=execution_pb2.ExecutionSpec(launch_plan=ident),
        inputs=literal_map(dict(inputs)),
    )


def _train_inputs() -> dict[str, str]:
    return {
        "dataset": ol.dataset(ol.PIPELINE),
        "checkpoint_dir": ol.checkpoint_dir(ol.PIPELINE),
    }


def _nodes(stub, name: str) -> dict[str, node_execution_pb2.NodeExecution]:
    listed = stub.ListNodeExecutions(
        node_execution_pb2.NodeExecutionListRequest(workflow_execution_id=_wf(name), limit=100)
    )
    return {n.id.node_id: n for n in listed.node_executions}


def _status(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


# -- single-task CreateExecution --------------------------------------------------------------


def test_a_single_task_execution_runs_the_task_alone_on_the_given_inputs(serve) -> None:
    _, stub = serve(ol.only_lost_scenario())
    created = stub.CreateExecution(_task_request(ol.EVAL_TASK, "eval-again", _train_inputs()))
    assert created.id == _wf("eval-again")
    got = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=created.id))
    assert got.closure.phase == SUCCEEDED  # finished at the first request after creation
    assert got.spec.launch_plan.resource_type == identifier_pb2.TASK
    assert got.closure.workflow_id.name == ".flytegen.staged.eval"
    assert got.spec.metadata.mode == execution_pb2.ExecutionMetadata.MANUAL
    nodes = _nodes(stub, "eval-again")
    assert list(nodes) == ["start-node", "stagedeval", "end-node"]
    node = nodes["stagedeval"]
    tasks = stub.ListTaskExecutions(
        task_execution_pb2.TaskExecutionListRequest(node_execution_id=node.id, limit=10)
    ).task_executions
    assert [(t.id.task_id.name, t.id.retry_attempt, t.closure.phase) for t in tasks] == [
        ("staged.eval", 0, TaskPhase.Value("SUCCEEDED"))
    ]
    data = stub.GetNodeExecutionData(node_execution_pb2.NodeExecutionGetDataRequest(id=node.id))
    assert texts(data.full_inputs) == _train_inputs()
    assert set(texts(data.full_outputs)) == {"metrics"}
    whole = stub.GetExecutionData(execution_pb2.WorkflowExecutionGetDataRequest(id=created.id))
    assert texts(whole.full_inputs) == _train_inputs()
    assert texts(whole.full_outputs) == texts(data.full_outputs)
    skeleton = stub.GetWorkflow(common_pb2.ObjectGetRequest(id=got.closure.workflow_id))
    ids = [n.id for n in skeleton.closure.compiled_workflow.primary.template.nodes]
    assert ids == ["start-node", "stagedeval", "end-node"]


def test_the_requests_mode_and_reference_are_kept(serve) -> None:
    _, stub = serve(ol.only_lost_scenario())
    request = _task_request(ol.TRAIN_TASK, "train-again", _train_inputs())
    request.spec.metadata.mode = execution_pb2.ExecutionMetadata.RELAUNCH
    request.spec.metadata.reference_execution.CopyFrom(_wf(ol.PIPELINE.name))
    stub.CreateExecution(request)
    got = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=_wf("train-again")))
    assert got.spec.metadata.mode == execution_pb2.ExecutionMetadata.RELAUNCH
    assert got.spec.metadata.reference_execution.name == ol.PIPELINE.name
    assert got.spec.metadata.principal == "sandbox"


def test_an_unregistered_task_or_wrong_inputs_are_refused_as_flyteadmin_does(serve) -> None:
    server, stub = serve(ol.only_lost_scenario())
    unknown = _task_request(ol.TRAIN_TASK, "x1", _train_inputs())
    unknown.spec.launch_plan.version = "v9"
    assert _status(lambda: stub.CreateExecution(unknown))[0] == grpc.StatusCode.NOT_FOUND
    extra = _task_request(ol.TRAIN_TASK, "x2", {**_train_inputs(), "lr": "1e-4"})
    assert _status(lambda: stub.CreateExecution(extra)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid input lr",
    )
    short = _task_request(ol.TRAIN_TASK, "x3", {"dataset": "d"})
    assert _status(lambda: stub.CreateExecution(short)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "expected_inputs checkpoint_dir missing",
    )
    assert not {"x1", "x2", "x3"} & {r.name for r in server.executions}


def test_a_taken_name_is_already_exists_and_a_lost_response_still_creates(serve) -> None:
    server, stub = serve(ol.only_lost_scenario(), AdminFaults(lose_relaunch_response=1))
    request = _task_request(ol.TRAIN_TASK, "train-once", _train_inputs())
    assert _status(lambda: stub.CreateExecution(request))[0] == grpc.StatusCode.UNAVAILABLE
    assert ExecutionRef(P, D, "train-once") in server.executions  # created, answer lost
    assert _status(lambda: stub.CreateExecution(request))[0] == grpc.StatusCode.ALREADY_EXISTS
    assert [e for e in server.executions if e.name == "train-once"] == [
        ExecutionRef(P, D, "train-once")
    ]


def test_a_failing_task_fails_its_execution_and_a_held_run_stays_running(serve) -> None:
    server, stub = serve(ol.only_lost_scenario(), AdminFaults(failing_tasks={ol.TRAIN_TASK.name}))
    stub.CreateExecution(_task_request(ol.TRAIN_TASK, "train-fails", _train_inputs()))
    got = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=_wf("train-fails")))
    assert got.closure.phase == FAILED
    assert _nodes(stub, "train-fails")["stagedtrain"].closure.phase == NodePhase.Value("FAILED")
    server.run_seconds = None
    stub.CreateExecution(_task_request(ol.EVAL_TASK, "eval-held", _train_inputs()))
    held = execution_pb2.WorkflowExecutionGetRequest(id=_wf("eval-held"))
    assert stub.GetExecution(held).closure.phase == RUNNING
    assert _nodes(stub, "eval-held")["stagedeval"].closure.phase == NodePhase.Value("RUNNING")
    server.finish_runs()
    assert stub.GetExecution(held).closure.phase == SUCCEEDED


# -- RecoverExecution -------------------------------------------------------------------------


def test_recovering_the_pipeline_copies_the_false_success(serve) -> None:
    server, stub = serve(ol.only_lost_scenario())
    recovered = stub.RecoverExecution(
        execution_pb2.ExecutionRecoverRequest(id=_wf(ol.PIPELINE.name), name="recovered")
    )
    got = stub.GetExecution(execution_pb2.WorkflowExecutionGetRequest(id=recovered.id))
    assert got.spec.metadata.mode == execution_pb2.ExecutionMetadata.RECOVERED
    assert got.spec.metadata.reference_execution.name == ol.PIPELINE.name
    assert got.closure.phase == SUCCEEDED
    nodes = _nodes(stub, "recovered")
    assert {n: nodes[n].closure.phase for n in (ol.PREP, ol.TRAIN, ol.EVAL)} == dict.fromkeys(
        (ol.PREP, ol.TRAIN, ol.EVAL), NODE_RECOVERED
    )
    lost = stub.GetNodeExecutionData(
        node_execution_pb2.NodeExecutionGetDataRequest(id=nodes[ol.TRAIN].id)
    )
    assert lost.full_outputs == literals_pb2.LiteralMap()  # the empty copy
    assert server.blobs.read(nodes[ol.TRAIN].closure.output_uri) == b""  # written, empty
    prep = stub.GetNodeExecutionData(
        node_execution_pb2.NodeExecutionGetDataRequest(id=nodes[ol.PREP].id)
    )
    assert texts(prep.full_outputs) == {"dataset": ol.dataset(ol.PIPELINE)}
    assert server.relaunches_of(ol.PIPELINE) == [ExecutionRef(P, D, "recovered")]


def test_the_original_lost_nodes_data_answers_empty_outputs(serve) -> None:
    _, stub = serve(ol.only_lost_scenario())
    ident = identifier_pb2.NodeExecutionIdentifier(
        node_id=ol.TRAIN, execution_id=_wf(ol.PIPELINE.name)
    )
    data = stub.GetNodeExecutionData(node_execution_pb2.NodeExecutionGetDataRequest(id=ident))
    assert data.outputs.url.endswith(f"/{ol.TRAIN}/data/0/outputs.pb")
    assert data.full_outputs == literals_pb2.LiteralMap()  # GetOutputs: missing -> empty
    assert texts(data.full_inputs) == _train_inputs()


def test_the_registered_workflows_carry_bindings_and_the_branch(serve) -> None:
    _, stub = serve(ol.only_lost_scenario())

    def workflow(name: str):
        ident = identifier_pb2.Identifier(
            resource_type=identifier_pb2.WORKFLOW, project=P, domain=D, name=name, version="v1"
        )
        return stub.GetWorkflow(common_pb2.ObjectGetRequest(id=ident)).closure.compiled_workflow

    staged = workflow("wf.staged")
    nodes = {n.id: n for n in staged.primary.template.nodes}
    assert list(nodes[ol.EVAL].upstream_node_ids) == [ol.PREP, ol.TRAIN]
    assert list(staged.primary.connections.upstream[ol.TRAIN].ids) == [ol.PREP, "start-node"]
    templates = {t.template.id.name: t.template for t in staged.tasks}
    assert templates["staged.prep"].metadata.discoverable
    assert not templates["staged.train"].metadata.discoverable
    assert not templates["staged.train"].interface.outputs.variables
    branchy = {n.id: n for n in workflow("wf.branchy").primary.template.nodes}
    assert branchy[ol.TRAIN].HasField("branch_node")


# -- served by the stack ----------------------------------------------------------------------


def test_the_stack_writes_a_reruns_files_to_s3_and_the_scan_finds_both_lost_nodes(capsys) -> None:
    with sandbox(ol.only_lost_scenario(), Faults()) as box, box.apply_env():
        stub = AdminServiceStub(grpc.insecure_channel(box.admin.endpoint))
        stub.CreateExecution(_task_request(ol.TRAIN_TASK, "train-rerun", _train_inputs()))
        node = _nodes(stub, "train-rerun")["stagedtrain"]
        s3 = boto3.client("s3")
        bucket, _, key = node.closure.output_uri.removeprefix("s3://").partition("/")
        assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == 0  # empty, present
        code, out, _ = run(
            [
                "scan",
                "--since",
                ol.WINDOW_START.isoformat(),
                "--until",
                ol.WINDOW_END.isoformat(),
                "-o",
                "json",
            ],
            capsys,
        )
    report = json.loads(out)
    found = {
        (
            *(f["execution"][k] for k in ("project", "domain", "name")),
            f["node_id"],
            f["attempt"],
        ): f["verdict"]
        for f in report["findings"]
    }
    assert found == ONLY_LOST_FINDINGS
    assert report["gaps"] == []
    assert code == 1  # findings


def test_racing_creates_of_one_name_make_one_execution(serve) -> None:
    server, stub = serve(ol.only_lost_scenario())
    request = _task_request(ol.TRAIN_TASK, "train-raced", _train_inputs())

    def create(_: int) -> str:
        try:
            stub.CreateExecution(request)
            return "created"
        except grpc.RpcError as e:
            return e.code().name

    with ThreadPoolExecutor(8) as pool:
        answers = sorted(pool.map(create, range(8)))
    assert answers == ["ALREADY_EXISTS"] * 7 + ["created"]
    assert len(server.calls_of("CreateExecution")) == 8
    assert [r for r in server.executions if r.name == "train-raced"] == [
        ExecutionRef(P, D, "train-raced")
    ]


def test_a_run_finishes_at_the_first_request_after_run_seconds(serve) -> None:
    server, stub = serve(ol.only_lost_scenario())
    server.run_seconds = 0.3
    stub.CreateExecution(_task_request(ol.EVAL_TASK, "eval-timed", _train_inputs()))
    get = execution_pb2.WorkflowExecutionGetRequest(id=_wf("eval-timed"))
    assert stub.GetExecution(get).closure.phase == RUNNING
    time.sleep(0.35)
    assert stub.GetExecution(get).closure.phase == SUCCEEDED
