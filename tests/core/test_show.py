"""show: the evidence timeline of one execution, as the seed's evidence reads."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from support.cli import run, use_sandbox
from support.scan import CONFIG

from forensics.sandbox.incident import REFERENCE_CHECKPOINT
from forensics.sandbox.loki_server import FaultRule, LokiFaults

pytestmark = pytest.mark.integration

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"


@pytest.fixture
def env(box, tmp_path, monkeypatch):
    use_sandbox(box, monkeypatch)
    (tmp_path / "elastic-audit.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    box.loki.faults = LokiFaults()
    return box


def show_json(capsys, *args):
    code, out, err = run(["show", *args, "-o", "json"], capsys)
    return code, json.loads(out) if out else None, err


def test_reference_incident_timeline_reads_signal_success_outputs_checkpoint(env, capsys):
    code, tl, _ = show_json(capsys, INCIDENT)
    assert code == 0 and tl["verdict"] == "affected" and tl["complete"] is True
    events = tl["timeline"]
    times = [datetime.fromisoformat(e["at"].replace("Z", "+00:00")) for e in events]
    assert times == sorted(times)  # oldest first

    def first(source, fragment):
        return next(e for e in events if e["source"] == source and fragment in e["event"])

    signal = first("pod", "Received 15 death signal, shutting down workers")
    assert signal["at"] == "2026-09-10T19:45:22Z" and signal["attempt"] == "n0/0"
    assert first("pod", "User-scoped IgnoreOutputs received")["at"].startswith(
        "2026-09-10T19:45:23"
    )
    propeller = first("propeller", "Plugin [container] returned no outputReader")
    assert propeller["at"] == "2026-09-10T19:45:29Z" and "(node n0)" in propeller["event"]
    assert first("admin", "attempt SUCCEEDED")["at"] == "2026-09-10T19:45:29Z"
    assert "outputs.pb missing" in first("s3", "outputs.pb")["event"]
    assert f"checkpoint {REFERENCE_CHECKPOINT}: empty" in first("s3", "checkpoint")["event"]
    (attempt,) = tl["attempts"]
    assert attempt["verdict"] == "affected" and attempt["signal_at"] == "2026-09-10T19:45:22Z"
    assert attempt["checkpoint"]["state"] == "empty"


def test_table_keeps_bracketed_log_text(env, capsys):
    code, out, _ = run(["show", INCIDENT, "-o", "table"], capsys)
    assert code == 0
    assert "verdict: AFFECTED" in out and "Plugin [container] returned no" in out
    assert "n0/0: affected; checkpoint empty" in out


def test_pytorchjob_workers_and_a_healthy_run(env, capsys):
    _, tl, _ = show_json(capsys, "gs1:production:bq7k2m9x4c8d1f6h3j5n")
    pods = {e["event"].split(":")[0] for e in tl["timeline"] if e["source"] == "pod"}
    assert pods == {"bq7k2m9x4c8d1f6h3j5n-n0-0-worker-0", "bq7k2m9x4c8d1f6h3j5n-n0-0-worker-1"}
    assert tl["attempts"][0]["signal_at"] == "2026-09-09T03:12:40Z"  # the earlier worker
    _, tl, _ = show_json(capsys, "gs1:production:k5l9z3x7c1v5b9n3m7q1")
    assert tl["verdict"] == "not-affected" and tl["attempts"][0]["outputs"] == "present"


def test_retried_attempt_is_explained(env, capsys):
    _, tl, _ = show_json(capsys, "gs1:production:g2h6j0k4l8q3w7e1r5t9")
    by = {(a["node_id"], a["attempt"]): a for a in tl["attempts"]}
    assert by[("n0", 0)]["reason"] == "signal-then-failed-and-retried"
    assert by[("n0", 1)]["reason"] == "outputs-written"


def test_unknown_execution_is_one_line_exit_2(env, capsys):
    code, out, err = run(["show", "gs1:production:nosuchexecution0000"], capsys)
    assert code == 2 and out == "" and "not found" in err and "Traceback" not in err


def test_loki_failure_makes_the_timeline_incomplete(env, capsys):
    env.loki.faults = LokiFaults(rules=[FaultRule(status=500, count="always")])
    fast = CONFIG.replace("[loki]\n", "[loki]\nretries = 1\nretry_backoff = 0.01\n")
    (Path.cwd() / "elastic-audit.toml").write_text(fast)
    code, tl, _ = show_json(capsys, INCIDENT)
    assert code == 3 and tl["complete"] is False and tl["gaps"][0]["source"] == "loki"
