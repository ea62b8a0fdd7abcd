"""How a command's process ends: the ordinary way (`sys.exit`), with the command's code, its
output flushed, its exit handlers and the interpreter's teardown run; 130 and one line for a
Ctrl-C that came while the output was written; 1 and no traceback when nobody reads stdout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test starts a child process

_END_PROBE = """
import atexit, os, signal, sys, threading, time
from forensics.cli.process import end, finishing, interrupted

class Torn:
    def __del__(self):
        sys.__stderr__.write("torn down\\n")

TORN = Torn()  # a module global: freed in the interpreter's teardown
atexit.register(lambda: sys.__stderr__.write("exit handler\\n"))
sys.stdout.write("the report, not yet flushed")
case = sys.argv[1]
if case == "thread":  # not a daemon: Python waits for it
    threading.Thread(target=lambda: (time.sleep(0.3), sys.__stderr__.write("thread done\\n"))).start()
if case == "ctrl-c-in-exec":  # as in a dataclass being made while the CLI is imported
    try:
        exec("raise KeyboardInterrupt")
    except KeyboardInterrupt:
        sys.argv[2] = str(interrupted())
finishing()
if case == "ctrl-c":  # a Ctrl-C after the command's last line, before the output is out
    os.kill(os.getpid(), signal.SIGINT)
end(int(sys.argv[2]))
"""


def _end(
    case: str, code: int, tmp_path: Path, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """The probe run as `python -m forensics` is (`-m`: CPython's exit differs from `-c`'s),
    its stdout buffered (as a command's is, unless PYTHONUNBUFFERED says not)."""
    (tmp_path / "end_probe.py").write_text(_END_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-m", "end_probe", case, str(code)],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize(
    ("case", "code", "stderr"),
    [
        ("alone", 3, "exit handler\ntorn down\n"),
        ("thread", 0, "thread done\nexit handler\ntorn down\n"),  # Python waits for it
        ("ctrl-c", 0, "elastic-audit: interrupted\nexit handler\ntorn down\n"),
        ("ctrl-c-in-exec", 0, "elastic-audit: interrupted\nexit handler\ntorn down\n"),
    ],
)
def test_a_command_ends_the_ordinary_way_with_its_code_output_handlers_and_teardown(
    case, code, stderr, tmp_path
):
    """Its code (130 for a Ctrl-C after its last line, or one caught as it left an exec(), which
    CPython would turn into a death by SIGINT), its output flushed, its exit handlers and the
    interpreter's teardown run, and nothing else said."""
    p = _end(case, code, tmp_path, stdout=subprocess.PIPE)
    assert p.returncode == (130 if case.startswith("ctrl-c") else code)
    assert p.stdout == "the report, not yet flushed"
    assert p.stderr == stderr


def test_a_stdout_nobody_reads_ends_with_1_and_no_traceback(tmp_path):
    read, write = os.pipe()
    os.close(read)  # the reader is gone (`elastic-audit scan | head -1` once head is done)
    try:
        p = _end("alone", 0, tmp_path, stdout=write)
    finally:
        os.close(write)
    assert p.returncode == 1
    assert p.stderr == "exit handler\ntorn down\n"
