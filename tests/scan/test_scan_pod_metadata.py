"""Pods whose name Loki keeps as structured metadata, not an index label (OTLP ingestion without
`k8s.pod.name` promoted; docs/upstream.md, "Pods in structured metadata"): `show` and every pod
query find them with a label filter after the stream selector, and agree with `scan`.

A module of its own: the sandbox's S3 (moto) is process-global, so only one sandbox runs at a time.
"""

from __future__ import annotations

import json

import pytest
from support.cli import run, use_sandbox
from support.expected import EXPECTED_FINDINGS
from support.scan import CONFIG, WINDOW, key

from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"


@pytest.fixture(scope="module")
def box():
    options = {"structured_metadata": ("pod", "container")}
    with sandbox(reference_scenario(), loki_options=options) as b:
        yield b


@pytest.fixture(autouse=True)
def env(box, tmp_path, monkeypatch):
    use_sandbox(box, monkeypatch)
    (tmp_path / "elastic-audit.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)


def test_show_finds_the_signal_of_a_pod_named_in_structured_metadata(box, capsys):
    code, out, err = run(["show", INCIDENT, "-o", "json"], capsys)
    tl = json.loads(out)
    # Before: the pod was asked for in the stream selector: `suspected`, no pod lines, complete.
    assert code == 0, err
    assert tl["verdict"] == "affected" and tl["complete"] is True
    signal = [e for e in tl["timeline"] if e["source"] == "pod" and "death signal" in e["event"]]
    assert signal and signal[0]["at"] == "2026-09-10T19:45:22Z"
    pod_queries = [r.params["query"] for r in box.loki.requests if r.path.endswith("/query_range")]
    assert any("| pod=~" in q for q in pod_queries)


def test_scan_and_show_agree(capsys):
    code, out, _ = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    report = json.loads(out)
    assert code == 1 and report["complete"]
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED_FINDINGS
    for f in report["findings"]:
        e = f["execution"]
        ref = f"{e['project']}:{e['domain']}:{e['name']}"
        _, shown, _ = run(["show", ref, "-o", "json"], capsys)
        attempts = {
            (a["node_id"], a["attempt"]): a["verdict"] for a in json.loads(shown)["attempts"]
        }
        assert attempts.get((f["node_id"], f["attempt"])) == f["verdict"], ref


def test_relaunch_s_re_check_finds_the_pod_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code, out, err = run(["relaunch", INCIDENT, "--dry-run", "-o", "json"], capsys)
    (item,) = json.loads(out)
    assert code == 0, err
    # Before: the re-check asked for the pod in the stream selector and saw no signal.
    assert item["plan"]["verdict"] == "affected" and "(affected)" in item["reason"]
