"""Ctrl-C at any moment — while the CLI and flytekit are imported, during the scan, while the
result is written — exits 130 with one line on stderr, no traceback and no half-written file;
an output path that cannot be written is refused before the scan sends anything.

Each run is `python -m forensics` in a child process against the sandbox, sent a real SIGINT.
"""

from __future__ import annotations

import fcntl
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import run_process, start_process
from support.scan import WINDOW
from support.terminal import clean_env, one_error_line, work_dir

from forensics.sandbox.loki_server import FaultRule

pytestmark = pytest.mark.e2e

INTERRUPTED = "elastic-audit: interrupted\n"
INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


def _interrupted(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == INTERRUPTED, err  # one line: no traceback, no "aborted", nothing else
    return out, err


@pytest.mark.parametrize(
    "command",
    [
        ["scan", *WINDOW, "-o", "json", "--no-progress", "--report", "{out}/r.json"],
        ["show", INCIDENT, "-o", "json"],
        ["relaunch", INCIDENT, "--dry-run", "-o", "json", "--audit-log", "{out}/audit.jsonl"],
    ],
    ids=["scan", "show", "relaunch"],
)
def test_ctrl_c_while_the_cli_and_flytekit_are_imported_exits_130(box, work, tmp_path, command):
    """Every 0.1 s from 0.3 s to 1.5 s: the CLI's imports, the settings, flytekit's import
    (whose own SIGINT handler exits 1), the sources opening. Loki stalls, so the command is
    never done before the signal. (Before 0.1 s the interpreter runs site-packages' own start-up
    hooks, the editable install's finder among them: no code of the tool's has run yet.)"""
    stall = FaultRule("timeout", count="always", sleep=30)
    box.loki.faults.rules.append(stall)
    env = box.child_environ(clean_env(tmp_path))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = [a.format(out=out_dir) for a in command]
    try:
        for tenth in range(3, 16):
            proc = start_process(args, env=env, cwd=work)
            time.sleep(tenth / 10)
            assert proc.poll() is None, proc.communicate()
            out, _ = _interrupted(proc)
            assert out == ""
            # no report, no temporary file; an audit log holds no half line
            for f in out_dir.iterdir():
                assert f.name == "audit.jsonl", f"at {tenth / 10} s: {f}"
                assert f.read_text() == "" or f.read_text().endswith("\n")
    finally:
        box.loki.faults.rules.remove(stall)


def test_ctrl_c_during_the_scan_exits_130(box, work, tmp_path):
    stall = FaultRule("timeout", count="always", sleep=30)
    box.loki.faults.rules.append(stall)
    env = box.child_environ(clean_env(tmp_path))
    try:
        proc = start_process(["scan", *WINDOW, "-o", "json", "--no-progress"], env=env, cwd=work)
        deadline = time.monotonic() + 60
        while not stall.fired:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        out, _ = _interrupted(proc)
        assert out == ""
    finally:
        box.loki.faults.rules.remove(stall)


def test_ctrl_c_while_the_result_is_written_exits_130_and_leaves_whole_files(box, work, tmp_path):
    """stdout is a pipe of one page nobody reads yet: the report file is written, then the
    command blocks writing the report to stdout, and gets Ctrl-C there."""
    env = box.child_environ(clean_env(tmp_path))
    out_dir = tmp_path / "reports"
    out_dir.mkdir()
    report = out_dir / "r.json"
    args = ["scan", *WINDOW, "-o", "json", "--no-progress", "--report", str(report)]
    proc = start_process(args, env=env, cwd=work)
    assert proc.stdout is not None
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    deadline = time.monotonic() + 120
    while not report.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    time.sleep(0.5)  # writing stdout, blocked on the full pipe
    assert proc.poll() is None
    _interrupted(proc)
    assert json.loads(report.read_text())["findings"]  # whole
    assert [p.name for p in out_dir.iterdir()] == ["r.json"]  # no temporary file left


@pytest.mark.parametrize(
    "flag",
    ["--report", "--report-html", "--metrics-file", "--state"],
)
def test_an_output_path_that_cannot_be_written_is_refused_before_the_scan(
    box, work, tmp_path, flag
):
    """/sys refuses a new file even to root (os.access says yes there): the check creates one,
    as the write will. Refused with one line, exit 2, and not one request to Loki or Admin."""
    env = box.child_environ(clean_env(tmp_path))
    start = time.monotonic()  # (requests stalled by an earlier test are recorded when answered)
    admin_before = len(box.admin.calls)
    r = run_process(
        "scan", *WINDOW, "-o", "json", flag, "/sys/elastic-audit.out", env=env, cwd=work
    )
    one_error_line(r, f"{flag} /sys/elastic-audit.out: directory /sys is not writable")
    assert r.stdout == ""
    assert [r for r in box.loki.requests.snapshot() if r.at >= start] == []
    assert len(box.admin.calls) == admin_before
