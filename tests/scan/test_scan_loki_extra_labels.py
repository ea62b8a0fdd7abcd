"""Labels Loki adds (`service_name` at ingestion, `detected_level` as structured metadata merged
into results, `__tenant_id__` for several tenants) split one pod's lines into several result
streams: findings, counts and the unparsed example stay as without them (docs/upstream.md,
"Labels Loki adds").

A module of its own: the sandbox's S3 (moto) is process-global, so only one sandbox runs at a time.
"""

from __future__ import annotations

import json

import pytest
from support.cli import run, use_sandbox
from support.scan import CONFIG, WINDOW

from forensics.sandbox.incident import LabelNames, reference_scenario
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration


def scan(scenario, loki_options, tmp_path, monkeypatch, capsys):
    with sandbox(scenario, loki_options=loki_options) as box:
        use_sandbox(box, monkeypatch)
        cfg = tmp_path / "elastic-audit.toml"
        cfg.write_text(CONFIG)
        code, out, err = run(
            ["scan", *WINDOW, "-o", "json", "--no-progress", "--config", str(cfg)], capsys
        )
    return code, json.loads(out), err


@pytest.mark.parametrize("labels", [None, LabelNames("namespace", "pod_name", "container")])
def test_labels_loki_adds_change_nothing_the_report_says(labels, tmp_path, monkeypatch, capsys):
    scenario = reference_scenario(labels) if labels else reference_scenario()
    plain = scan(scenario, {}, tmp_path, monkeypatch, capsys)
    scenario = reference_scenario(labels) if labels else reference_scenario()
    added = scan(scenario, {"discover_labels": True}, tmp_path, monkeypatch, capsys)
    assert added[0] == plain[0]
    assert added[1]["findings"] == plain[1]["findings"]
    assert added[1]["summary"] == plain[1]["summary"]  # the unparsed example included
