"""The otel collector's label names (`k8s_*`) work through the config file alone.

A module of its own: the sandbox's S3 (moto) is process-global, so only one sandbox runs at a time.
"""

from __future__ import annotations

import json

import pytest
from support.cli import run, use_sandbox
from support.expected import EXPECTED_FINDINGS
from support.scan import OTEL_CONFIG, WINDOW, key

from forensics.sandbox.incident import OTEL_LABELS, reference_scenario
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration


def test_otel_label_names_through_the_config_file(tmp_path, monkeypatch, capsys):
    with sandbox(reference_scenario(OTEL_LABELS)) as b:
        use_sandbox(b, monkeypatch)
        cfg = tmp_path / "otel.toml"
        cfg.write_text(OTEL_CONFIG)
        code, out, _ = run(["scan", *WINDOW, "-o", "json", "--config", str(cfg)], capsys)
    assert code == 1
    assert {key(f): f["verdict"] for f in json.loads(out)["findings"]} == EXPECTED_FINDINGS
