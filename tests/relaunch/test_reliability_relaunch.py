"""relaunch under faults: never a second execution, always an audit line for what was attempted.

Covered elsewhere and not repeated here (see RELIABILITY.md): a lost response retried within
one run, two operators at once, Admin failing the call outright (tests/relaunch/test_relaunch.py).

Ctrl-C is a real SIGINT sent to `python -m forensics relaunch` running on a pseudo-terminal (so
it asks for confirmation as it would for an operator); "y" is typed, and the signal is sent
once the sandbox Admin has received RelaunchExecution and holds it (injected latency). Whether
Admin then performs the call the client abandoned depends on the server: the sandbox does by
default, and with `drop_cancelled` behaves like a Go server whose cancelled context aborts.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from support.cli import run, use_sandbox

from forensics.model import ExecutionRef
from forensics.relaunch import relaunch_name
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

INCIDENT = ExecutionRef("gs1", "production", "azvg5f9v9974m78fvlf7")
MULTI = ExecutionRef("gs1", "production", "bq7k2m9x4c8d1f6h3j5n")
CONSOLE_RELAUNCHED = ExecutionRef("gs1", "development", "c3p8r2w6y1t5u9e4o7i0")
CONSOLE_RELAUNCH = ExecutionRef("gs1", "development", "d5a1s9d3f7g2h6j0k4l8")
PROMPT = b"Relaunch 1 execution(s)?"
CONFIG = """
[flyte]
retries = {retries}
retry_backoff = 0.01
[loki]
retries = 1
retry_backoff = 0.01
[checkpoints]
input = "checkpoint_dir"
"""


@pytest.fixture
def box(tmp_path, monkeypatch):
    with sandbox(reference_scenario()) as b:
        use_sandbox(b, monkeypatch)
        (tmp_path / "elastic-audit.toml").write_text(CONFIG.format(retries=2))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        yield b
        assert b.admin.call_counts()["RecoverExecution"] == 0


def audit(tmp_path: Path) -> list[dict]:
    path = tmp_path / "state" / "elastic-audit" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def relaunch(capsys, *args: str) -> tuple[int, list[dict], str]:
    code, out, err = run(["relaunch", *args, "-o", "json"], capsys)
    assert "Traceback" not in err
    return code, json.loads(out), err


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


# -- Admin fails after performing ------------------------------------------------------------


def test_admin_that_performs_the_relaunch_then_fails_never_gets_a_second_one(box, capsys, tmp_path):
    # No retry budget: the lost answer is the last word of this run.
    (tmp_path / "elastic-audit.toml").write_text(CONFIG.format(retries=0))
    box.admin.faults.lose_relaunch_response = 1
    code, (out,), _ = relaunch(capsys, str(INCIDENT), "--yes")
    assert code == 3 and out["status"] == "failed" and "UNAVAILABLE" in out["reason"]
    (performed,) = box.admin.relaunches_of(INCIDENT)  # Admin did it; the tool could not know
    assert [a["action"] for a in audit(tmp_path)] == ["failed"]

    # The operator reruns once Admin answers: the first relaunch is reported, none is added.
    (tmp_path / "elastic-audit.toml").write_text(CONFIG.format(retries=2))
    code, (out,), _ = relaunch(capsys, str(INCIDENT), "--yes")
    assert code == 0 and out["status"] == "already-relaunched"
    assert out["relaunched_as"] == performed.as_dict()
    assert box.admin.relaunches_of(INCIDENT) == [performed]
    assert len(box.admin.calls_of("RelaunchExecution")) == 1  # found by name, not re-sent
    assert [a["action"] for a in audit(tmp_path)] == ["failed", "already-relaunched"]


def test_a_console_relaunch_is_not_duplicated_when_admin_cannot_list_executions(
    box, capsys, tmp_path
):
    # Relaunched earlier from the console, under a name this tool did not choose: only a
    # listing finds it. With ListExecutions down the tool must not guess.
    box.admin.faults.fail_next("ListExecutions", times=1000)
    code, (out,), _ = relaunch(capsys, str(CONSOLE_RELAUNCHED), "--yes")
    assert code == 3 and out["status"] == "failed"
    assert "could not check for an existing relaunch" in out["reason"]
    assert box.admin.calls_of("RelaunchExecution") == []
    assert box.admin.relaunches_of(CONSOLE_RELAUNCHED) == [CONSOLE_RELAUNCH]
    (line,) = audit(tmp_path)
    assert line["action"] == "failed" and line["new_execution"] is None


def test_admin_down_during_the_recheck_fails_each_execution_with_an_audit_line(
    box, capsys, tmp_path
):
    box.admin.faults.fail_next("GetExecution", times=1000, code=grpc.StatusCode.DEADLINE_EXCEEDED)
    code, out, _ = relaunch(capsys, str(INCIDENT), str(MULTI), "--yes")
    assert code == 3
    assert [o["status"] for o in out] == ["failed", "failed"]
    assert all("re-check failed" in o["reason"] for o in out)
    assert box.admin.calls_of("RelaunchExecution") == []
    assert [(a["action"], a["original"]["name"]) for a in audit(tmp_path)] == [
        ("failed", INCIDENT.name),
        ("failed", MULTI.name),
    ]


# -- Ctrl-C ------------------------------------------------------------------------------------


class Operator:
    """`elastic-audit relaunch` on a pseudo-terminal: it prompts, we answer, we press Ctrl-C."""

    def __init__(self, box, tmp_path: Path, ref: ExecutionRef) -> None:
        master, slave = pty.openpty()
        env = box.child_environ() | {"XDG_STATE_HOME": str(tmp_path / "state")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "forensics", "relaunch", str(ref), "-o", "json"],
            env=env,
            cwd=tmp_path,
            stdin=slave,
            stderr=slave,
            stdout=subprocess.PIPE,
            text=True,
        )
        os.close(slave)
        self.master = master
        self.screen = b""

    def read_until(self, text: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            assert self.proc.poll() is None, self.screen.decode(errors="replace")
            assert time.monotonic() < deadline, self.screen.decode(errors="replace")
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                self.screen += os.read(self.master, 4096)

    def type(self, text: bytes) -> None:
        os.write(self.master, text)

    def ctrl_c(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def finish(self) -> tuple[int, str, str]:
        stdout, _ = self.proc.communicate(timeout=60)
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            self.screen += chunk
        os.close(self.master)
        return self.proc.returncode, stdout, self.screen.decode(errors="replace")


@pytest.mark.parametrize("admin_performs", [True, False], ids=["admin-performs", "admin-drops"])
def test_ctrl_c_between_confirmation_and_answer_is_audited_and_never_doubles(
    box, capsys, tmp_path, admin_performs
):
    box.admin.faults.latency_by_method["RelaunchExecution"] = 1.5
    box.admin.faults.drop_cancelled = not admin_performs
    op = Operator(box, tmp_path, INCIDENT)
    try:
        op.read_until(PROMPT)
        op.type(b"y\n")
        wait_for(lambda: box.admin.calls_of("RelaunchExecution"))  # sent, held by Admin
        op.ctrl_c()
        code, stdout, screen = op.finish()
    finally:
        op.proc.kill()
    assert code == 130 and stdout == ""
    assert "interrupted" in screen and "Traceback" not in screen
    (line,) = audit(tmp_path)
    assert line["action"] == "failed" and "interrupted; rerun to confirm" in line["result"]
    assert line["request"]["name"] == relaunch_name(INCIDENT)

    time.sleep(2.0)  # Admin's held call has ended, performed or dropped
    performed = box.admin.relaunches_of(INCIDENT)
    assert len(performed) == (1 if admin_performs else 0)

    # The rerun the audit line asks for: exactly one execution either way.
    box.admin.faults.latency_by_method.clear()
    code, (out,), _ = relaunch(capsys, str(INCIDENT), "--yes")
    assert code == 0
    assert out["status"] == ("already-relaunched" if admin_performs else "relaunched")
    (only,) = box.admin.relaunches_of(INCIDENT)
    assert only.name == relaunch_name(INCIDENT)
    assert [a["action"] for a in audit(tmp_path)] == ["failed", out["status"]]


def test_ctrl_c_at_the_prompt_relaunches_nothing(box, tmp_path):
    op = Operator(box, tmp_path, INCIDENT)
    try:
        op.read_until(PROMPT)
        op.ctrl_c()
        code, stdout, screen = op.finish()
    finally:
        op.proc.kill()
    assert code == 130 and stdout == "" and "Traceback" not in screen
    assert box.admin.calls_of("RelaunchExecution") == []
    assert box.admin.relaunches_of(INCIDENT) == []
    assert audit(tmp_path) == []  # nothing was decided, nothing was sent
