"""kube-state-metrics' `kube_pod_status_disruption_reason` through a real Prometheus (Debian's
package, tests/support/real_prometheus.py; skipped, saying so, without it): Prometheus scrapes two
small exporters on loopback every second, one as a `honor_labels: true` job, one as a scrape
without it whose target carries `namespace` and `pod`. A condition is exposed for about two
seconds, then the pod is gone: Prometheus writes a stale marker at the next scrape. The scan, run
through the CLI with `step = "10s"` over a window whose steps fall on either side of the condition,
must still see it (docs/upstream.md, "Kubernetes events and disruption conditions"). Flyte Admin
and S3 are the sandbox's, with one plain task per exporter that succeeded without `outputs.pb`.

A module of its own: the sandbox's S3 (moto) is process-global, so only one sandbox runs at a time.
"""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timedelta

import pytest
from support.cli import run
from support.real_prometheus import Exporter, binary, query, real_prometheus
from support.scan import CONFIG, key, point_at

from forensics.model import UTC, rfc3339
from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

METRIC = "kube_pod_status_disruption_reason"
NS = "gs1-production"
HONOURED = "p1r5o9m3e7t1h5e9u3s7"  # scraped with honor_labels: true
RELABELLED = "r2e6l0a4b8e2l6l0e4d8"  # scraped without: exported_namespace / exported_pod
STEP = 10  # seconds: the scan's [prometheus] step
LIVE = 2.5  # seconds the condition is exposed
# The step before the first scrape that saw the condition lies this far before it: the next step
# comes after the stale marker (about LIVE + one scrape after the first sample).
BEFORE = 3


def _labels(name: str) -> str:
    return f'namespace="{NS}",pod="{name}-n0-0",uid="uid-{name}",reason="EvictionByEvictionAPI"'


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    """The real Prometheus after the condition came and went: its URL, the window's start (the
    step just before the first sample), and the raw samples it stored per job."""
    binary()  # skips, saying why, when Debian's prometheus is not installed
    honoured, relabelled = Exporter(METRIC), Exporter(METRIC)
    jobs = [
        ("kube-state-metrics", honoured, True, {}),
        (
            "kube-state-metrics-relabelled",
            relabelled,
            False,
            {"namespace": "monitoring", "pod": "kube-state-metrics-5c8d9b7f4-x2x9q"},
        ),
    ]
    try:
        with real_prometheus(tmp_path_factory.mktemp("prometheus"), jobs) as url:
            for exp, name in ((honoured, HONOURED), (relabelled, RELABELLED)):
                with exp.lock:
                    exp.series[_labels(name)] = 1
            time.sleep(LIVE)
            for exp in (honoured, relabelled):
                with exp.lock:
                    exp.series.clear()
            time.sleep(2.5)  # the next scrape writes the stale markers
            raw = query(url, "query", query=f"{METRIC}[2m]")
            samples = {s["metric"]["job"]: [float(t) for t, _ in s["values"]] for s in raw}
            first = min(samples["kube-state-metrics"])
            since = datetime.fromtimestamp(math.floor(first) - BEFORE, tz=UTC)
            until = since + timedelta(seconds=2 * STEP)
            while datetime.now(UTC) <= until:  # --until cannot be in the future
                time.sleep(0.5)
            yield {"url": url, "since": since, "until": until, "samples": samples}
    finally:
        honoured.close()
        relabelled.close()


@pytest.fixture(scope="module")
def box(prom):
    since = prom["since"]
    b = ScenarioBuilder()
    plain = b.task("gs1", "production", "etl.export", version=0)
    end = since + timedelta(seconds=15)  # after the step that holds the condition
    for name in (HONOURED, RELABELLED):
        start = since - timedelta(minutes=10)
        b.one_node("gs1", "production", name, "SUCCEEDED", start, end + timedelta(seconds=2),
                   _try(name, 0, "SUCCEEDED", start + timedelta(seconds=5), end, plain))  # fmt: skip
    b.routine_logs(since - timedelta(hours=2), prom["until"], every=timedelta(seconds=10))
    with sandbox(b.build()) as sb:
        yield sb


@pytest.fixture
def scan(prom, box, tmp_path, monkeypatch, capsys):
    config = CONFIG + f'[prometheus]\nurl = "{prom["url"]}"\nstep = "{STEP}s"\n'
    point_at(box, tmp_path, monkeypatch, config)
    window = ["--since", rfc3339(prom["since"]), "--until", rfc3339(prom["until"])]
    code, out, err = run(["scan", *window, "-o", "json", "--no-progress"], capsys)
    assert "Traceback" not in err
    return code, json.loads(out), err


def test_a_condition_between_two_steps_is_seen_despite_its_stale_marker(prom, scan):
    samples = prom["samples"]["kube-state-metrics"]
    assert 1 <= len(samples) and max(samples) - min(samples) < STEP - BEFORE - 2
    # What an instant selector reads at the steps: nothing, the stale marker came first.
    start = prom["since"] - timedelta(hours=1)
    instant = query(
        prom["url"],
        "query_range",
        query=f"max by (namespace, pod, reason) ({METRIC})",
        start=f"{start.timestamp():.0f}",
        end=f"{prom['until'].timestamp():.0f}",
        step=str(STEP),
    )
    assert [s for s in instant if s["metric"].get("pod") == f"{HONOURED}-n0-0"] == []
    code, report, err = scan
    assert code == 1 and report["complete"] is True, err
    f = {key(f): f for f in report["findings"]}[("gs1", "production", HONOURED, "n0", 0)]
    d = f["disruption"]
    assert (d["source"], d["reason"], d["pod"]) == (
        "prometheus",
        "EvictionByEvictionAPI",
        f"{HONOURED}-n0-0",
    )
    # the first step whose range holds a sample: the next one, before the task's end
    assert d["at"] == rfc3339(prom["since"] + timedelta(seconds=STEP))
    assert f["verdict"] == "affected"


def test_a_scrape_without_honor_labels_is_read_and_named(prom, scan):
    code, report, err = scan
    assert code == 1 and report["complete"] is True, err
    f = {key(f): f for f in report["findings"]}[("gs1", "production", RELABELLED, "n0", 0)]
    assert (f["disruption"]["namespace"], f["disruption"]["pod"]) == (NS, f"{RELABELLED}-n0-0")
    (line,) = [ln for ln in err.splitlines() if "honor_labels" in ln]
    assert "exported_namespace/exported_pod" in line
