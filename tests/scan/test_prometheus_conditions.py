"""End to end through the CLI: kube-state-metrics' `kube_pod_status_disruption_reason` as Prometheus
really stores it (docs/upstream.md, "Kubernetes events and disruption conditions"): `Other` and a
reset condition are no evidence, a short condition between two steps is still seen, a scrape
without `honor_labels` is read and named, a series naming no pod is a gap. The sandbox's
Prometheus (forensics/sandbox/prometheus_server.py) scrapes and evaluates as the real one does;
tests/scan/test_prometheus_real.py runs the staleness and relabelling cases against a real one."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from support.cli import run
from support.scan import CONFIG, key, sandbox_fixtures

from forensics.model import UTC
from forensics.sandbox.disruptions import (
    DISRUPTION_CONDITIONS,
    DISRUPTION_WINDOW,
    PROM_ONLY,
    disruption_scenario,
)
from forensics.sandbox.prometheus_server import PrometheusServer, SandboxCondition

pytestmark = pytest.mark.integration

WINDOW = ["--since", "2026-10-01", "--until", "2026-10-08"]
POD = f"{PROM_ONLY[2]}-n0-0"  # a plain task, SUCCEEDED at 2026-10-07T02:02:10Z, no outputs.pb
ATTEMPT = (*PROM_ONLY, "n0", 0)
NS = "gs1-production"

box, env = sandbox_fixtures(disruption_scenario, CONFIG)
assert DISRUPTION_WINDOW[0] == datetime(2026, 10, 1, tzinfo=UTC)


def _t(hh: int, mm: int, ss: int) -> datetime:
    return datetime(2026, 10, 7, hh, mm, ss, tzinfo=UTC)


def _scan(capsys, tmp_path, server: PrometheusServer, *extra: str) -> tuple[int, dict, str]:
    with server as url:
        (tmp_path / "elastic-audit.toml").write_text(CONFIG + f'[prometheus]\nurl = "{url}"\n')
        code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress", *extra], capsys)
    assert "Traceback" not in err
    return code, json.loads(out), err


def _findings(report: dict) -> dict:
    return {key(f): f for f in report["findings"]}


def test_reason_other_alone_is_never_evidence(capsys, tmp_path):
    # A DisruptionTarget condition whose reason kube-state-metrics does not know, or one the
    # disruption controller reset to False with no reason: both read reason="Other".
    cond = SandboxCondition(NS, POD, "", _t(2, 0, 0), _t(2, 2, 11))
    code, report, err = _scan(capsys, tmp_path, PrometheusServer([cond]), "-v")
    assert code == 1 and report["complete"] is True, report["gaps"]  # Admin's reasons' finding
    assert ATTEMPT not in _findings(report)
    assert "1 pod(s) whose condition reads only reason=Other" in err


def test_a_condition_reset_to_false_is_no_disruption(capsys, tmp_path):
    # Preemption began, the pod was never deleted: 2 minutes later the disruption controller reset
    # the condition to False (reason "Other"); the task ran on and succeeded.
    cond = SandboxCondition(
        NS, POD, "PreemptionByScheduler", _t(1, 30, 0), _t(2, 2, 11), stale=True
    )
    code, report, err = _scan(capsys, tmp_path, PrometheusServer([cond]), "-v")
    assert code == 1 and report["complete"] is True, report["gaps"]  # Admin's reasons' finding
    assert ATTEMPT not in _findings(report)
    assert "1 condition(s) reset to False by the disruption controller" in err


def test_a_reset_condition_set_again_later_counts_from_then(capsys, tmp_path):
    stale = SandboxCondition(NS, POD, "PreemptionByScheduler", _t(1, 20, 0), _t(1, 40, 0), True)
    again = SandboxCondition(NS, POD, "PreemptionByScheduler", _t(2, 0, 0), _t(2, 2, 11))
    _, report, _ = _scan(capsys, tmp_path, PrometheusServer([stale, again]))
    d = _findings(report)[ATTEMPT]["disruption"]
    assert (d["reason"], d["at"]) == ("PreemptionByScheduler", "2026-10-07T02:01:00Z")


def test_a_condition_shorter_than_a_step_is_seen_despite_its_stale_marker(capsys, tmp_path):
    # Set at 02:02:00, the pod gone at 02:02:12: scraped once (02:02:07), stale at 02:02:37. An
    # instant selector at the 02:03:00 step reads the stale marker: nothing.
    cond = SandboxCondition(NS, POD, "EvictionByEvictionAPI", _t(2, 2, 0), _t(2, 2, 12))
    code, report, _ = _scan(capsys, tmp_path, PrometheusServer([cond]))
    assert code == 1 and report["complete"] is True
    f = _findings(report)[ATTEMPT]
    d = f["disruption"]
    assert (d["source"], d["reason"]) == ("prometheus", "EvictionByEvictionAPI")
    # the first step whose minute holds the scrape: after the end, so only `suspected`
    assert d["at"] == "2026-10-07T02:03:00Z" and f["verdict"] == "suspected"


def test_a_scrape_without_honor_labels_is_read_from_the_exported_labels_and_named(capsys, tmp_path):
    server = PrometheusServer(list(DISRUPTION_CONDITIONS), honor_labels=False)
    code, report, err = _scan(capsys, tmp_path, server)
    assert code == 1 and report["complete"] is True
    d = _findings(report)[ATTEMPT]["disruption"]
    assert (d["namespace"], d["pod"], d["reason"]) == (NS, POD, "PreemptionByScheduler")
    (line,) = [ln for ln in err.splitlines() if "honor_labels" in ln]
    assert "exported_namespace/exported_pod" in line and "kube_pod_status_disruption_reason" in line


def test_series_that_name_no_pod_are_a_gap_never_an_empty_read(capsys, tmp_path):
    # A relabelling that dropped the pod's labels: the condition is there, no pod to join it to.
    nameless = {"metric": {"reason": "PreemptionByScheduler", "job": "kube-state-metrics"}}
    start = (DISRUPTION_WINDOW[0] - timedelta(hours=1)).timestamp()
    server = PrometheusServer(
        answer={
            "status": "success",
            "data": {"resultType": "matrix", "result": [{**nameless, "values": [[start, "1"]]}]},
        }
    )
    code, report, _ = _scan(capsys, tmp_path, server)
    assert code == 3 and report["complete"] is False
    gaps = [g for g in report["gaps"] if g["source"] == "prometheus"]
    assert gaps and len(gaps) == len(report["gaps"])  # one per shard: each answer names no pod
    for gap in gaps:
        assert "1 series of kube_pod_status_disruption_reason name no pod" in gap["error"]
        assert 'reason="PreemptionByScheduler"' in gap["error"]


def test_a_prometheus_where_no_target_exposes_the_metric_is_named_never_silent(capsys, tmp_path):
    # kube-state-metrics older than v2.20.0: no series, and no HELP/TYPE for the family either
    code, report, err = _scan(capsys, tmp_path, PrometheusServer([], exposes_family=False))
    assert code == 1 and report["complete"] is True  # the window's other witnesses still hold
    (line,) = [ln for ln in err.splitlines() if "no scrape target exposes" in ln]
    assert "kube_pod_status_disruption_reason" in line and "v2.20.0" in line
    # one that exposes it, with no condition in the window, is quiet
    _, _, err = _scan(capsys, tmp_path, PrometheusServer([]))
    assert "no scrape target exposes" not in err
