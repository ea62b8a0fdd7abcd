"""End to end: upstream shapes a scan could miss quietly or flag falsely (docs/upstream.md,
"Shapes read from Flyte's source"). Each execution is recorded the way flyteadmin and propeller
record it; the upstream file and function are cited beside each.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import grpc
import jsonschema
import pytest
from support import paths
from support.cli import run
from support.scan import CONFIG, WINDOW, key, sandbox_fixtures

from forensics.evidence.flyte_names import generated_name
from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.scenario import SandboxExecution, SandboxNode

pytestmark = pytest.mark.integration

UTC = timezone.utc
HERE = paths.TESTS
NS = "gs1-production"
GS1 = ("gs1", "production")

NEVER = "e1neverrunning000000"
ARCHIVED = "e2archived0000000000"
ARCHIVED_RELAUNCH = "e2archivedrelaunch00"
# Long enough that propeller hashes its pod names (`encoding.FixedLengthUniqueIDForParts`, 50).
ARCHIVED_LONG = "e2archivedwithalongnamethatpropellerhashes000000"
SKEW = "e3clockskew000000000"
NESTED = "e7nestedindynamic000"
SUPER = "e4supersededtrial000"
STAMPED_CRI = "e5shipperstampedcri0"
STAMPED_GLOG = "e5shipperstampedglog"
EXPIRED = "e6lifecycleexpired00"
NESTED_TASK = "sweep.nested_train"
NESTED_NODE = (
    "n0-0-dn0-0-n0"  # GenerateUniqueID(n0-0-dn0, 0, n0): a task in the dynamic's sub-workflow
)


def _t(day: int, hh: int, mm: int = 0, ss: int = 0) -> datetime:
    return datetime(2026, 9, day, hh, mm, ss, tzinfo=UTC)


def _scenario():
    b = ScenarioBuilder()
    train = b.task(*GS1, "bigmodel.train")

    # 1. Pending -> Succeeded between two propeller rounds: flyteadmin records no started_at and
    #    no duration (`transformers/task_execution.go` addTaskTerminalState, "task execution is
    #    missing StartedAt"); no outputs.pb, no signal line survived.
    b.one_node(*GS1, NEVER, "SUCCEEDED", _t(5, 1), _t(5, 1, 1),
               _try(NEVER, 0, "SUCCEEDED", _t(5, 1, 0, 5), _t(5, 1, 0, 40), train,
                    never_running=True))  # fmt: skip

    # 2. Archived executions (flyteadmin ListExecutions adds state = EXECUTION_ACTIVE unless the
    #    filters name `state`, `execution_manager.go` addStateFilter): one silent, one signalled
    #    whose pod name is hashed.
    b.one_node(*GS1, ARCHIVED, "SUCCEEDED", _t(6, 1), _t(6, 1, 1),
               _try(ARCHIVED, 0, "SUCCEEDED", _t(6, 1, 0, 5), _t(6, 1, 0, 40), train),
               archived=True)  # fmt: skip
    # ... relaunched since, and that relaunch archived too: `relaunched_as` must still name it.
    b.add(SandboxExecution(*GS1, ARCHIVED_RELAUNCH, "SUCCEEDED", _t(6, 5), _t(6, 6),
                           mode="RELAUNCH", reference_execution=(*GS1, ARCHIVED), archived=True))  # fmt: skip
    pod = generated_name([ARCHIVED_LONG, "n0", 0])
    assert pod != f"{ARCHIVED_LONG}-n0-0"  # hashed
    sig = _t(6, 2, 0, 30)
    b.one_node(*GS1, ARCHIVED_LONG, "SUCCEEDED", _t(6, 2), _t(6, 2, 1),
               _try(ARCHIVED_LONG, 0, "SUCCEEDED", _t(6, 2, 0, 5), sig + timedelta(seconds=3),
                    train, pods=[pod]),
               archived=True)  # fmt: skip
    b.signal_pod(sig, NS, pod, pod)

    # 3. Two clocks: the attempt's end is the pod's node time (flyteplugins `k8s/pod/plugin.go`),
    #    the execution's updated_at propeller's (`transformers/execution.go`). The node runs 4s
    #    ahead: the end lies 2s inside the window, updated_at 2s before it.
    b.one_node(*GS1, SKEW, "SUCCEEDED", _t(3, 20), _t(3, 23, 59, 58),
               _try(SKEW, 0, "SUCCEEDED", _t(3, 21), _t(4, 0, 0, 2), train))  # fmt: skip

    # 7. An unregistered elastic task inside a sub-workflow of a @dynamic (pyflyte run --remote
    #    registers only static dependencies): its template is in the dynamic's compiled workflow
    #    (flyteadmin `node_execution_manager.go` GetNodeExecutionData `dynamic_workflow`).
    plan = b.task(*GS1, "sweep.plan", version=0)
    nested = b.task(*GS1, NESTED_TASK)
    b.add(SandboxExecution(*GS1, NESTED, "SUCCEEDED", _t(7, 1), _t(7, 3), nodes=[
        SandboxNode("n0", "SUCCEEDED", is_parent=True, is_dynamic=True, attempts=[
            _try(NESTED, 0, "SUCCEEDED", _t(7, 1, 0, 5), _t(7, 1, 0, 30), plan, write_outputs=True),
        ]),
        SandboxNode("n0-0-dn0", "SUCCEEDED", spec_node_id="dn0", parent_unique_id="n0",
                    is_parent=True),
        SandboxNode(NESTED_NODE, "SUCCEEDED", spec_node_id="n0", parent_unique_id="n0-0-dn0",
                    attempts=[_try(NESTED, 0, "SUCCEEDED", _t(7, 1, 1), _t(7, 2), nested,
                                   node=NESTED_NODE)]),
    ]))  # fmt: skip

    # 4. A retried @dynamic parent: its trial dn0 under attempt 0 succeeded silently, the parent
    #    failed for another reason and was retried, and propeller re-ran dn0 under attempt 1
    #    (`nodes/common/utils.go` GenerateUniqueID: n0-1-dn0), which wrote its outputs.
    b.add(SandboxExecution(*GS1, SUPER, "SUCCEEDED", _t(8, 1), _t(8, 4), nodes=[
        SandboxNode("n0", "SUCCEEDED", is_parent=True, is_dynamic=True, attempts=[
            _try(SUPER, 0, "RETRYABLE_FAILED", _t(8, 1, 0, 5), _t(8, 2, 30), plan),
            _try(SUPER, 1, "SUCCEEDED", _t(8, 2, 31), _t(8, 3, 50), plan, write_outputs=True),
        ]),
        SandboxNode("n0-0-dn0", "SUCCEEDED", spec_node_id="dn0", parent_unique_id="n0",
                    attempts=[_try(SUPER, 0, "SUCCEEDED", _t(8, 1, 1), _t(8, 2), train,
                                   node="n0-0-dn0")]),
        SandboxNode("n0-1-dn0", "SUCCEEDED", spec_node_id="dn0", parent_unique_id="n0",
                    attempts=[_try(SUPER, 0, "SUCCEEDED", _t(8, 2, 32), _t(8, 3, 40), train,
                                   node="n0-1-dn0", write_outputs=True)]),
    ]))  # fmt: skip

    # 5. Shipper-stamped times: Loki holds the time the shipper read each line, 8s late; the
    #    line's own time is in its CRI prefix (containerd) or torch's glog prefix. The pod exits
    #    0.7s after its signal; an emergency checkpoint is written 0.8s after the signal.
    for name, wrap in ((STAMPED_CRI, "cri"), (STAMPED_GLOG, "raw")):
        sig = _t(9, 3, 0, 0).replace(microsecond=200_000)
        b.one_node(*GS1, name, "SUCCEEDED", _t(9, 2), _t(9, 3, 1),
                   _try(name, 0, "SUCCEEDED", _t(9, 2, 0, 5), sig + timedelta(milliseconds=700),
                        train),
                   inputs={"checkpoint_dir": f"s3://exa-models/{name}/"})  # fmt: skip
        b.signal_pod(sig, NS, f"{name}-n0-0", f"{name}-n0-0", wrap=wrap,
                     stamp_lag=timedelta(seconds=8))  # fmt: skip
        b.checkpoint_objects(f"s3://exa-models/{name}/", [sig + timedelta(milliseconds=800)])

    # 6. A healthy run whose node folder a bucket lifecycle rule expired: outputs.pb and the
    #    node's inputs.pb (propeller writes it before the node runs, `nodes/executor.go`
    #    preExecute) are both gone.
    b.add(SandboxExecution(*GS1, EXPIRED, "SUCCEEDED", _t(10, 1), _t(10, 2), nodes=[
        SandboxNode("n0", "SUCCEEDED", expired=True, attempts=[
            _try(EXPIRED, 0, "SUCCEEDED", _t(10, 1, 0, 5), _t(10, 1, 50), train,
                 write_outputs=True)]),
    ]))  # fmt: skip
    b.routine_logs(_t(3, 0), _t(11, 0))  # Loki holds the namespace's logs: no logs_absent gap
    return b.build()


box, _env = sandbox_fixtures(_scenario)


@pytest.fixture(autouse=True)
def _unregistered(box):
    box.admin.faults.unregistered_tasks = {(*GS1, NESTED_TASK, "v1")}
    yield
    box.admin.faults.unregistered_tasks = set()


def _scan(capsys, *window: str) -> dict:
    code, out, err = run(["scan", *(window or WINDOW), "-o", "json", "--no-progress"], capsys)
    assert out, err
    rep = json.loads(out)
    assert code == (1 if rep["findings"] else 0)
    assert rep["complete"] and rep["gaps"] == [], rep["gaps"]
    jsonschema.validate(rep, json.loads((HERE / "report.schema.json").read_text()))
    return rep


def _findings(rep: dict) -> dict[tuple, dict]:
    return {key(f): f for f in rep["findings"]}


def test_an_attempt_never_seen_running_has_an_end_and_is_judged(capsys):
    # flyteadmin `transformers/task_execution.go`: no StartedAt/Duration without a RUNNING event;
    # the end falls back on the closure's updated_at (the terminal event's reported_at).
    f = _findings(_scan(capsys))[(*GS1, NEVER, "n0", 0)]
    assert f["verdict"] == "suspected" and f["outputs_written"] is False
    assert f["succeeded_at"] == "2026-09-05T01:00:40Z"
    assert any("never saw it RUNNING" in n and "updated_at" in n for n in f["notes"])


def test_archived_executions_are_swept_like_active_ones(capsys):
    # flyteadmin `execution_manager.go` addStateFilter: the sweep filters on state itself.
    found = _findings(_scan(capsys))
    assert found[(*GS1, ARCHIVED, "n0", 0)]["verdict"] == "suspected"
    assert found[(*GS1, ARCHIVED, "n0", 0)]["relaunched_as"]["name"] == ARCHIVED_RELAUNCH
    hashed = found[(*GS1, ARCHIVED_LONG, "n0", 0)]
    assert hashed["verdict"] == "affected"
    assert hashed["signal"]["pod"] == generated_name([ARCHIVED_LONG, "n0", 0])


def test_skewed_clocks_at_a_window_boundary_are_listed_once(capsys):
    # The attempt's end (node clock) is inside [09-04, 09-11), its execution's updated_at
    # (propeller's) before it: listed through the clock-skew margin, judged by its own end.
    inside = _findings(_scan(capsys))
    assert inside[(*GS1, SKEW, "n0", 0)]["verdict"] == "suspected"
    before = _findings(_scan(capsys, "--since", "2026-09-03", "--until", "2026-09-04"))
    assert (*GS1, SKEW, "n0", 0) not in before  # adjacent windows: reported exactly once


def test_no_margin_misses_the_skewed_attempt(capsys):
    # `[flyte] clock_skew = "0s"` lists by Admin's times alone: the boundary case is missed,
    # which is why the default tolerates five minutes (docs/configuration.md).
    Path("elastic-audit.toml").write_text(
        CONFIG.replace("[flyte]\n", '[flyte]\nclock_skew = "0s"\n')
    )
    assert (*GS1, SKEW, "n0", 0) not in _findings(_scan(capsys))


def test_unregistered_task_in_a_dynamics_subworkflow_is_known_elastic(box, capsys):
    # The template is looked up in the nearest dynamic ancestor's compiled workflow, through the
    # sub-workflow node in between (flyteadmin GetNodeExecutionData answers it only for n0).
    before = box.admin.call_counts()
    f = _findings(_scan(capsys))[(*GS1, NESTED, NESTED_NODE, 0)]
    assert f["verdict"] == "suspected" and f["outputs_written"] is False
    calls = box.admin.call_counts() - before
    assert calls["GetNodeExecutionData"] >= 1


def test_a_superseded_trial_is_cleared_and_names_its_rerun(capsys):
    # flytepropeller `nodes/common/utils.go` GenerateUniqueID: the retried parent re-ran dn0 as
    # n0-1-dn0, which wrote its outputs; the first trial is no finding.
    rep = _scan(capsys)
    assert not any(k[2] == SUPER for k in _findings(rep))
    assert rep["summary"]["cleared"]["superseded-by-rerun"] == 1
    assert rep["superseded"] == [
        {
            "execution": {"project": "gs1", "domain": "production", "name": SUPER},
            "node_id": "n0-0-dn0",
            "attempt": 0,
            "rerun": {"node_id": "n0-1-dn0", "attempt": 0},
        }
    ]


def test_show_and_relaunch_treat_a_superseded_trial_as_cleared(box, capsys, tmp_path, monkeypatch):
    code, out, _ = run(["show", f"gs1:production:{SUPER}", "-o", "json"], capsys)
    shown = {(a["node_id"], a["attempt"]): a for a in json.loads(out)["attempts"]}
    assert shown[("n0-0-dn0", 0)]["verdict"] == "not-affected"
    assert shown[("n0-0-dn0", 0)]["reason"] == (
        f"superseded-by-rerun: re-run as gs1:production:{SUPER}/n0-1-dn0/0"
    )
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code, out, _ = run(["relaunch", f"gs1:production:{SUPER}", "--yes", "-o", "json"], capsys)
    assert code == 1 and json.loads(out)[0]["status"] == "refused"
    assert box.admin.call_counts()["RelaunchExecution"] == 0


@pytest.mark.parametrize(("name", "source"), [(STAMPED_CRI, "cri"), (STAMPED_GLOG, "glog")])
def test_the_lines_own_time_is_used_not_the_shippers_stamp(capsys, name, source):
    # Loki keeps the shipper's push time; the CRI prefix (`<RFC3339Nano> stderr F`) and torch's
    # glog prefix keep the line's own. Graded on it: before the (whole-second) end, so affected.
    f = _findings(_scan(capsys))[(*GS1, name, "n0", 0)]
    assert f["verdict"] == "affected"
    assert f["signal"]["at"] == "2026-09-09T03:00:00.200000Z"
    assert f["signal"]["at_source"] == source
    assert not any("after the attempt's end" in n for n in f["notes"])
    assert f["checkpoint"]["written_after_signal"] is True


def test_expired_outputs_are_no_finding_and_never_missing(box, capsys):
    # The witness: `<node data dir>/inputs.pb`, written by propeller before the node runs
    # (flytepropeller `nodes/executor.go` preExecute). Gone with outputs.pb: expired, not
    # "never written"; present (every other attempt here): outputs.pb is truly missing.
    box.s3.requests.clear()
    rep = _scan(capsys)
    assert not any(k[2] == EXPIRED for k in _findings(rep))
    assert rep["summary"]["cleared"]["outputs-expired"] == 1
    assert _findings(rep)[(*GS1, NEVER, "n0", 0)]["outputs_written"] is False
    # The sweep's checks are answered by the bucket's listing pages, the witness with them
    # (`callplan.walk`): no HEAD of either. What a HEAD each answers is tested by denying the
    # listing (tests/scan/test_scan_shapes.py).
    heads = [r.path for r in box.s3.requests if r.method == "HEAD" and EXPIRED in r.path]
    assert heads == []
    assert any(r.is_listing and "flyte-metadata" in r.path for r in box.s3.requests)


def test_show_of_an_expired_run_is_complete_and_says_why(box, capsys):
    code, out, _ = run(["show", f"gs1:production:{EXPIRED}", "-o", "json"], capsys)
    shown = json.loads(out)
    (attempt,) = shown["attempts"]
    assert code == 0 and shown["gaps"] == []
    assert attempt["verdict"] == "not-affected" and attempt["outputs"] == "unknown"
    assert attempt["reason"].startswith("outputs-expired: outputs.pb is absent and so is")
    assert attempt["reason"].endswith("no lifecycle rule of the bucket expires it: it was deleted")
    # With the bucket's lifecycle rule (GetBucketLifecycleConfiguration), the reason names it.
    s3 = boto3.client(
        "s3",
        endpoint_url=box.s3.url,
        region_name="us-east-1",
        aws_access_key_id="sandbox",
        aws_secret_access_key="sandbox",
    )
    rule = {"ID": "expire-metadata", "Status": "Enabled", "Filter": {"Prefix": "metadata/"}}
    s3.put_bucket_lifecycle_configuration(
        Bucket="flyte-metadata",
        LifecycleConfiguration={"Rules": [{**rule, "Expiration": {"Days": 30}}]},
    )
    try:
        _code, out, _ = run(["show", f"gs1:production:{EXPIRED}", "-o", "json"], capsys)
    finally:
        s3.delete_bucket_lifecycle(Bucket="flyte-metadata")
    (attempt,) = json.loads(out)["attempts"]
    assert attempt["reason"].endswith(
        "the bucket's lifecycle rule 'expire-metadata' (after 30 days under 'metadata/') expires it"
    )


def test_a_hashed_pod_of_an_archived_execution_resolves(box, capsys):
    # The sweep's listing of 09-06 fails (a gap); the signalled pod, whose name is hashed, is then
    # resolved through the executions live at its signal (`resolve._among_live`), which must ask
    # for archived ones too (flyteadmin `execution_manager.go` addStateFilter).
    Path("elastic-audit.toml").write_text(CONFIG.replace("[flyte]\n", "[flyte]\nretries = 0\n"))
    box.admin.faults.failing_filters["execution_created_at,2026-09-07"] = (
        grpc.StatusCode.UNAVAILABLE
    )
    try:
        code, out, err = run(
            [
                "scan",
                "--since",
                "2026-09-06",
                "--until",
                "2026-09-07",
                "-o",
                "json",
                "--no-progress",
            ],
            capsys,
        )
    finally:
        box.admin.faults.failing_filters.clear()
    rep = json.loads(out)
    assert code == 3 and not rep["complete"], err  # the failed listing is a gap
    assert rep["unresolved"] == []
    assert _findings(rep)[(*GS1, ARCHIVED_LONG, "n0", 0)]["verdict"] == "affected"


def test_relaunch_sees_an_archived_relaunch_and_does_not_relaunch_again(
    box, capsys, tmp_path, monkeypatch
):
    # Exactly once (docs/commands.md, relaunch): a relaunch the operator archived since still
    # exists, so it is found (the look-up filters on state, as flyteadmin requires).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    before = box.admin.call_counts()["RelaunchExecution"]
    code, out, _ = run(["relaunch", f"gs1:production:{ARCHIVED}", "--yes", "-o", "json"], capsys)
    (outcome,) = json.loads(out)
    assert code == 0 and outcome["status"] == "already-relaunched", outcome
    assert ARCHIVED_RELAUNCH in outcome["reason"]
    assert box.admin.call_counts()["RelaunchExecution"] == before
