"""`relaunch --only-lost` through the CLI against the sandbox (forensics/sandbox/only_lost.py):
the lost training node re-run alone from its recorded inputs, then eval, each exactly once
under two concurrent commands and a lost response; a failed re-run stops the chain; a branch
refused with the whole-relaunch command; a RECOVERED copy reported as a laundered copy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import grpc
import pytest
from flyteidl.admin import execution_pb2
from flyteidl.core import identifier_pb2
from flyteidl.service import admin_pb2_grpc
from support.cli import run, use_sandbox
from support.operators import at_once
from support.scan import CONFIG

from forensics.model import ExecutionRef
from forensics.relaunch.only_lost import rerun_name
from forensics.sandbox.only_lost import (
    BRANCHY,
    PIPELINE,
    checkpoint_dir,
    dataset,
    only_lost_scenario,
)
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.e2e

TRAIN_RERUN = ExecutionRef(PIPELINE.project, PIPELINE.domain, rerun_name(PIPELINE, "n1"))
EVAL_RERUN = ExecutionRef(PIPELINE.project, PIPELINE.domain, rerun_name(PIPELINE, "n2"))
WINDOW = ["--since", "2026-10-05", "--until", "2026-10-07"]


@pytest.fixture
def box(tmp_path, monkeypatch):
    with sandbox(only_lost_scenario()) as b:
        b.admin.run_seconds = None  # created executions finish on `finish_runs()` only
        use_sandbox(b, monkeypatch)
        (tmp_path / "elastic-audit.toml").write_text(CONFIG)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        yield b


def relaunch(capsys, *args: str) -> tuple[int, list[dict], str]:
    code, out, err = run(["relaunch", *args, "-o", "json"], capsys)
    return code, json.loads(out), err


def audit(tmp_path: Path) -> list[dict]:
    path = tmp_path / "state" / "elastic-audit" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def creates(box) -> list:
    return box.admin.calls_of("CreateExecution")


def _inputs(request) -> dict[str, str]:
    return {
        k: v.scalar.primitive.string_value or v.scalar.blob.uri
        for k, v in request.inputs.literals.items()
    }


def test_train_is_rerun_alone_from_its_recorded_inputs_then_eval_each_once(box, capsys, tmp_path):
    code, (out,), err = relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    assert code == 0, err
    assert out["status"] == "relaunched"
    assert out["relaunched_as"] == TRAIN_RERUN.as_dict()
    (first,) = creates(box)
    lp = first.spec.launch_plan
    assert (lp.resource_type, lp.name, lp.version) == (identifier_pb2.TASK, "staged.train", "v1")
    assert first.name == TRAIN_RERUN.name
    assert first.spec.metadata.reference_execution.name == PIPELINE.name
    # the node's recorded inputs: the checkpoint location the attempt saved to, prep's dataset
    assert _inputs(first) == {
        "dataset": dataset(PIPELINE),
        "checkpoint_dir": checkpoint_dir(PIPELINE),
    }
    nodes = {n["node"]: n for n in out["plan"]["only_lost"]["nodes"]}
    assert set(nodes) == {"n1", "n2"} and nodes["n2"]["state"] == "waiting"
    assert (
        f"input checkpoint_dir points at the checkpoint {checkpoint_dir(PIPELINE)}"
        in (nodes["n1"]["detail"])
    )
    assert [n["node"] for n in out["plan"]["only_lost"]["not_rerun"]] == ["n0"]

    # again while train runs: nothing new
    code, (again,), _ = relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    assert (code, again["status"]) == (0, "already-relaunched") and len(creates(box)) == 1

    box.admin.finish_runs()
    code, (third,), _ = relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    assert (code, third["status"]) == (0, "relaunched")
    second = creates(box)[1]
    assert (second.name, second.spec.launch_plan.name) == (EVAL_RERUN.name, "staged.eval")
    assert _inputs(second)["dataset"] == dataset(PIPELINE)

    box.admin.finish_runs()
    code, (done,), _ = relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    assert (code, done["status"]) == (0, "already-relaunched")
    assert done["reason"].startswith("every re-run succeeded")
    counts = box.admin.call_counts()
    assert counts["CreateExecution"] == 2
    assert counts["RelaunchExecution"] == counts["RecoverExecution"] == 0
    assert [x["action"] for x in audit(tmp_path)] == [
        "relaunched",
        "already-relaunched",
        "relaunched",
        "already-relaunched",
    ]


def test_a_lost_response_is_this_commands_own_rerun(box, capsys, tmp_path):
    box.admin.faults.lose_relaunch_response = 1  # created, the answer never arrives
    code, (out,), _ = relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    assert (code, out["status"]) == (0, "relaunched")
    assert len(creates(box)) == 2  # the call and its retry
    assert box.admin.relaunches_of(PIPELINE) == [TRAIN_RERUN]
    (line,) = audit(tmp_path)
    assert line["after_retry"] is True


def test_two_commands_at_once_start_train_once(box, tmp_path):
    env = box.child_environ()
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    cmd = [sys.executable, "-m", "forensics", "relaunch", str(PIPELINE), "--only-lost", "--yes"]
    cmd += ["-o", "json", "--config", str(tmp_path / "elastic-audit.toml")]
    assert at_once(cmd, env) == ["already-relaunched", "relaunched"]
    assert box.admin.relaunches_of(PIPELINE) == [TRAIN_RERUN]


def test_a_failed_rerun_stops_the_chain_and_says_so(box, capsys):
    box.admin.faults.failing_tasks = {"staged.train"}
    relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    box.admin.finish_runs()
    code, (out,), _ = relaunch(capsys, str(PIPELINE), "--only-lost", "--yes")
    assert (code, out["status"]) == (3, "failed")
    assert "node n1: re-run ended FAILED: chain stopped" in out["reason"]
    assert len(creates(box)) == 1  # eval never started


def test_a_branch_is_refused_with_the_whole_relaunch_command(box, capsys):
    code, (out,), _ = relaunch(capsys, str(BRANCHY), "--only-lost", "--yes")
    assert (code, out["status"]) == (1, "refused")
    assert "runs inside node n1" in out["reason"]
    assert f"elastic-audit relaunch {BRANCHY}" in out["reason"]
    assert creates(box) == []


def _recover(box) -> str:
    """RecoverExecution of PIPELINE, as someone in the console would (never this tool)."""
    address = box.env["FLYTE_PLATFORM_URL"].removeprefix("dns:///")
    with grpc.insecure_channel(address) as channel:
        stub = admin_pb2_grpc.AdminServiceStub(channel)
        wf = identifier_pb2.WorkflowExecutionIdentifier(
            project=PIPELINE.project, domain=PIPELINE.domain, name=PIPELINE.name
        )
        resp = stub.RecoverExecution(
            execution_pb2.ExecutionRecoverRequest(id=wf, name="recoveredcopy1")
        )
    box.admin.finish_runs()
    return resp.id.name


def test_a_recovered_copy_is_reported_as_laundered_and_never_the_repair(box, capsys):
    copy = _recover(box)
    _, out, _ = run(["show", f"{PIPELINE.project}:{PIPELINE.domain}:{copy}"], capsys)
    assert f"a RECOVERED copy of {PIPELINE}" in out and "copied the false success" in out
    _, out, _ = run(["scan", *WINDOW, "-o", "json"], capsys)
    report = json.loads(out)
    (finding,) = [f for f in report["findings"] if f["execution"]["name"] == PIPELINE.name]
    assert finding["relaunched_as"] is None
    assert [r["name"] for r in finding["recovered_as"]] == [copy]
    code, (plan,), _ = relaunch(capsys, str(PIPELINE), "--dry-run")
    assert (code, plan["status"]) == (0, "dry-run")  # refused for nothing because of it
    assert [r["name"] for r in plan["plan"]["recovered_as"]] == [copy]
