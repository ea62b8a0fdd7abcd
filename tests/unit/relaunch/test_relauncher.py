"""`Relauncher` over in-process fakes: re-check by the scan's rules, refuse what is not proven,
relaunch exactly once, audit every action."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from support.fakes import (
    fake_sources,
    healthy,
    silent_green,
)

from forensics.relaunch import AuditLog, relaunch_name
from forensics.relaunch.relauncher import Relauncher


@pytest.fixture
def world():
    sources = fake_sources()
    return sources, silent_green(sources).ref.execution, healthy(sources).ref.execution


def relauncher(sources, tmp_path) -> Relauncher:
    return Relauncher.over(sources, AuditLog(tmp_path / "audit.jsonl"))


def audit(tmp_path) -> list[str]:
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [json.loads(line)["action"] for line in lines]


def test_an_affected_execution_is_relaunched_once_and_found_relaunched_after(world, tmp_path):
    sources, bad, _ = world
    r = relauncher(sources, tmp_path)
    plan = r.plan(bad)
    assert (plan.verdict, plan.refusal, plan.existing) == ("affected", None, None)
    out = r.execute(plan, dry_run=False)
    assert (out.status, out.relaunched_as) == ("relaunched", replace(bad, name=relaunch_name(bad)))
    again = r.execute(r.plan(bad), dry_run=False)
    assert (again.status, again.relaunched_as) == ("already-relaunched", out.relaunched_as)
    assert sources.admin.calls["RelaunchExecution"] == 1
    assert audit(tmp_path) == ["relaunched", "already-relaunched"]


def test_a_healthy_execution_is_refused_without_force(world, tmp_path):
    sources, _, good = world
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(good), dry_run=False)
    assert out.status == "refused"
    assert "not affected or suspected" in out.reason
    assert sources.admin.calls["RelaunchExecution"] == 0


def test_a_recheck_that_cannot_read_outputs_refuses(world, tmp_path):
    # outputs.pb unread proves nothing: a healthy run must not be relaunched on a guess.
    sources, bad, _ = world
    sources.store.fail("s3://meta/")
    r = relauncher(sources, tmp_path)
    plan = r.plan(bad)
    assert plan.verdict.startswith("inconclusive")
    assert r.execute(plan, dry_run=False).status == "refused"
    assert sources.admin.calls["RelaunchExecution"] == 0


def test_a_dry_run_sends_nothing_and_is_audited(world, tmp_path):
    sources, bad, _ = world
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(bad), dry_run=True)
    assert out.status == "dry-run"
    assert out.request == {"id": bad.as_dict(), "name": relaunch_name(bad), "overwrite_cache": True}
    assert sources.admin.calls["RelaunchExecution"] == 0
    assert audit(tmp_path) == ["dry-run"]
