"""The one way tests run the CLI: `forensics.cli.main` (the console script) in this process or a
child one, pointed at a sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from forensics.cli import main

if TYPE_CHECKING:
    from forensics.sandbox.stack import Sandbox

# The console script, as a child process runs it.
CLI = [sys.executable, "-m", "forensics"]


def exit_code(args: Sequence[str | Path]) -> int:
    """`elastic-audit ARGS` in this process: its exit code; its output goes where the caller's
    capture (capsys, a redirect) puts it."""
    with pytest.raises(SystemExit) as e:  # the entry point always exits, with the command's code
        main([str(a) for a in args])
    code = e.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


def run(args: Sequence[str | Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`elastic-audit ARGS` in this process: exit code, stdout, stderr (read from `capsys`)."""
    code = exit_code(args)
    out, err = capsys.readouterr()
    return code, out, err


def run_process(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
    **kwargs: object,
) -> subprocess.CompletedProcess[str]:
    """`elastic-audit ARGS` in a child process (for signals, process limits, a fresh interpreter):
    no stdin, text output; `env` replaces the environment (default: this one's)."""
    return subprocess.run(
        [*CLI, *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ if env is None else env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        **kwargs,  # type: ignore[arg-type]
    )


def use_sandbox(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every client of the CLI at `box` (its environment variables) until the test ends."""
    for name, value in box.env.items():
        monkeypatch.setenv(name, value)


def start_process(
    args: Sequence[str | Path], *, env: Mapping[str, str], cwd: Path
) -> subprocess.Popen[str]:
    """`elastic-audit ARGS` started in a child process (to signal it, or read it as it runs): no
    stdin, stdout and stderr piped as text."""
    return subprocess.Popen(
        [*CLI, *map(str, args)],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
