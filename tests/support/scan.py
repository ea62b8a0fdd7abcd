"""Shared by the end-to-end scan tests: the window, configs, a module's sandbox fixtures, scan as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

import pytest

from forensics.model import UTC, to_ns
from forensics.sandbox.incident import glog_agent_line, reference_scenario
from forensics.sandbox.scenario import SandboxLogLine, Scenario
from forensics.sandbox.stack import sandbox
from support.cli import run, use_sandbox

WINDOW = ["--since", "2026-09-04", "--until", "2026-09-11"]
CONFIG = """
[flyte]
console_url = "https://flyte.example.com/console"
[loki]
grafana_explore_url = "https://grafana.example.com"
[checkpoints]
input = "checkpoint_dir"
"""
# No retry of a failed Admin call: tests of a failing Admin answer in seconds.
NO_RETRY = CONFIG.replace("[flyte]\n", "[flyte]\nretries = 0\n")
# One retry, no back-off: tests of a failing Loki answer in seconds.
QUICK = CONFIG.replace("[loki]\n", "[loki]\nretries = 1\nretry_backoff = 0\n")
# The disruption neighbours' window and `[k8s_events]` on (forensics/sandbox/disruptions.py).
EVENTS_CONFIG = CONFIG + "[k8s_events]\nenabled = true\n"
EVENTS_WINDOW = ["--since", "2026-10-01", "--until", "2026-10-08"]
OTEL_CONFIG = CONFIG.replace(
    "[loki]\n",
    '[loki]\nnamespace_label = "k8s_namespace_name"\npod_label = "k8s_pod_name"\n'
    'container_label = "k8s_container_name"\n',
)


def sandbox_fixtures(make_scenario: Callable[[], Scenario], config: str = CONFIG) -> tuple:
    """A test module's `box` (the sandbox seeded with `make_scenario()`, once per module) and
    autouse `env` (the CLI pointed at it: its environment, and `config` as the
    ./elastic-audit.toml the default search finds in a fresh working directory).
    Use as `box, env = sandbox_fixtures(_scenario)`."""

    @pytest.fixture(scope="module")
    def box():
        with sandbox(make_scenario()) as b:
            yield b

    @pytest.fixture(autouse=True)
    def env(box, tmp_path, monkeypatch):
        point_at(box, tmp_path, monkeypatch, config)

    return box, env


def key(f: dict) -> tuple:
    e = f["execution"]
    return (e["project"], e["domain"], e["name"], f["node_id"], f["attempt"])


def scan_json(capsys, *extra: str) -> tuple[int, dict, str]:
    """`scan` over WINDOW as JSON: exit code, the report, stderr."""
    code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress", *extra], capsys)
    return code, json.loads(out), err


def scan_json_while_failing(box, capsys, rpc: str, *extra: str) -> tuple[int, dict, str]:
    """`scan_json` while every `rpc` call to the sandbox Admin fails UNAVAILABLE."""
    import grpc

    box.admin.faults.fail_next(rpc, times=100, code=grpc.StatusCode.UNAVAILABLE)
    try:
        return scan_json(capsys, *extra)
    finally:
        box.admin.faults.failures.clear()


def point_at(box, tmp_path, monkeypatch, config: str = CONFIG) -> None:
    """Point the clients at `box` and run from `tmp_path`, whose ./elastic-audit.toml is `config`."""
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)  # ./elastic-audit.toml is found by the default search
    (tmp_path / "elastic-audit.toml").write_text(config)


def sub_millisecond_burst() -> tuple[Scenario, str]:
    """The reference incident plus 150 matching lines that share one nanosecond that is not
    millisecond-aligned, across three pods, and a config whose page (`max_entries = 100`) is
    smaller than the burst: same-nanosecond paging must read it stream by stream."""
    scenario = reference_scenario()
    at = datetime(2026, 9, 8, 12, 0, 0, tzinfo=UTC)
    ts = to_ns(at) + 123_457
    scenario.log_lines += [
        SandboxLogLine(
            ts,
            {"namespace": "batch", "pod": f"burst-{p}", "container": "burst"},
            glog_agent_line(at, 1000 + i),
        )
        for p in range(3)
        for i in range(50)
    ]
    return scenario, QUICK.replace("[loki]\n", "[loki]\nmax_entries = 100\n")
