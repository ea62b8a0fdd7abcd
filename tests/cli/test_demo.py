"""demo: the whole job on the loopback sandbox, through the real CLI as a user runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from support.cli import CLI, run, run_process
from support.expected import EXPECTED_WITH_EVENTS

from forensics.sandbox.incident import EVENT_ONLY, REFERENCE_CHECKPOINT


@pytest.mark.e2e
def test_demo_reports_the_reference_incident_affected_with_an_empty_checkpoint():
    r = run_process("demo", "-o", "json", "--no-progress", timeout=300)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    ref = next(f for f in report["findings"] if f["execution"]["name"] == "azvg5f9v9974m78fvlf7")
    assert ref["verdict"] == "affected" and ref["signal"]["at"] == "2026-09-10T19:45:22Z"
    assert (
        ref["checkpoint"]["uri"] == REFERENCE_CHECKPOINT and ref["checkpoint"]["state"] == "empty"
    )
    assert len(report["findings"]) == len(EXPECTED_WITH_EVENTS) and report["complete"] is True
    # a finding proved by Kubernetes' event alone (no log line, a plain task)
    alone = next(f for f in report["findings"] if f["execution"]["name"] == EVENT_ONLY[2])
    assert alone["verdict"] == "affected" and alone["signal"] is None
    assert alone["disruption"]["reason"] == "Disrupted" and alone["cause"] == "exit-0-after-signal"
    assert "+ elastic-audit scan --since 2026-09-04T00:00:00Z" in r.stderr  # the real scan it ran


@pytest.mark.parametrize("missing", [("moto", "cheroot"), ("flask_cors",)])
def test_demo_without_the_demo_extra_names_the_install_command(missing, monkeypatch, capsys):
    # As in a plain `pip install elastic-audit`: the extra's modules cannot be imported (a None
    # in sys.modules is how Python marks a module absent). test_install.py does it for real.
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)
    code, out, err = run(["demo", "-o", "json"], capsys)
    assert code == 2 and out == ""
    assert err == (
        f"elastic-audit: error: demo needs the demo extra ({', '.join(missing)} not installed): "
        "pip install 'elastic-audit[demo]'\n"
    )  # one line, before any server starts


@pytest.mark.e2e
def test_keep_running_prints_an_environment_other_commands_use():
    # stdout is a pipe: it holds the scan's report alone; the environment goes to stderr.
    proc = subprocess.Popen(
        [*CLI, "demo", "--keep-running", "-o", "json", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        env_lines: dict[str, str] = {}
        seen = []
        for line in proc.stderr:  # `export NAME=value` lines, then "Sandbox running: ..."
            seen.append(line)
            if line.startswith("Sandbox running"):
                break
            name, eq, value = line.rstrip("\n").removeprefix("export ").partition("=")
            if eq and name.isupper() and name.replace("_", "").isalnum():
                env_lines[name] = value
        for name in (
            "LOKI_ADDR",
            "FLYTE_PLATFORM_URL",
            "FLYTE_PLATFORM_INSECURE",
            "AWS_ENDPOINT_URL_S3",
            "ELASTIC_AUDIT_CONFIG",
        ):
            assert name in env_lines, "".join(seen)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LOKI_", "FLYTE"))}
        env.update(env_lines)
        show = subprocess.run(
            [*CLI, "show", "gs1:production:azvg5f9v9974m78fvlf7", "-o", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert show.returncode == 0, show.stderr
        assert json.loads(show.stdout)["verdict"] == "affected"
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert json.loads(out)["complete"] is True  # nothing but the report on stdout
