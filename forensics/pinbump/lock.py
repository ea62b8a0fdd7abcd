"""`pin-bump --lock`: the real `uv lock` beside each lock the bump made stale, all or nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import ElasticAuditError
from forensics.fsutil import FileSet


class LockError(ElasticAuditError):
    """`uv lock` failed for a project; every file was put back as it was (exit 2)."""


def find_uv() -> str | None:
    """The `uv` executable: on PATH, else beside the running interpreter (a venv's bin)."""
    return shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


@dataclass(frozen=True)
class LockRun:
    """One `uv lock` run: the project directory and uv's output."""

    directory: Path
    returncode: int
    output: str


def _uv_error(output: str) -> str:
    """uv's `error:` line and its causes on one line (uv prints progress before them)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.startswith("error:")), 0)
    text = " ".join(lines[start:]) or "no output"
    return text if len(text) <= 400 else text[:397] + "..."


def _uv_lock(uv: str, lock: Path, timeout: float) -> LockRun:
    try:
        proc = subprocess.run(
            [uv, "lock"],
            cwd=lock.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return LockRun(lock.parent, -1, str(e))
    return LockRun(lock.parent, proc.returncode, (proc.stderr or proc.stdout).strip())


def lock_projects(
    locks: Sequence[Path], applied: FileSet, *, uv: str, timeout: float = 600.0
) -> list[LockRun]:
    """Run `uv lock` beside each stale lock; on any failure put every file back and raise."""
    snapshot = FileSet.snapshot(locks, suffix=".pin-bump")  # uv rewrites them in place
    runs: list[LockRun] = []
    for lock in locks:
        try:
            run = _uv_lock(uv, lock, timeout)
        except BaseException:  # Ctrl-C while uv runs: no half-locked tree either
            snapshot.restore()
            applied.restore()
            raise
        runs.append(run)
        if run.returncode != 0:
            failed = snapshot.restore() + applied.restore()
            msg = (
                f"uv lock failed in {lock.parent} (exit {run.returncode}): {_uv_error(run.output)}"
            )
            if failed:
                raise LockError(f"{msg}; COULD NOT RESTORE: {', '.join(map(str, failed))}")
            raise LockError(f"{msg}; every file was rolled back")
    return runs
