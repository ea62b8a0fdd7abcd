"""A synthetic month's incident page in Chromium: small, clean, every attempt drawn."""

from __future__ import annotations

import pytest
from support.browser import chromium
from support.cli import use_sandbox
from support.page_checks import check_page, scan_page
from support.synthetic import synthetic_month

from forensics.sandbox.stack import sandbox

MONTH = synthetic_month(
    attempts=150, signalled=24, affected=8, suspected=2, noise_lines=0, projects=2
)


@pytest.fixture(scope="module")
def box():
    with sandbox(MONTH.scenario) as b:
        yield b


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def test_a_synthetic_months_page_renders_small(box, browser, tmp_path, monkeypatch, capsys):
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    html, report = scan_page(tmp_path, capsys, "--since", "2026-08-01", "--until", "2026-08-31")
    assert {f["verdict"] for f in report["findings"]} == {"affected", "suspected"}
    assert len(report["findings"]) == len(MONTH.expected)
    assert html.stat().st_size < 250_000  # a month's page stays a small file
    # Multi-node ones are pod-template tasks (as kfpytorch serializes them): priced all the same
    costs = [f["cost"] for f in report["findings"]]
    assert all(c["gpu_hours"] > 0 for c in costs)
    assert any("k8s_pod" in c["source"] and c["pods"] == 2 for c in costs)
    check_page(browser, html, report, "month", capsys)
