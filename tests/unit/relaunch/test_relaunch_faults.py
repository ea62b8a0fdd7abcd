"""`Relauncher` under Admin faults, against the in-process fakes (support/faulty.py): a lost
answer never becomes a second relaunch, and what cannot be checked is refused and audited. The
same through the CLI against the loopback Admin: tests/relaunch/test_reliability_relaunch.py."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from support.fakes import T0, execution, fake_sources, healthy, silent_green
from support.faulty import Faulty

from forensics.errors import SourceError
from forensics.relaunch import AuditLog, relaunch_name
from forensics.relaunch.relauncher import Relauncher

UNAVAILABLE = "UNAVAILABLE: failed to connect to all addresses"


def world():
    sources = fake_sources()
    bad = silent_green(sources).ref.execution
    good = healthy(sources).ref.execution
    admin = Faulty(sources.admin)
    return fake_sources(sources.settings, loki=sources.loki, admin=admin, store=sources.store), (
        bad,
        good,
    )


def actions(tmp_path) -> list[str]:
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [json.loads(line)["action"] for line in lines]


def relauncher(sources, tmp_path) -> Relauncher:
    return Relauncher.over(sources, AuditLog(tmp_path / "audit.jsonl"))


def test_a_relaunch_admin_performed_but_whose_answer_was_lost_is_never_sent_twice(tmp_path):
    sources, (bad, _) = world()
    sources.admin.fail(
        "relaunch",
        lambda: SourceError("admin", f"RelaunchExecution: {UNAVAILABLE}"),
        performed=True,
    )
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(bad), dry_run=False)
    assert out.status == "failed" and "UNAVAILABLE" in out.reason
    # The operator runs it again once Admin answers: the first relaunch is found, none added.
    again = r.execute(r.plan(bad), dry_run=False)
    assert (again.status, again.relaunched_as) == (
        "already-relaunched",
        replace(bad, name=relaunch_name(bad)),
    )
    assert sources.admin.calls["RelaunchExecution"] == 1
    assert actions(tmp_path) == ["failed", "already-relaunched"]


def test_a_console_relaunch_is_not_duplicated_when_admin_cannot_list_executions(tmp_path):
    sources, (bad, _) = world()
    earlier = execution(
        "c0n5o1er3l4u5n6c7h8x", mode="RELAUNCH", reference=bad, created=T0 + timedelta(hours=1)
    )
    sources.admin.inner.add(earlier)
    sources.admin.inner.fail("ListExecutions", UNAVAILABLE)
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(bad), dry_run=False)
    assert out.status == "failed" and "could not check for an existing relaunch" in out.reason
    assert sources.admin.calls["RelaunchExecution"] == 0
    assert actions(tmp_path) == ["failed"]


def test_admin_down_during_the_recheck_refuses_each_execution_with_an_audit_line(tmp_path):
    sources, (bad, good) = world()
    sources.admin.inner.fail("GetExecution", f"DEADLINE_EXCEEDED: {UNAVAILABLE}")
    sources.admin.inner.fail("ListNodeExecutions", f"DEADLINE_EXCEEDED: {UNAVAILABLE}")
    r = relauncher(sources, tmp_path)
    outs = [r.execute(r.plan(ref), dry_run=False) for ref in (bad, good)]
    assert [o.status for o in outs] == ["failed", "failed"]
    assert all("re-check failed" in o.reason for o in outs)
    assert sources.admin.calls["RelaunchExecution"] == 0
    assert actions(tmp_path) == ["failed", "failed"]
