"""Shared by the end-to-end scan tests: the window, configs, and running the real CLI entry point."""

from __future__ import annotations

import pytest

from forensics.cli import main

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


def run(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def key(f: dict) -> tuple:
    e = f["execution"]
    return (e["project"], e["domain"], e["name"], f["node_id"], f["attempt"])
