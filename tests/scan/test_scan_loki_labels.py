"""A label name the matched streams lack is a gap, never an all-clear (issue 43, item 2).

`[loki] pod_label = "k8s_pod_name"` against streams labelled `pod`: Loki matches every death
signal, none can be attributed to a pod. The scan says which setting, how many matched streams
lack the label and what they carry instead, and is incomplete (exit 3).
"""

from __future__ import annotations

import json

import pytest
from support.cli import run
from support.scan import CONFIG, WINDOW, sandbox_fixtures

from forensics.sandbox.incident import reference_scenario

pytestmark = pytest.mark.integration

box, env = sandbox_fixtures(reference_scenario)


def scan(tmp_path, capsys, loki_lines: str):
    cfg = tmp_path / "labels.toml"
    cfg.write_text(CONFIG.replace("[loki]\n", "[loki]\n" + loki_lines))
    code, out, err = run(
        ["scan", *WINDOW, "-o", "json", "--no-progress", "--config", str(cfg)], capsys
    )
    return code, json.loads(out), err


@pytest.mark.parametrize(
    ("setting", "label"),
    [("pod_label", "k8s_pod_name"), ("container_label", "k8s_container_name")],
)
def test_a_label_name_no_matched_stream_carries_is_a_gap(setting, label, tmp_path, capsys):
    code, report, err = scan(tmp_path, capsys, f'{setting} = "{label}"\n')
    assert code == 3, err
    assert report["complete"] is False
    gaps = [g for g in report["gaps"] if setting in g["error"]]
    assert len(gaps) == 1, report["gaps"]
    text = gaps[0]["error"]
    assert f"[loki] {setting} = {label}: 0 of " in text
    assert "matched streams carry it; they carry " in text
    carried = text.split("they carry ", 1)[1].split(".", 1)[0].split(", ")
    assert {"namespace", "pod", "container"} <= set(carried)
    assert "service_name" not in carried
    assert f"{setting} = {label}: 0 of" in err  # the warning names the label
    assert "coverage complete" not in err


def test_the_right_label_names_leave_no_gap(tmp_path, capsys):
    code, report, _err = scan(tmp_path, capsys, 'pod_label = "pod"\n')
    assert code in (0, 1)
    assert not [g for g in report["gaps"] if "_label" in g["error"]], report["gaps"]
    assert report["complete"] is True
