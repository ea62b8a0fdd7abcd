"""End to end through the CLI: Kubernetes' own record of a disruption as a second witness
(docs/verdicts.md "Disruption evidence", docs/configuration.md `[k8s_events]`), read from the
sandbox's Loki in each collector's format (forensics/sandbox/k8s_events.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import jsonschema
import pytest
from support import paths
from support.cli import run
from support.expected import DISRUPTION_EXPECTED
from support.scan import CONFIG, EVENTS_CONFIG, EVENTS_WINDOW, key, sandbox_fixtures

from forensics.sandbox.disruptions import (
    ADMIN_ONLY,
    DISRUPTION_CONDITIONS,
    DISRUPTION_WINDOW,
    DRAINED_AFTER,
    EVENTROUTER,
    EXIT0,
    EXPORTER_STDOUT,
    PREEMPTED,
    PROM_ONLY,
    disruption_scenario,
)
from forensics.sandbox.prometheus_server import PrometheusServer

pytestmark = pytest.mark.integration

SCHEMA = json.loads(paths.SCHEMA.read_text())
EXPORTER_SELECTOR = '{app="kubernetes-event-exporter"}'
WINDOW = EVENTS_WINDOW

box, env = sandbox_fixtures(disruption_scenario, EVENTS_CONFIG)


def _scan(capsys, *extra: str) -> tuple[int, dict]:
    code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress", *extra], capsys)
    assert "Traceback" not in err
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    return code, report


def _config(tmp_path: Path, text: str) -> None:
    (tmp_path / "elastic-audit.toml").write_text(text)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_preempted_run_whose_lines_are_gone_is_affected_by_its_karpenter_event(capsys):
    code, report = _scan(capsys)
    assert code == 1 and report["complete"] is True
    found = {key(f): f for f in report["findings"]}
    f = found[(*PREEMPTED, "n0", 0)]
    assert f["verdict"] == "affected" and f["signal"] is None
    d = f["disruption"]
    assert d["source"] == "k8s-events" and d["reason"] == "Disrupted"
    assert d["initiator"] == "karpenter" and d["at"] == "2026-10-02T03:00:00Z"
    assert d["pod"] == f"{PREEMPTED[2]}-n0-0" and "terminationTime" in d["text"]
    assert f["cause"] == "elastic-ignore-outputs"


def test_spot_interrupted_replica_proves_its_pytorchjob_and_every_event_finding_is_found(capsys):
    # AT_THE_EDGE: ended 30 s into the window, disrupted 40 s before: events are read from an
    # hour before the window's start.
    _, report = _scan(capsys)
    found = {key(f): f for f in report["findings"]}
    for k, (verdict, reason, cause) in DISRUPTION_EXPECTED.items():
        if k[:3] in (EXIT0, PROM_ONLY, EVENTROUTER, EXPORTER_STDOUT):
            continue  # read with the event exporter's selector, or from Prometheus, below
        assert found[k]["verdict"] == verdict, k
        assert found[k]["disruption"]["reason"] == reason, k
        assert found[k]["cause"] == cause, k


def test_non_elastic_task_that_exited_0_after_preemption_is_a_finding_with_its_cause(
    capsys, tmp_path
):
    _config(tmp_path, EVENTS_CONFIG + f"selector = '{EXPORTER_SELECTOR}'\n")
    code, report = _scan(capsys)
    assert code == 1 and report["complete"] is True
    found = {key(f): f for f in report["findings"]}
    f = found[(*EXIT0, "n0", 0)]
    assert f["verdict"] == "affected" and f["cause"] == "exit-0-after-signal"
    assert f["disruption"]["reason"] == "Preempted"
    assert f["disruption"]["initiator"] == "default-scheduler"
    assert f["disruption"]["at"] == "2026-10-03T05:00:00Z"  # the event's time, not the sink's
    # the elastic neighbours' events are Alloy's, not read by this selector: no reason known
    by_reason = report["summary"]["findings_by_disruption_reason"]
    assert by_reason == {"Evicted": 1, "Preempted": 1, "TaintManagerEviction": 1, "none": 3}


def test_healthy_task_drained_after_it_finished_is_not_a_finding(capsys):
    _, report = _scan(capsys)
    names = {f["execution"]["name"] for f in report["findings"]}
    assert DRAINED_AFTER[2] not in names
    assert report["summary"]["cleared"].get("disruption-after-success") == 1
    # Only tasks the evidence points at are examined: the notebook pod's event and the node's
    # are no attempt's.
    by_reason = report["summary"]["findings_by_disruption_reason"]
    assert by_reason == {
        "Disrupted": 2,
        "Evicted": 2,
        "ScaleDown": 1,
        "SpotInterruption": 1,
        "TaintManagerEviction": 1,
    }


def test_admin_reasons_alone_prove_a_plain_task_evicted_by_the_taint_manager(capsys, tmp_path):
    _config(tmp_path, CONFIG)  # no Loki events at all: Admin's closure.reasons are always read
    code, report = _scan(capsys)
    assert code == 1 and report["complete"] is True
    f = {key(f): f for f in report["findings"]}[(*ADMIN_ONLY, "n0", 0)]
    assert f["verdict"] == "affected" and f["cause"] == "exit-0-after-signal"
    d = f["disruption"]
    assert (d["source"], d["reason"], d["initiator"]) == (
        "admin-reasons",
        "TaintManagerEviction",
        "taint-eviction-controller",
    )
    assert d["at"] == "2026-10-06T11:00:00Z" and d["pod"] == f"{ADMIN_ONLY[2]}-n0-0"
    assert d["text"] == f"Marking for deletion Pod gs1-production/{ADMIN_ONLY[2]}-n0-0"


def test_without_the_events_source_the_preempted_run_is_only_suspected(capsys, tmp_path):
    _config(tmp_path, CONFIG)
    _, report = _scan(capsys)
    found = {key(f): f for f in report["findings"]}
    f = found[(*PREEMPTED, "n0", 0)]
    assert f["verdict"] == "suspected" and f["disruption"] is None
    assert f["cause"] == "elastic-ignore-outputs"
    assert (*EXIT0, "n0", 0) not in found  # a plain task is looked at only where evidence points


def test_events_source_down_is_a_gap_never_an_all_clear(capsys, tmp_path):
    _config(tmp_path, EVENTS_CONFIG + f'url = "http://127.0.0.1:{_closed_port()}"\n')
    code, report = _scan(capsys)
    assert code == 3 and report["complete"] is False
    assert {g["source"] for g in report["gaps"]} == {"k8s-events"}
    found = {key(f): f for f in report["findings"]}
    assert found[(*PREEMPTED, "n0", 0)]["verdict"] == "suspected"


def test_events_source_down_names_its_address_and_where_it_came_from(capsys, tmp_path):
    port = _closed_port()
    _config(tmp_path, EVENTS_CONFIG + f'url = "http://127.0.0.1:{port}"\n')
    code, _, err = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    assert code == 3
    (line,) = [ln for ln in err.splitlines() if "Kubernetes events (Loki) failed" in ln]
    assert f"nothing answers at http://127.0.0.1:{port}, from [k8s_events] url in" in line, line


def test_events_on_loki_s_address_name_loki_s_origin_when_they_fail(capsys, tmp_path):
    _config(tmp_path, EVENTS_CONFIG + "selector = '{job=~\"(\"}'\n")
    code, _, err = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    assert code == 3
    (line,) = [ln for ln in err.splitlines() if "Kubernetes events (Loki) failed" in ln]
    assert " ?," not in line and "Loki's address, from " in line, line


def test_events_selector_loki_rejects_is_a_gap(capsys, tmp_path):
    _config(tmp_path, EVENTS_CONFIG + "selector = '{job=~\"(\"}'\n")
    code, report = _scan(capsys)
    assert code == 3 and report["complete"] is False
    assert [g["source"] for g in report["gaps"]] == ["k8s-events"]


def test_show_puts_the_disruption_events_on_the_timeline(capsys):
    code, out, err = run(["show", ":".join(PREEMPTED), "-o", "json"], capsys)
    assert code == 0, err
    tl = json.loads(out)
    assert tl["verdict"] == "affected" and tl["complete"] is True
    (att,) = tl["attempts"]
    assert att["disruption"]["reason"] == "Disrupted"
    events = [e for e in tl["timeline"] if e["source"] == "k8s-events"]
    assert [(e["at"], e["attempt"]) for e in events] == [("2026-10-02T03:00:00Z", "n0/0")]
    assert events[0]["event"].startswith(
        f"Disrupted by karpenter for pod gs1-production/{PREEMPTED[2]}-n0-0"
    )


def test_show_of_a_plain_task_evidence_points_at_is_judged_as_the_scan_does(capsys):
    code, out, err = run(["show", ":".join(ADMIN_ONLY), "-o", "json"], capsys)
    tl = json.loads(out)
    assert code == 0 and tl["verdict"] == "affected", err
    sources = [e["source"] for e in tl["timeline"] if e["source"] == "admin-reasons"]
    assert sources == ["admin-reasons"]  # the taint manager; the kubelet's stop is none


@pytest.fixture(scope="module")
def prometheus():
    server = PrometheusServer(list(DISRUPTION_CONDITIONS))
    with server as url:
        yield server, url


def test_prometheus_disruption_condition_alone_proves_a_plain_task(capsys, tmp_path, prometheus):
    _, url = prometheus
    _config(tmp_path, CONFIG + f'[prometheus]\nurl = "{url}"\n')
    code, report = _scan(capsys)
    assert code == 1 and report["complete"] is True
    f = {key(f): f for f in report["findings"]}[(*PROM_ONLY, "n0", 0)]
    assert f["verdict"] == "affected" and f["cause"] == "exit-0-after-signal"
    d = f["disruption"]
    assert (d["source"], d["reason"], d["initiator"]) == (
        "prometheus",
        "PreemptionByScheduler",
        "default-scheduler",
    )
    # the first evaluation step at which kube-state-metrics' series is present
    assert d["at"] == "2026-10-07T02:01:00Z" and d["pod"] == f"{PROM_ONLY[2]}-n0-0"


def test_prometheus_down_is_a_gap_never_an_all_clear(capsys, tmp_path, prometheus):
    server, url = prometheus
    _config(tmp_path, CONFIG + f'[prometheus]\nurl = "{url}"\n')
    server.status = 503
    try:
        code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    finally:
        server.status = None
    report = json.loads(out)
    assert code == 3 and report["complete"] is False
    (line,) = [ln for ln in err.splitlines() if "Prometheus failed" in ln]
    assert f"{url}, from [prometheus] url in" in line, line
    assert {g["source"] for g in report["gaps"]} == {"prometheus"}  # every shard of the window
    assert all("HTTP 503" in g["error"] for g in report["gaps"])
    found = {key(f): f for f in report["findings"]}
    assert (*PROM_ONLY, "n0", 0) not in found


def test_table_and_markdown_say_the_findings_per_disruption_reason(capsys):
    code, out, _ = run(["scan", *WINDOW, "-o", "table", "--no-progress"], capsys)
    assert code == 1
    assert (
        "Findings by disruption: Disrupted 2, Evicted 2, ScaleDown 1, SpotInterruption 1, "
        "TaintManagerEviction 1" in out
    )
    assert "Disrupted 10-02 03:00:00" in out  # the event stands where a signal would
    code, out, _ = run(["scan", *WINDOW, "-o", "markdown", "--no-progress"], capsys)
    assert "findings by disruption: Disrupted" in out
    assert "Kubernetes `Disrupted` by karpenter for pod" in out


def test_a_prometheus_answer_that_is_no_matrix_is_a_gap(capsys, tmp_path, prometheus):
    server, url = prometheus
    _config(tmp_path, CONFIG + f'[prometheus]\nurl = "{url}"\n')
    bad = {"metric": {"namespace": "gs1-production", "pod": "x", "reason": "Other"}}
    server.answer = {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{**bad, "values": [["soon", "1"]]}]},
    }
    try:
        code, report = _scan(capsys)
    finally:
        server.answer = None
    assert code == 3 and {g["source"] for g in report["gaps"]} == {"prometheus"}
    assert "not a Prometheus matrix" in report["gaps"][0]["error"]


def test_pods_with_disruption_evidence_is_what_a_narrowing_sweep_reads(tmp_path, prometheus):
    from forensics.config import load_settings
    from forensics.model import Window
    from forensics.scan.disruptions import pods_with_disruption_evidence
    from forensics.sources import Sources

    _, url = prometheus
    _config(tmp_path, EVENTS_CONFIG + f'[prometheus]\nurl = "{url}"\n')
    with Sources.from_settings(load_settings()) as sources:
        pods, gaps = pods_with_disruption_evidence(sources, Window(*DISRUPTION_WINDOW))
        # as the scan reads them: only the namespaces of Flyte's projects are kept
        flyte, _ = pods_with_disruption_evidence(
            sources, Window(*DISRUPTION_WINDOW), keep=lambda ns: ns.startswith("gs1-")
        )
    assert flyte == {p for p in pods if p[0] == "gs1-production"} and flyte != pods
    assert gaps == []
    assert (PREEMPTED[0] + "-" + PREEMPTED[1], f"{PREEMPTED[2]}-n0-0") in pods
    assert ("gs1-production", f"{PROM_ONLY[2]}-n0-0") in pods  # from Prometheus
    assert ("research-notebooks", "jupyter-bob-0") in pods  # every pod named, Flyte's or not
    # the kubelet's Killing alone is no disruption (docs/verdicts.md)
    assert ("research-notebooks", "jupyter-alice-0") not in pods


def test_event_lines_in_a_shape_no_shipper_writes_are_shown_never_dropped(capsys, tmp_path):
    _config(tmp_path, EVENTS_CONFIG + f"selector = '{EXPORTER_SELECTOR}'\n")
    code, _, err = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    assert code == 1
    assert "1 line(s) matched" in err and "in no shape an event shipper writes" in err
    assert '"pod":"gs1-production/some-pod"' in err


def test_csv_rows_carry_the_cause_and_the_disruption(capsys):
    import csv
    import io

    code, out, _ = run(["scan", *WINDOW, "-o", "csv", "--no-progress"], capsys)
    assert code == 1
    rows = {r["execution"]: r for r in csv.DictReader(io.StringIO(out))}
    r = rows[PREEMPTED[2]]
    assert (r["cause"], r["disruption_source"], r["disruption_reason"]) == (
        "elastic-ignore-outputs",
        "k8s-events",
        "Disrupted",
    )
    assert (r["disruption_initiator"], r["disruption_at"]) == ("karpenter", "2026-10-02T03:00:00Z")


def test_the_incident_page_says_what_disrupted_a_finding_without_a_signal(capsys):
    # The page's card for a finding proved by an event alone names the event, not only "no
    # signal" (docs/report.md, the incident page).
    code, out, _ = run(["scan", *WINDOW, "-o", "html", "--no-progress"], capsys)
    assert code == 1
    name = PREEMPTED[2]
    card = out[out.index(f'data-attempt="{":".join(PREEMPTED)}/n0/0"') :]
    card = card[: card.index("</article>")]
    assert "none in Loki" in card
    assert "<dt>disruption</dt><dd>Disrupted by karpenter at " in card
    assert "2026-10-02T03:00:00Z" in card and "(k8s-events)" in card
    assert f"<code>{name}-n0-0</code>" in card and "terminationTime" in card
    assert "<dt>cause</dt><dd>elastic-ignore-outputs</dd>" in card
