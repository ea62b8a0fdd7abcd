"""End to end: the real CLI entry point scans the sandbox seeded with the reference incident."""

from __future__ import annotations

import json

import jsonschema
import pytest
from support import paths
from support.cli import run, use_sandbox
from support.expected import EXPECTED_CLEARED, EXPECTED_FINDINGS
from support.scan import CONFIG, WINDOW, key

from forensics.sandbox.incident import REFERENCE_CHECKPOINT

pytestmark = pytest.mark.integration

HERE = paths.TESTS
GOLDEN = HERE / "golden"


@pytest.fixture
def env(box, tmp_path, monkeypatch):
    use_sandbox(box, monkeypatch)
    cfg = tmp_path / "elastic-audit.toml"
    cfg.write_text(CONFIG)
    monkeypatch.chdir(tmp_path)  # ./elastic-audit.toml is found by the default search
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return cfg


def scan_json(capsys, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress", *extra], capsys)
    return code, json.loads(out), err


def test_reference_incident_is_reported_exactly_as_the_spec_shows(env, capsys):
    code, report, _ = scan_json(capsys)
    assert code == 1
    ref = next(f for f in report["findings"] if f["execution"]["name"] == "azvg5f9v9974m78fvlf7")
    logs = ref["links"].pop("logs")
    assert logs.startswith("https://grafana.example.com/explore?")
    assert ref["checkpoint"].pop("source") == "input:checkpoint_dir"
    assert ref["checkpoint"].pop("written_after_signal") is None
    assert ref["signal"].pop("at_source") == "glog"  # the line's own time (docs/report.md)
    assert ref.pop("cost")["gpu_hours"] == 34.8656  # test_report_html.py checks it all
    assert ref == {
        "execution": {"project": "gs1", "domain": "production", "name": "azvg5f9v9974m78fvlf7"},
        "node_id": "n0",
        "attempt": 0,
        "verdict": "affected",
        "execution_phase": "SUCCEEDED",
        "signal": {
            "name": "SIGTERM",
            "number": 15,
            "at": "2026-09-10T19:45:22Z",
            "namespace": "gs1-production",
            "pod": "azvg5f9v9974m78fvlf7-n0-0",
        },
        "succeeded_at": "2026-09-10T19:45:29Z",
        "outputs_written": False,
        "checkpoint": {
            "uri": REFERENCE_CHECKPOINT,
            "state": "empty",
            "objects": 0,
            "latest": None,
            "reason": None,
        },
        "relaunched_as": None,
        "parent": None,
        "links": {
            "flyte": "https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7"
        },
        "notes": [],
        "disruption": None,
        "cause": "elastic-ignore-outputs",
    }
    assert report["window"] == {"start": "2026-09-04T00:00:00Z", "end": "2026-09-11T00:00:00Z"}
    assert report["complete"] is True and report["gaps"] == []
    assert report["schema_version"] == 1 and report["tool"] == "elastic-audit 0.1.0"


def test_every_verdict_and_every_cleared_class(env, capsys):
    _, report, _ = scan_json(capsys)
    got = {key(f): f["verdict"] for f in report["findings"]}
    assert got == EXPECTED_FINDINGS
    s = report["summary"]
    assert s["cleared"] == EXPECTED_CLEARED
    assert s["affected"] == 5 and s["suspected"] == 1
    assert s["not_affected"] == sum(EXPECTED_CLEARED.values())
    assert s["attempts_examined"] == s["affected"] + s["suspected"] + s["not_affected"]


def test_what_each_finding_lost_is_said(env, capsys):
    _, report, _ = scan_json(capsys)
    by_name = {f["execution"]["name"]: f for f in report["findings"]}
    multi = by_name["bq7k2m9x4c8d1f6h3j5n"]  # PyTorchJob: two workers, one finding
    assert multi["signal"]["pod"].endswith("-worker-0")  # the earliest of the two
    assert multi["checkpoint"]["state"] == "present" and multi["checkpoint"]["objects"] == 3
    assert multi["checkpoint"]["source"] == "flyte-checkpoint"
    assert multi["checkpoint"]["written_after_signal"] is False
    nightly = by_name["nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"]  # hashed pod
    assert nightly["signal"]["pod"].startswith("f") and len(nightly["signal"]["pod"]) == 8
    assert nightly["checkpoint"]["written_after_signal"] is True
    dev = by_name["c3p8r2w6y1t5u9e4o7i0"]
    assert dev["signal"]["name"] == "SIGINT" and dev["signal"]["number"] == 2
    assert dev["relaunched_as"] == {
        "project": "gs1",
        "domain": "development",
        "name": "d5a1s9d3f7g2h6j0k4l8",
    }
    assert dev["checkpoint"]["state"] == "unknown"  # no input, no template, no Flyte checkpoint
    suspected = by_name["j4k8l2z6x0c3v7b1n5m9"]
    assert suspected["signal"] is None and suspected["outputs_written"] is False


def test_json_report_validates_against_the_schema(env, capsys):
    _, report, _ = scan_json(capsys)
    schema = json.loads((HERE / "report.schema.json").read_text())
    jsonschema.validate(report, schema)


def test_report_file_is_the_json_whatever_the_output(env, capsys, tmp_path):
    target = tmp_path / "out" / "incident.json"
    target.parent.mkdir()
    code, out, _ = run(["scan", *WINDOW, "-o", "csv", "--report", str(target)], capsys)
    assert code == 1
    assert out.splitlines()[0].startswith("verdict,project,domain,execution")
    report = json.loads(target.read_text())
    assert {key(f) for f in report["findings"]} == set(EXPECTED_FINDINGS)
    assert [p.name for p in target.parent.iterdir()] == ["incident.json"]  # no temp file left


def test_exit_zero_and_a_quiet_window(env, capsys):
    assert run(["scan", *WINDOW, "-o", "json", "--exit-zero"], capsys)[0] == 0
    code, out, _ = run(
        ["scan", "--since", "2026-09-12", "--until", "2026-09-13", "-o", "json"], capsys
    )
    assert code == 0 and json.loads(out)["findings"] == []


def test_project_and_domain_narrow_the_scan(env, capsys):
    _, report, _ = scan_json(capsys, "--project", "gs1", "--domain", "development")
    assert {key(f) for f in report["findings"]} == {
        ("gs1", "development", "c3p8r2w6y1t5u9e4o7i0", "n0", 0)
    }


@pytest.mark.parametrize("fmt,golden", [("table", "scan_table.txt"), ("markdown", "scan.md")])
def test_table_and_markdown_match_golden_files(env, capsys, monkeypatch, fmt, golden):
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: no width limit, one line per finding
    code, out, _ = run(["scan", *WINDOW, "-o", fmt], capsys)
    assert code == 1
    expected = (GOLDEN / golden).read_text()
    assert out == expected


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--since", "yesterday"], "--since"),
        (["--since", "2026-09-11", "--until", "2026-09-04"], "must be before"),
        (["--since", "7d", "--project", 'gs1"} |= "x'], "--project"),
        (["--since", "7d", "--domain", "prod"], "no project has such a domain"),
        (["--since", "7d", "--workers", "0"], "--workers"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(env, capsys, args, fragment):
    code, out, err = run(["scan", *args], capsys)
    assert code == 2 and out == ""
    assert fragment in err and "Traceback" not in err


def test_unknown_config_key_is_exit_2_naming_key_and_file(env, capsys):
    env.write_text("[loki]\npod_lable = 'pod'\n")
    code, out, err = run(["scan", *WINDOW], capsys)
    assert code == 2 and "pod_lable" in err and "elastic-audit.toml" in err and out == ""


def test_unknown_relaunch_state_is_a_gap_not_a_silent_null(env, box, capsys):
    import grpc

    box.admin.faults.failing_filters["mode"] = grpc.StatusCode.INTERNAL  # only the look-up
    try:
        code, report, _ = scan_json(capsys)
    finally:
        box.admin.faults.failing_filters.clear()
    assert code == 3 and report["complete"] is False
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED_FINDINGS
    assert report["gaps"] and all(
        g["source"] == "admin" and "relaunched_as may be missing" in g["error"]
        for g in report["gaps"]
    )
