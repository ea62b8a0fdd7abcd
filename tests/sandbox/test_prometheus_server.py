"""The sandbox's Prometheus API (forensics/sandbox/prometheus_server.py) stores and evaluates
kube-state-metrics' `kube_pod_status_disruption_reason` as the real ones do (docs/upstream.md,
"Kubernetes events and disruption conditions"; tests/scan/test_prometheus_real.py checks the same
staleness against Debian's Prometheus)."""

from __future__ import annotations

from datetime import datetime

import pytest
import requests

from forensics.model import UTC
from forensics.sandbox.prometheus_server import METRIC, PrometheusServer, SandboxCondition

pytestmark = pytest.mark.integration

T0 = datetime(2026, 10, 7, 2, 0, 0, tzinfo=UTC)
BY = "max by (namespace, pod, uid, exported_namespace, exported_pod, reason) ({})"


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0.timestamp() + seconds, tz=UTC)


def _range(url: str, query: str, step: int = 60, span: int = 900) -> list[dict]:
    params = {"query": query, "start": T0.timestamp(), "end": T0.timestamp() + span, "step": step}
    r = requests.get(f"{url}/api/v1/query_range", params=params, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["data"]["result"]


def test_a_condition_between_two_steps_is_stale_for_an_instant_selector_not_for_a_range():
    # set 02:02:00, pod gone 02:02:12: one scrape (02:02:07), the stale marker at 02:02:37
    cond = SandboxCondition("ns", "p", "EvictionByEvictionAPI", _at(120), _at(132), uid="u1")
    with PrometheusServer([cond]) as url:
        assert _range(url, BY.format(METRIC)) == []
        (series,) = _range(url, BY.format(f"max_over_time({METRIC}[60s])"))
    assert series["metric"] == {
        "namespace": "ns",
        "pod": "p",
        "uid": "u1",
        "reason": "EvictionByEvictionAPI",
    }  # no status label: kube-state-metrics exports the condition whatever its status
    assert series["values"] == [[T0.timestamp() + 180, "1"]]


def test_a_reset_condition_reads_other_and_an_unknown_reason_too():
    stale = SandboxCondition("ns", "p", "PreemptionByScheduler", _at(0), _at(600), stale=True)
    future = SandboxCondition("ns", "q", "SomeFutureReason", _at(0), _at(120))
    with PrometheusServer([stale, future]) as url:
        result = _range(url, BY.format(f"max_over_time({METRIC}[60s])"))
    seen = {(s["metric"]["pod"], s["metric"]["reason"]): s["values"] for s in result}
    assert set(seen) == {("p", "PreemptionByScheduler"), ("p", "Other"), ("q", "Other")}
    # reset two minutes after it was set (the disruption controller's stalePodDisruptionTimeout):
    # the last scrape of the reason at 02:01:37, the first of `Other` at 02:02:07
    assert seen[("p", "PreemptionByScheduler")][-1][0] == T0.timestamp() + 120
    assert seen[("p", "Other")][0][0] == T0.timestamp() + 180


def test_a_scrape_without_honor_labels_renames_the_pod_labels():
    cond = SandboxCondition("ns", "p", "DeletionByPodGC", _at(0), _at(300))
    with PrometheusServer([cond], honor_labels=False) as url:
        (series,) = _range(url, BY.format(METRIC))
        (raw,) = _range(url, METRIC)
    assert series["metric"]["exported_namespace"] == "ns"
    assert series["metric"]["exported_pod"] == "p"
    assert series["metric"]["namespace"] == "monitoring"
    assert raw["metric"]["job"] == "kube-state-metrics" and raw["metric"]["__name__"] == METRIC


def test_a_query_the_sandbox_cannot_read_is_a_400():
    with PrometheusServer([]) as url:
        r = requests.get(
            f"{url}/api/v1/query_range",
            params={"query": "rate(x[5m])", "start": 0, "end": 60, "step": 60},
            timeout=10,
        )
    assert r.status_code == 400 and r.json()["errorType"] == "bad_data"


def test_the_metadata_api_lists_the_family_while_kube_state_metrics_exposes_it():
    for exposes, expected in ((True, [METRIC]), (False, [])):
        with PrometheusServer([], exposes_family=exposes) as url:
            r = requests.get(f"{url}/api/v1/metadata", params={"metric": METRIC}, timeout=10)
        assert r.status_code == 200 and list(r.json()["data"]) == expected
