"""A busy month through the real CLI: whichever source answers first, the scan finds exactly the
affected and suspected attempts, and reads each execution's attempts from Admin once."""

from __future__ import annotations

import json

import pytest
from support.cli import run, use_sandbox
from support.scan import key
from support.synthetic import synthetic_month

from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

MONTH = synthetic_month(attempts=600, signalled=80, affected=20, noise_lines=30_000, projects=3)
WINDOW = ["--since", "2026-08-01", "--until", "2026-08-31"]


@pytest.fixture(scope="module")
def box():
    with sandbox(MONTH.scenario) as b:
        b.loki.add_lines(MONTH.noise())
        yield b


@pytest.fixture
def env(box, tmp_path, monkeypatch):
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    box.loki.faults.latency = 0.0
    yield box
    box.loki.faults.latency = 0.0


def scan(capsys, workers: str) -> dict:
    code, out, err = run(
        ["scan", *WINDOW, "-o", "json", "--no-progress", "--workers", workers], capsys
    )
    assert code == 1, err
    return json.loads(out)


def test_a_busy_month_yields_exactly_its_attempts_whatever_the_workers_and_source_order(
    env, capsys
):
    reports = []
    # One worker; eight; and Loki slower than Admin, so that most executions are swept before
    # any signal is known: those attempts must wait for the signals, not be judged unsignalled.
    for workers, loki_latency in (("1", 0.0), ("8", 0.0), ("8", 0.4)):
        env.loki.faults.latency = loki_latency
        before = env.admin.call_counts()
        report = scan(capsys, workers)
        calls = env.admin.call_counts() - before

        assert report["complete"] is True and report["gaps"] == []
        assert {key(f): f["verdict"] for f in report["findings"]} == MONTH.expected
        summary = report["summary"]
        assert summary["affected"] == 20 and summary["suspected"] == len(MONTH.expected) - 20
        assert summary["cleared"]["signal-then-failed-and-retried"] == 18  # 30% of the other 60
        affected = [f for f in report["findings"] if f["verdict"] == "affected"]
        assert all(f["signal"]["at"] < f["succeeded_at"] for f in affected)
        # Signals join the swept attempts: no execution is fetched or listed twice. Every
        # workflow runs only elastic tasks, so its nodes come from the closure, not a listing.
        assert calls["GetExecution"] == 0 and calls["ListNodeExecutions"] == 0
        nodes = sum(len(ex.nodes) for ex in MONTH.scenario.executions)
        assert calls["ListTaskExecutions"] == nodes
        reports.append(report)
    assert reports[0]["findings"] == reports[1]["findings"] == reports[2]["findings"]
    assert reports[0]["summary"] == reports[1]["summary"] == reports[2]["summary"]
