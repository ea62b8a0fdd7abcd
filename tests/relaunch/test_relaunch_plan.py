"""relaunch looks before it acts: phase, parent, chains, the bug, caches, Admin's reasons.

Every test goes through the real CLI against the sandbox, whose Admin knows launch plans and
their workflows, CreateExecution, concurrency limits and child executions (flyteadmin v1.16.8
`execution_manager.go`); the executions are the reference scenario's relaunch neighbours.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run, use_sandbox
from support.scan import CONFIG

from forensics.model import ExecutionRef
from forensics.relaunch import relaunch_name
from forensics.sandbox.incident import (
    CHAINED,
    CHILD,
    FIXED_IMAGE,
    FRESH,
    PIPELINE,
    REFERENCE,
    RUNNING,
    TWO_NODES,
    reference_scenario,
)
from forensics.sandbox.s3_server import S3Faults, S3Rule
from forensics.sandbox.scenario import Scenario
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

MUTATING = ("RelaunchExecution", "RecoverExecution", "CreateExecution", "TerminateExecution")
INCIDENT = ExecutionRef(*REFERENCE)


def _ref(t: tuple[str, str, str]) -> ExecutionRef:
    return ExecutionRef(*t)


@pytest.fixture
def make_box(tmp_path, monkeypatch):
    """Start the sandbox on the reference scenario, optionally changed first."""
    boxes = []

    def start(change: Callable[[Scenario], None] | None = None):
        scenario = reference_scenario()
        if change is not None:
            change(scenario)
        cm = sandbox(scenario)
        b = cm.__enter__()
        boxes.append(cm)
        use_sandbox(b, monkeypatch)
        (tmp_path / "elastic-audit.toml").write_text(CONFIG)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        return b

    yield start
    for cm in boxes:
        cm.__exit__(None, None, None)


@pytest.fixture
def box(make_box):
    b = make_box()
    yield b
    assert b.admin.call_counts()["RecoverExecution"] == 0


def relaunch(capsys, *args: str) -> tuple[int, list[dict], str]:
    code, out, err = run(["relaunch", *args, "-o", "json"], capsys)
    assert "Traceback" not in err
    return code, json.loads(out), err


def audit(tmp_path: Path) -> list[dict]:
    path = tmp_path / "state" / "elastic-audit" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def mutations(box) -> int:
    counts = box.admin.call_counts()
    return sum(counts[m] for m in MUTATING)


# 1. A relaunch onto the same bug that died again is no relaunch: report it, relaunch it.
def test_a_relaunch_that_died_silently_green_too_is_reported_and_relaunched(box, capsys, tmp_path):
    original = _ref(CHAINED)
    dead = ExecutionRef(original.project, original.domain, relaunch_name(original))
    code, (out,), _ = relaunch(capsys, str(original), "--yes")
    assert code == 0 and out["status"] == "relaunched"
    assert out["relaunched_as"]["name"] == relaunch_name(dead)  # the dead relaunch's own name
    (request,) = box.admin.calls_of("RelaunchExecution")
    assert request.id.name == dead.name and request.name == relaunch_name(dead)
    assert any(str(dead) in c and "affected" in c for c in out["plan"]["chain"])
    assert str(dead) in out["reason"]
    # ...and the plan warned that the relaunch re-runs the same code, as the first one did.
    assert out["plan"]["bug"].startswith("YES - re-runs distill.train version v1")
    # Rerun: the live relaunch of the dead one is reported; nothing else is created.
    code, (again,), _ = relaunch(capsys, str(original), "--yes")
    assert code == 0 and again["status"] == "already-relaunched"
    assert again["relaunched_as"] == out["relaunched_as"]
    assert len(box.admin.calls_of("RelaunchExecution")) == 1
    assert [a["action"] for a in audit(tmp_path)] == ["relaunched", "already-relaunched"]


def test_to_version_creates_the_relaunch_on_the_fixed_launch_plan_exactly_once(
    box, capsys, tmp_path
):
    original = _ref(FRESH)
    box.admin.faults.lose_relaunch_response = 1  # Admin creates it; the answer is lost
    code, (out,), _ = relaunch(capsys, str(original), "--to-version", "v2", "--yes")
    assert code == 0 and out["status"] == "relaunched"
    assert out["relaunched_as"]["name"] == relaunch_name(original)
    assert box.admin.calls_of("RelaunchExecution") == []
    sent = box.admin.calls_of("CreateExecution")
    assert len(sent) == 2 and sent[0] == sent[1]  # the call and its retry, the same request
    new = box.admin.executions[_ref((*FRESH[:2], relaunch_name(original)))]
    old = box.admin.executions[original]
    spec = new.spec
    assert spec.launch_plan.name == "wf.distill" and spec.launch_plan.version == "v2"
    assert spec.metadata.mode == 3  # RELAUNCH
    assert spec.metadata.reference_execution.name == original.name
    assert dict(spec.labels.values) == {"team": "distill"}
    assert dict(spec.annotations.values) == {"owner": "alice"}
    assert spec.security_context.run_as.k8s_service_account == "distill-runner"
    assert spec.raw_output_data_config.output_location_prefix == "s3://exa-models/raw/distill/"
    assert spec.security_context == old.spec.security_context
    assert sent[0].inputs.literals["checkpoint_dir"].scalar.primitive.string_value == (
        f"s3://exa-models/checkpoints/{original.name}/"
    )
    assert box.admin.relaunches_of(original) == [ExecutionRef(**out["relaunched_as"])]
    assert FIXED_IMAGE in out["plan"]["bug"] and out["plan"]["bug"].startswith("unknown")
    (line,) = audit(tmp_path)
    assert line["action"] == "relaunched" and line["after_retry"] is True
    assert line["request"]["spec"]["launch_plan"]["version"] == "v2"
    # A second operator, plain or at the version: the first relaunch, nothing new.
    for extra in ((), ("--to-version", "v2")):
        code, (again,), _ = relaunch(capsys, str(original), *extra, "--yes")
        assert code == 0 and again["status"] == "already-relaunched"
    assert len(box.admin.relaunches_of(original)) == 1
    assert len(box.admin.calls_of("CreateExecution")) == 2


def test_to_version_that_does_not_exist_is_refused_before_anything_is_sent(box, capsys):
    code, (out,), _ = relaunch(capsys, str(_ref(FRESH)), "--to-version", "v9", "--yes")
    assert code == 1 and out["status"] == "refused" and "v9" in out["reason"]
    assert "LAUNCH_PLAN" in out["reason"] and mutations(box) == 0


# 2. An original still running: a second run would share its checkpoint prefix.
def test_a_running_original_is_refused_unless_forced(box, capsys):
    running = _ref(RUNNING)
    code, (out,), _ = relaunch(capsys, str(running), "--yes")
    assert code == 1 and out["status"] == "refused"
    assert "still RUNNING" in out["reason"] and "checkpoint prefix" in out["reason"]
    assert out["plan"]["phase"] == "RUNNING" and out["plan"]["verdict"] == "affected"
    assert mutations(box) == 0
    code, (out,), _ = relaunch(capsys, str(running), "--yes", "--force")
    assert code == 0 and out["status"] == "relaunched"


# 3. A child execution: its parent's later steps would not re-run.
def test_a_child_is_refused_and_parent_relaunches_the_top_execution_once(box, capsys):
    child, parent = _ref(CHILD), _ref(PIPELINE)
    code, (out,), _ = relaunch(capsys, str(child), "--yes")
    assert code == 1 and out["status"] == "refused" and "child execution" in out["reason"]
    assert out["plan"]["parent"] == {"execution": parent.as_dict(), "node_id": "n0"}
    assert mutations(box) == 0
    # --parent targets the top execution, which is itself still running: refused, said so.
    code, (out,), _ = relaunch(capsys, str(child), "--parent", "--yes")
    assert code == 1 and str(parent) in out["reason"] and "still RUNNING" in out["reason"]
    assert mutations(box) == 0
    code, (out,), _ = relaunch(capsys, str(child), "--parent", "--force", "--yes")
    assert code == 0 and out["status"] == "relaunched"
    assert out["relaunched_as"]["name"] == relaunch_name(parent)
    (request,) = box.admin.calls_of("RelaunchExecution")
    assert request.id.name == parent.name
    code, (out,), _ = relaunch(capsys, str(child), "--parent", "--force", "--yes")
    assert code == 0 and out["status"] == "already-relaunched"
    assert len(box.admin.calls_of("RelaunchExecution")) == 1


# 4. One re-check, the scan's: the whole life of a running execution, every attempt.
def test_show_reads_a_running_executions_signals_up_to_now(box, capsys):
    code, out, _ = run(["show", str(_ref(CHILD)), "-o", "json"], capsys)
    assert code == 0
    tl = json.loads(out)
    assert tl["phase"] == "RUNNING" and tl["verdict"] == "affected"
    (train,) = [a for a in tl["attempts"] if a["node_id"] == "n1"]
    assert train["verdict"] == "affected" and train["signal_at"] == "2026-09-20T09:30:00Z"


def test_an_unreadable_outputs_pb_on_one_node_does_not_mask_an_affected_one(box, capsys):
    two = _ref(TWO_NODES)
    prefix = f"metadata/propeller/{two.project}-{two.domain}-{two.name}/n0/"
    box.s3.faults = S3Faults(access_denied=[S3Rule(bucket="flyte-metadata", prefix=prefix)])
    code, (out,), _ = relaunch(capsys, str(two), "--dry-run")
    assert code == 0 and out["status"] == "dry-run"
    assert out["plan"]["verdict"] == "affected"
    assert mutations(box) == 0


# 5. ALREADY_EXISTS from a concurrency limit is Admin's reason, not a name clash.
def test_a_concurrency_limit_fails_with_admins_message(make_box, capsys, tmp_path):
    def limit(scenario: Scenario) -> None:
        for lp in scenario.launch_plans:
            if (lp.name, lp.version) == ("wf.distill", "v1"):
                lp.concurrency_max = 1  # RUNNING and CHILD are running on it already

    box = make_box(limit)
    code, (out,), _ = relaunch(capsys, str(_ref(FRESH)), "--yes")
    assert code == 3 and out["status"] == "failed"
    message = "concurrency limit (1) reached for launch plan wf.distill; skipping execution"
    assert message in out["reason"] and "NOT_FOUND" not in out["reason"]
    assert box.admin.relaunches_of(_ref(FRESH)) == []
    (line,) = audit(tmp_path)
    assert line["action"] == "failed" and message in line["result"]


# 6. An existing relaunch is found before any refusal.
def test_with_s3_unreachable_a_second_relaunch_reports_the_first(box, capsys):
    code, (first,), _ = relaunch(capsys, str(INCIDENT), "--yes")
    assert code == 0 and first["status"] == "relaunched"
    box.s3.faults = S3Faults(access_denied=[S3Rule()])  # every S3 request: 403
    code, (out,), _ = relaunch(capsys, str(INCIDENT), "--yes")
    assert code == 0 and out["status"] == "already-relaunched"
    assert out["relaunched_as"] == first["relaunched_as"]


# 8. What overwrite_cache costs: sent only when a cacheable node follows the loss; the choices.
def test_the_plan_names_the_cacheable_nodes_overwrite_cache_recomputes(box, capsys):
    fresh = _ref(FRESH)
    code, (out,), _ = relaunch(capsys, str(fresh), "--dry-run")
    # prep (n0) is cacheable but finished before the lost node: reused, not recomputed
    assert code == 0 and out["request"]["overwrite_cache"] is False
    assert out["plan"]["cache"].startswith("no overwrite_cache, because neither the lost node")
    assert "n0 (distill.prep, cache version 1.0)" in out["plan"]["cache"]
    # the same code would run again; the plan names the newer launch plan version to use
    assert out["plan"]["bug"].startswith("YES")
    assert "wf.distill has newer versions (v2): --to-version v2" in out["plan"]["bug"]
    code, (out,), _ = relaunch(capsys, str(fresh), "--dry-run", "--overwrite-cache")
    assert out["request"]["overwrite_cache"] is True
    assert "recomputes 1 cacheable node(s)" in out["plan"]["cache"]
    code, (out,), _ = relaunch(capsys, str(fresh), "--dry-run", "--no-overwrite-cache")
    assert out["request"]["overwrite_cache"] is False
    assert "reuse their cached results: n0 (distill.prep" in out["plan"]["cache"]
    code, (out,), _ = relaunch(capsys, str(fresh), "--overwrite-cache", "--yes")
    assert code == 0 and out["status"] == "relaunched"
    (request,) = box.admin.calls_of("RelaunchExecution")
    assert request.overwrite_cache is True


def test_dry_run_table_prints_the_plan_for_a_running_child(box, capsys):
    code, _out, err = run(["relaunch", str(_ref(CHILD)), "--dry-run", "-o", "table"], capsys)
    assert code == 1 and mutations(box) == 0
    for fragment in (
        "phase: RUNNING",
        f"parent: {_ref(PIPELINE)} node n0",
        "bug: YES - re-runs distill.train version v1",
        "cache: no overwrite_cache, because neither the lost node(s) nor any node after them",
    ):
        assert fragment in err
