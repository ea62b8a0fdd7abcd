"""End to end through the CLI: the second witness as clusters really write it (issue 42;
docs/verdicts.md "Disruption evidence", docs/upstream.md "Kubernetes events"). Every shape comes
from forensics/sandbox/k8s_events.py, each citing its writer."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from support import paths
from support.cli import run
from support.scan import EVENTS_CONFIG, EVENTS_WINDOW, key, sandbox_fixtures

from forensics.sandbox.disruptions import (
    ADMIN_EVICTED,
    AGGREGATED,
    EVENTROUTER,
    EXPORTER_STDOUT,
    KILLING_ONLY,
    NTH_SPOT,
    PRESSURE_WRONG_JOIN,
    RAW_CONTAINER,
    SCALED_DOWN,
    SIDECAR_ONLY,
    SPOT_JOB,
    TAINT_CANCELLED,
    disruption_scenario,
)

pytestmark = pytest.mark.integration

SCHEMA = json.loads(paths.SCHEMA.read_text())
WINDOW = EVENTS_WINDOW

box, env = sandbox_fixtures(disruption_scenario, EVENTS_CONFIG)


def _scan(capsys, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress", *extra], capsys)
    assert "Traceback" not in err
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    return code, report, err


def _config(tmp_path: Path, text: str) -> None:
    (tmp_path / "elastic-audit.toml").write_text(text)


def _findings(report: dict) -> dict:
    return {key(f): f for f in report["findings"]}


def test_no_finding_names_a_pod_level_spot_interruption_karpenter_never_writes(capsys):
    _, report, _ = _scan(capsys)
    reasons = {f["disruption"]["reason"] for f in report["findings"] if f["disruption"]}
    assert "SpotInterrupted" not in reasons
    # Karpenter's real spot shape: the pod's `Evicted` "Evicted pod: <reason>", reason text kept
    d = _findings(report)[(*SPOT_JOB, "n0", 0)]["disruption"]
    assert (d["reason"], d["initiator"]) == ("Evicted", "karpenter")
    assert d["text"] == "Evicted pod: Forceful Termination"
    assert d["pod"] == f"{SPOT_JOB[2]}-n0-0-worker-1"
    # the Node's SpotInterrupted reaches worker-1 through the kubelet's stop of its container on
    # that node: `show` names the real initiator beside the eviction; worker-0's stop after the
    # success (the operator's cleanup) is no disruption
    code, out, err = run(["show", ":".join(SPOT_JOB), "-o", "json"], capsys)
    assert code == 0, err
    events = [e["event"] for e in json.loads(out)["timeline"] if e["source"] == "k8s-events"]
    pod = f"gs1-production/{SPOT_JOB[2]}-n0-0-worker-1"
    assert [e.split(":")[0] for e in events] == [
        f"Evicted by karpenter for pod {pod}",
        f"SpotInterrupted by karpenter for pod {pod}",
    ], events


def test_karpenter_s_evicted_pod_with_its_reason_proves_a_task_from_admin_reasons(capsys):
    f = _findings(_scan(capsys)[1])[(*ADMIN_EVICTED, "n0", 0)]
    assert f["verdict"] == "affected" and f["cause"] == "exit-0-after-signal"
    d = f["disruption"]
    assert (d["source"], d["reason"], d["initiator"]) == ("admin-reasons", "Evicted", "karpenter")
    assert d["text"] == "Evicted pod: Underutilized"


def test_a_node_only_spot_interruption_reaches_the_pod_through_the_kubelet_s_node(capsys):
    # AWS NTH writes SpotInterruption on the Node only; the kubelet's Killing of the task's
    # container on that node names the pod. Shipped by the k8s-monitoring chart's job label.
    code, report, _ = _scan(capsys)
    assert code == 1 and report["complete"] is True
    f = _findings(report)[(*NTH_SPOT, "n0", 0)]
    assert f["verdict"] == "affected"
    d = f["disruption"]
    assert (d["reason"], d["initiator"]) == ("SpotInterruption", "aws-node-termination-handler")
    assert d["at"] == "2026-10-02T14:00:03Z"  # the kubelet's stop of the pod
    assert "on node ip-10-0-8-12.ec2.internal at 2026-10-02T14:00:00Z" in d["text"]


def test_cluster_autoscaler_s_scale_down_of_a_pod_is_a_disruption(capsys):
    f = _findings(_scan(capsys)[1])[(*SCALED_DOWN, "n0", 0)]
    assert f["verdict"] == "affected"
    d = f["disruption"]
    assert (d["reason"], d["initiator"]) == ("ScaleDown", "cluster-autoscaler")
    assert d["text"] == "deleting pod for node scale down"


def test_a_container_stop_a_sidecar_s_stop_or_a_cancelled_eviction_is_no_disruption(capsys):
    _, report, _ = _scan(capsys)
    names = {f["execution"]["name"] for f in report["findings"]}
    for ex in (KILLING_ONLY, SIDECAR_ONLY, TAINT_CANCELLED):
        assert ex[2] not in names, ex


def test_a_kubelet_eviction_of_a_succeeded_single_pod_is_a_wrong_join_not_a_finding(capsys):
    _, report, _ = _scan(capsys)
    names = {f["execution"]["name"] for f in report["findings"]}
    assert PRESSURE_WRONG_JOIN[2] not in names
    assert report["summary"]["cleared"].get("disruption-contradicts-success") == 1


def test_a_task_that_never_writes_outputs_is_no_finding_on_a_disruption_alone(capsys):
    _, report, _ = _scan(capsys)
    names = {f["execution"]["name"] for f in report["findings"]}
    assert RAW_CONTAINER[2] not in names
    assert report["summary"]["cleared"].get("disruption-no-outputs-artefact") == 1


def test_events_tailed_from_a_shipper_s_stdout_are_read_in_their_envelopes(capsys, tmp_path):
    _config(
        tmp_path, EVENTS_CONFIG + "selector = '{container=~\"kube-eventrouter|event-exporter\"}'\n"
    )
    code, report, err = _scan(capsys)
    assert code == 1 and "in no shape an event shipper writes" not in err
    found = _findings(report)
    d = found[(*EVENTROUTER, "n0", 0)]["disruption"]  # eventrouter, CRI envelope
    assert (d["reason"], d["at"]) == ("Preempted", "2026-10-06T14:00:26Z")
    d = found[(*EXPORTER_STDOUT, "n0", 0)]["disruption"]  # event exporter, docker json-file
    assert (d["reason"], d["text"]) == ("Evicted", "Evicted pod: Drifted")
    assert d["at"] == "2026-10-06T16:00:22Z"  # the event's own time, not the line's


def test_an_aggregated_event_stamped_after_the_end_never_clears_as_after_success(capsys):
    _, report, _ = _scan(capsys)
    names = {f["execution"]["name"] for f in report["findings"]}
    assert AGGREGATED[2] not in names  # outputs.pb written
    cleared = report["summary"]["cleared"]
    assert cleared.get("disruption-after-success") == 1  # the drained-after task only
    assert cleared.get("disruption-then-outputs-written") == 1  # the aggregated one


def test_an_events_selector_that_matches_nothing_is_a_gap_naming_it(capsys, tmp_path):
    _config(tmp_path, EVENTS_CONFIG + "selector = '{job=\"kube-events\"}'\n")
    code, report, err = _scan(capsys)
    assert code == 3 and report["complete"] is False
    (gap,) = [g for g in report["gaps"] if g["source"] == "k8s-events"]
    assert gap["kind"] == "logs_absent"
    assert '{job="kube-events"} matches no stream' in gap["error"]
    assert "selector = '{job=\"integrations/kubernetes/eventhandler\"}'" in gap["error"]
    assert "Kubernetes events (Loki) failed" in err


def test_show_with_an_events_selector_that_matches_nothing_is_incomplete(capsys, tmp_path):
    _config(tmp_path, EVENTS_CONFIG + "selector = '{job=\"kube-events\"}'\n")
    code, out, err = run(["show", ":".join(SCALED_DOWN), "-o", "json"], capsys)
    assert code == 3, err
    gaps = json.loads(out)["gaps"]
    assert any("matches no stream" in g["error"] for g in gaps), gaps


def test_an_events_namespace_label_the_streams_lack_is_a_gap_naming_it(capsys, tmp_path):
    # Alloy keeps the event's namespace as a stream label; a wrong name for it attributes no
    # disruption to any pod: incomplete, naming the setting and what the streams carry instead.
    _config(tmp_path, EVENTS_CONFIG + 'namespace_label = "k8s_namespace_name"\n')
    code, report, err = _scan(capsys)
    assert code == 3, err
    assert not report["complete"]
    gap = next(g for g in report["gaps"] if g["source"] == "k8s-events")
    assert "[k8s_events] namespace_label = k8s_namespace_name" in gap["error"]
    assert "namespace" in gap["error"].split("carr", 1)[1]
