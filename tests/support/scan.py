"""Shared by the end-to-end scan tests: the window, configs, a module's sandbox fixtures, scan as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from forensics.sandbox.scenario import Scenario
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


def point_at(box, tmp_path, monkeypatch, config: str = CONFIG) -> None:
    """Point the clients at `box` and run from `tmp_path`, whose ./elastic-audit.toml is `config`."""
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)  # ./elastic-audit.toml is found by the default search
    (tmp_path / "elastic-audit.toml").write_text(config)
