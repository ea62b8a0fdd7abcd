"""Detection in the wild, `pending` included: shapes the reference incident does not
have, each scanned end to end through the CLI over a sandbox that records them as upstream does.

- whole-second ends: a single-pod attempt's end is the container's FinishedAt in whole seconds;
- the training operator's order: any worker succeeded → job Succeeded → siblings deleted, whose
  signals come after the success; propeller stamps a PyTorchJob's end itself;
- executions created before the window and still RUNNING (flyteadmin's `updated_at` stays at the
  RUNNING event while nodes end in the window), with plain and hashed pod names;
- signalled attempts not finished yet (`pending`).

Domains from Admin and unresolved Flyte pods: tests/scan/test_scan_domains.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import jsonschema
import pytest
from support import paths
from support.cli import run
from support.scan import WINDOW, sandbox_fixtures, scan_json

from forensics.evidence.flyte_names import generated_name
from forensics.model import UTC
from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.scenario import SandboxExecution, SandboxNode

pytestmark = pytest.mark.integration

SCHEMA = json.loads(paths.SCHEMA.read_text())
NS = "gs1-production"
GS1 = ("gs1", "production")
WHOLE = "a1wholesecond0000000"  # signal 0.4 s after Admin's whole-second end
LOST = "b2lostworker00000000"  # PyTorchJob: the preempted worker's logs were lost
ORDER = "c3operatororder00000"  # PyTorchJob: preempted worker before the end, sibling after
LATE_OK = "d4lateoutputs0000000"  # a signal after a success that wrote outputs.pb
OLD_PLAIN = "e5oldrunning00000000"  # created before the window, still RUNNING, no signal
OLD_HASHED = "old-running-nightly-sweep-distill-bigmodel-c42-nem1b-a2"  # same, hashed pod
PENDING = "f6pending00000000000"  # signalled, still RUNNING (project `inflight`)


def _t(day: int, hh: int, mm: int, ss: int, us: int = 0) -> datetime:
    return datetime(2026, 9, day, hh, mm, ss, us, tzinfo=UTC)


# The scenario reads as a table: one execution per block.
# fmt: off
def _scenario():
    b = ScenarioBuilder()
    task = b.task(*GS1, "bigmodel.train")
    pt = b.task(*GS1, "bigmodel.train_multinode", task_type="pytorch")
    evaluate = b.task(*GS1, "bigmodel.evaluate", version=0)

    # Single pod: the agent's signal at .400, the container exits at .900 of the same second;
    # Admin's end is the FinishedAt, 10:00:00 (the sandbox truncates as Kubernetes does).
    b.one_node(*GS1, WHOLE, "SUCCEEDED", _t(5, 9, 0, 0), _t(5, 10, 0, 3),
               _try(WHOLE, 0, "SUCCEEDED", _t(5, 9, 0, 5), _t(5, 10, 0, 0, 900_000), task))
    b.signal_pod(_t(5, 10, 0, 0, 400_000), NS, f"{WHOLE}-n0-0", f"{WHOLE}-n0-0")

    # PyTorchJobs in the operator's order; in LOST only the sibling's late signal survives.
    for name, day, lost in ((LOST, 6, True), (ORDER, 7, False)):
        workers = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
        end = b.operator_success(_t(day, 10, 0, 0), NS, workers, preempted=1, lost=lost)
        b.one_node(*GS1, name, "SUCCEEDED", _t(day, 8, 0, 0), end + timedelta(seconds=2),
                   _try(name, 0, "SUCCEEDED", _t(day, 8, 0, 5), end, pt, pods=workers))

    # A signal after a success whose outputs.pb exists: the one case signal-after-success clears.
    b.one_node(*GS1, LATE_OK, "SUCCEEDED", _t(8, 9, 0, 0), _t(8, 10, 0, 5),
               _try(LATE_OK, 0, "SUCCEEDED", _t(8, 9, 0, 5), _t(8, 10, 0, 0), task,
                    write_outputs=True))
    b.signal_pod(_t(8, 10, 0, 3), NS, f"{LATE_OK}-n0-0", f"{LATE_OK}-n0-0", plugin_lines=False)

    # Long workflows created before the window, still RUNNING their evaluation step: the
    # training node ended SUCCEEDED in the window without outputs.pb.
    hashed = generated_name([OLD_HASHED, "n0", 0])
    for name, pod, signalled in ((OLD_PLAIN, f"{OLD_PLAIN}-n0-0", False), (OLD_HASHED, hashed, True)):
        b.add(SandboxExecution(*GS1, name, "RUNNING", _t(1, 6, 0, 0), _t(1, 6, 0, 1), nodes=[
            SandboxNode("n0", "SUCCEEDED", attempts=[
                _try(name, 0, "SUCCEEDED", _t(1, 6, 1, 0), _t(9, 4, 0, 0), task, pods=[pod])]),
            SandboxNode("n1", "RUNNING", attempts=[
                _try(name, 0, "RUNNING", _t(9, 4, 0, 30), None, evaluate, node="n1")]),
        ]))
        if signalled:
            b.signal_pod(_t(9, 3, 59, 50), NS, pod, pod)

    # A signalled attempt still running, alone in its project.
    inflight = ("inflight", "production")
    b.one_node(*inflight, PENDING, "RUNNING", _t(10, 1, 0, 0), _t(10, 1, 0, 1),
               _try(PENDING, 0, "RUNNING", _t(10, 1, 0, 5), None, b.task(*inflight, "train")))
    b.signal_pod(_t(10, 2, 0, 0), "inflight-production", f"{PENDING}-n0-0", f"{PENDING}-n0-0")
    return b.build()
# fmt: on


box, env = sandbox_fixtures(_scenario)


def by_name(report: dict) -> dict[str, dict]:
    return {f["execution"]["name"]: f for f in report["findings"]}


def test_a_signal_within_the_second_of_a_whole_second_end_is_affected(env, capsys):
    code, report, _ = scan_json(capsys, "--project", "gs1")
    f = by_name(report)[WHOLE]
    assert f["verdict"] == "affected"
    assert f["signal"]["at"] == "2026-09-05T10:00:00.400000Z"
    assert f["succeeded_at"] == "2026-09-05T10:00:00Z"  # FinishedAt, whole seconds
    jsonschema.validate(report, SCHEMA)
    assert code == 1 and report["complete"]


def test_a_pytorchjob_whose_preempted_worker_logs_were_lost_is_suspected_with_the_late_signal(
    env, capsys
):
    _, report, _ = scan_json(capsys, "--project", "gs1")
    f = by_name(report)[LOST]
    assert f["verdict"] == "suspected" and f["signal"] is None
    assert any(
        f"{LOST}-n0-0-worker-0" in n and "after the attempt's end" in n for n in f["notes"]
    ), f["notes"]
    assert "signal-after-success" not in report["summary"]["cleared"] or (
        report["summary"]["cleared"]["signal-after-success"] == 1  # LATE_OK only
    )


def test_operator_order_reports_the_preempted_worker_and_clears_only_a_written_success(env, capsys):
    _, report, _ = scan_json(capsys, "--project", "gs1")
    f = by_name(report)[ORDER]
    assert f["verdict"] == "affected" and f["signal"]["pod"] == f"{ORDER}-n0-0-worker-1"
    assert LATE_OK not in by_name(report)
    assert report["summary"]["cleared"].get("signal-after-success") == 1


def test_executions_created_before_the_window_and_still_running_are_swept(env, capsys):
    _, report, _ = scan_json(capsys, "--project", "gs1")
    found = by_name(report)
    # No signal (logs lost): only the sweep can find it.
    assert found[OLD_PLAIN]["verdict"] == "suspected" and found[OLD_PLAIN]["node_id"] == "n0"
    # Hashed pod name: the signal is joined to the swept execution's attempt.
    assert found[OLD_HASHED]["verdict"] == "affected"
    assert found[OLD_HASHED]["signal"]["pod"] == generated_name([OLD_HASHED, "n0", 0])
    assert found[OLD_HASHED]["execution_phase"] == "RUNNING"


def test_a_signalled_attempt_not_finished_yet_is_pending_and_not_nothing_found(env, capsys):
    code, report, _ = scan_json(capsys, "--project", "inflight")
    assert report["findings"] == []
    assert report["pending"] == [
        {
            "execution": {"project": "inflight", "domain": "production", "name": PENDING},
            "node_id": "n0",
            "attempt": 0,
            "phase": "RUNNING",
            "signal": {
                "name": "SIGTERM",
                "number": 15,
                "at": "2026-09-10T02:00:00Z",
                "at_source": "glog",
                "namespace": "inflight-production",
                "pod": f"{PENDING}-n0-0",
            },
        }
    ]
    assert report["summary"]["pending"] == 1
    assert "signal-attempt-not-finished" not in report["summary"]["cleared"]
    jsonschema.validate(report, SCHEMA)
    assert code == 1  # not 0 "nothing found": rescan once it ends
    code, out, _ = run(
        ["scan", *WINDOW, "--no-progress", "-o", "table", "--project", "inflight"], capsys
    )
    assert code == 1 and "1 pending" in out and f"PENDING inflight:production:{PENDING}/n0/0" in out


def test_a_hashed_pod_no_sweep_claimed_is_resolved_among_old_running_executions(env):
    # The look-up behind pods no swept execution claimed (e.g. its listing failed): the real
    # Admin client over the sandbox finds the hashed pod's execution although its updated_at
    # predates the signal by days.
    from forensics.config import load_settings
    from forensics.scan.lookups import Lookups
    from forensics.scan.resolve import Projects, resolve
    from forensics.scan.scope import ScanScope
    from forensics.sources import Sources

    settings = load_settings()
    sources = Sources.from_settings(settings)
    pod = generated_name([OLD_HASHED, "n0", 0])
    found = resolve(Lookups(sources), Projects(settings), NS, pod, _t(9, 3, 59, 50), ScanScope())
    assert not isinstance(found, str), found
    ex, att = found
    assert (ex.ref.name, att.ref.node_id, ex.phase) == (OLD_HASHED, "n0", "RUNNING")
