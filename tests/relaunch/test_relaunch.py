"""relaunch through the sandbox's Admin: exactly once, confirmed, audited, never RecoverExecution."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.cli import run, use_sandbox
from support.operators import at_once
from support.scan import CONFIG, WINDOW

from forensics.model import ExecutionRef
from forensics.relaunch import AuditLog, RelaunchOutcome, relaunch_name
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox

INCIDENT = ExecutionRef("gs1", "production", "azvg5f9v9974m78fvlf7")
MULTI = ExecutionRef("gs1", "production", "bq7k2m9x4c8d1f6h3j5n")
HEALTHY = ExecutionRef("gs1", "production", "k5l9z3x7c1v5b9n3m7q1")
ALREADY = ExecutionRef("gs1", "development", "c3p8r2w6y1t5u9e4o7i0")
MUTATING = ("RelaunchExecution", "RecoverExecution", "CreateExecution", "TerminateExecution")


@pytest.fixture
def box(tmp_path, monkeypatch):
    with sandbox(reference_scenario()) as b:
        use_sandbox(b, monkeypatch)
        (tmp_path / "elastic-audit.toml").write_text(CONFIG)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        yield b
        assert b.admin.call_counts()["RecoverExecution"] == 0  # never, in any test


def audit_lines(tmp_path: Path) -> list[dict]:
    path = tmp_path / "state" / "elastic-audit" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def relaunch(capsys, *args: str) -> tuple[int, list[dict] | str, str]:
    code, out, err = run(["relaunch", *args], capsys)
    try:
        return code, json.loads(out), err
    except json.JSONDecodeError:
        return code, out, err


def mutations(box) -> int:
    counts = box.admin.call_counts()
    return sum(counts[m] for m in MUTATING)


@pytest.mark.integration
def test_relaunch_of_the_reference_incident_happens_once_without_needless_overwrite_cache(
    box, capsys, tmp_path
):
    code, out, _ = relaunch(capsys, str(INCIDENT), "--yes", "-o", "json")
    assert code == 0
    (result,) = out
    assert result["status"] == "relaunched"
    assert result["relaunched_as"] == {**INCIDENT.as_dict(), "name": relaunch_name(INCIDENT)}
    (request,) = box.admin.calls_of("RelaunchExecution")
    # nothing cacheable at or after the lost node: overwrite_cache would only recompute
    assert request.overwrite_cache is False and request.name == relaunch_name(INCIDENT)
    assert request.id.name == INCIDENT.name
    assert box.admin.relaunches_of(INCIDENT) == [ExecutionRef(**result["relaunched_as"])]
    (line,) = audit_lines(tmp_path)
    assert line["action"] == "relaunched" and line["original"] == INCIDENT.as_dict()
    assert line["new_execution"] == result["relaunched_as"]
    assert line["request"]["overwrite_cache"] is False and line["user"] and line["host"]
    assert "empty" in result["reason"]  # what the relaunch will find: an empty checkpoint

    # Run again: no second execution, the first relaunch reported.
    code, out, _ = relaunch(capsys, str(INCIDENT), "--yes", "-o", "json")
    assert code == 0 and out[0]["status"] == "already-relaunched"
    assert out[0]["relaunched_as"] == result["relaunched_as"]
    assert len(box.admin.relaunches_of(INCIDENT)) == 1
    assert len(box.admin.calls_of("RelaunchExecution")) == 1
    assert [entry["action"] for entry in audit_lines(tmp_path)] == [
        "relaunched",
        "already-relaunched",
    ]


@pytest.mark.integration
def test_a_lost_response_is_retried_without_a_second_execution(box, capsys, tmp_path):
    box.admin.faults.lose_relaunch_response = 1  # Admin performs it, the answer never arrives
    code, out, _ = relaunch(capsys, str(MULTI), "--yes", "-o", "json")
    assert code == 0
    # The call that created it says so — in the output and in the audit log.
    assert out[0]["status"] == "relaunched"
    assert out[0]["relaunched_as"]["name"] == relaunch_name(MULTI)
    assert len(box.admin.relaunches_of(MULTI)) == 1
    assert len(box.admin.calls_of("RelaunchExecution")) == 2  # the call and its retry
    (line,) = audit_lines(tmp_path)
    assert line["action"] == "relaunched" and line["after_retry"] is True
    assert line["new_execution"] == out[0]["relaunched_as"]
    code, out, _ = relaunch(capsys, str(MULTI), "--yes", "-o", "json")
    assert code == 0 and out[0]["status"] == "already-relaunched"
    assert [x["action"] for x in audit_lines(tmp_path)] == ["relaunched", "already-relaunched"]


@pytest.mark.e2e
def test_two_operators_at_once_create_one_execution(box, tmp_path):
    env = box.child_environ()
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    cmd = [
        sys.executable,
        "-m",
        "forensics",
        "relaunch",
        str(INCIDENT),
        "--yes",
        "-o",
        "json",
        "--config",
        str(tmp_path / "elastic-audit.toml"),
    ]
    assert at_once(cmd, env) == ["already-relaunched", "relaunched"]
    assert len(box.admin.relaunches_of(INCIDENT)) == 1
    assert len(audit_lines(tmp_path)) == 2


@pytest.mark.integration
def test_dry_run_prints_the_exact_request_and_mutates_nothing(box, capsys, tmp_path):
    code, out, _ = relaunch(capsys, str(INCIDENT), "--dry-run", "-o", "json")
    assert code == 0 and mutations(box) == 0
    assert out[0]["status"] == "dry-run" and out[0]["relaunched_as"] is None
    assert out[0]["request"] == {
        "id": INCIDENT.as_dict(),
        "name": relaunch_name(INCIDENT),
        "overwrite_cache": False,
    }
    assert audit_lines(tmp_path)[0]["action"] == "dry-run"


@pytest.mark.integration
def test_a_healthy_execution_is_refused_without_force(box, capsys, tmp_path):
    code, out, _ = relaunch(capsys, str(HEALTHY), "--yes", "-o", "json")
    assert code == 1 and mutations(box) == 0
    assert out[0]["status"] == "refused" and "not affected" in out[0]["reason"]
    assert audit_lines(tmp_path)[0]["action"] == "refused"
    code, out, _ = relaunch(capsys, str(HEALTHY), "--yes", "--force", "-o", "json")
    assert code == 0 and out[0]["status"] == "relaunched"
    assert len(box.admin.calls_of("RelaunchExecution")) == 1


@pytest.mark.integration
def test_an_unknown_execution_is_a_usage_error_with_nothing_done(box, capsys, tmp_path):
    # a typo, as `show` treats it (docs/exit-codes.md): exit 2, nothing sent, nothing audited
    code, out, err = relaunch(capsys, "gs1:production:doesnotexist0000000a", "--yes", "-o", "json")
    assert code == 2 and out == "" and "not found in Flyte Admin" in err
    assert mutations(box) == 0 and audit_lines(tmp_path) == []


@pytest.mark.integration
def test_from_report_relaunches_affected_and_suspected_once_each(box, capsys, tmp_path):
    report = tmp_path / "incident.json"
    code, _, _ = run(["scan", *WINDOW, "-o", "json", "--report", str(report)], capsys)
    assert code == 1
    code, out, _ = relaunch(capsys, "--from-report", str(report), "--dry-run", "-o", "json")
    assert code == 0 and mutations(box) == 0
    by_name = {r["execution"]["name"]: r["status"] for r in out}
    assert (
        by_name.pop(ALREADY.name) == "already-relaunched"
    )  # relaunched before the incident review
    assert set(by_name.values()) == {"dry-run"} and len(by_name) == 5


@pytest.mark.integration
def test_no_prompt_without_a_terminal_and_without_yes(box, capsys, tmp_path):
    code, out, err = run(["relaunch", str(INCIDENT)], capsys)
    assert code == 2 and "--yes" in err and out == ""
    assert mutations(box) == 0 and audit_lines(tmp_path) == []


@pytest.mark.integration
@pytest.mark.parametrize(
    "content,fragment",
    [
        ("not json", "not JSON"),
        ('{"schema_version": 2, "findings": []}', "not an elastic-audit scan report"),
        ("[1, 2]", "not an elastic-audit scan report"),
        ('{"schema_version": 1, "findings": [{"verdict": "affected"}]}', "has no execution"),
    ],
)
def test_from_report_refuses_what_is_not_a_report(box, capsys, tmp_path, content, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _out, err = run(["relaunch", "--from-report", str(bad), "--yes"], capsys)
    assert code == 2 and fragment in err and "Traceback" not in err
    assert mutations(box) == 0


@pytest.mark.integration
def test_admin_failure_is_exit_3_and_audited(box, capsys, tmp_path):
    import grpc

    box.admin.faults.fail_next("RelaunchExecution", times=10, code=grpc.StatusCode.INTERNAL)
    code, out, _ = relaunch(capsys, str(INCIDENT), "--yes", "-o", "json")
    assert code == 3 and out[0]["status"] == "failed"
    assert audit_lines(tmp_path)[-1]["action"] == "failed"
    assert box.admin.relaunches_of(INCIDENT) == []


def _append_many(args: tuple[str, int]) -> None:
    path, n = args
    log = AuditLog(Path(path))
    for i in range(n):
        log.append(RelaunchOutcome(INCIDENT, "dry-run", None, "x" * (i % 7000), {"i": i}))


def test_concurrent_audit_writers_never_interleave(tmp_path):
    from multiprocessing import get_context

    path = tmp_path / "audit.jsonl"
    with get_context("spawn").Pool(4) as pool:
        pool.map(_append_many, [(str(path), 200)] * 4)
    lines = path.read_text().splitlines()
    assert len(lines) == 800
    assert all(json.loads(line)["action"] == "dry-run" for line in lines)


@pytest.mark.integration
def test_a_recheck_that_cannot_read_outputs_refuses_instead_of_relaunching_a_healthy_run(
    box, capsys
):
    from forensics.sandbox.s3_server import S3Faults, S3Rule

    box.s3.faults = S3Faults(access_denied=[S3Rule(bucket="flyte-metadata")])
    code, out, _ = relaunch(capsys, str(HEALTHY), "--yes", "-o", "json")
    assert code == 1 and mutations(box) == 0
    assert out[0]["status"] == "refused" and "inconclusive" in out[0]["reason"]
    assert "forbidden" in out[0]["reason"]
