"""A synthetic month's incident page in Chromium: small, clean, every attempt drawn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from support.browser import chromium
from support.cli import use_sandbox
from support.page_checks import check_page, scan_page
from support.synthetic import synthetic_month

from forensics.sandbox.incident import ScenarioBuilder
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.e2e

MONTH = synthetic_month(
    attempts=150, signalled=24, affected=8, suspected=2, noise_lines=0, projects=2
)


def _routine_lines():
    """The namespaces' other pods logging through the month: Loki holds each namespace's logs
    where a suspected finding's own lines are gone (no logs_absent gap, docs/upstream.md)."""
    b = ScenarioBuilder()
    b.scenario.executions.extend(MONTH.scenario.executions)
    b.routine_logs(MONTH.window.start - timedelta(days=1), MONTH.window.end + timedelta(days=1))
    return b.scenario.log_lines


@pytest.fixture(scope="module")
def box():
    with sandbox(MONTH.scenario) as b:
        b.loki.add_lines(_routine_lines())
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
