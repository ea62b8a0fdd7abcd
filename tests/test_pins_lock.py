"""pin-bump --lock with the real uv: stale uv.lock files, and a failing lock rolls back."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from pins_support import FORK_PIN, NEW_SHA, OLD_A, run_cli, snapshot

from forensics.pins import find_uv

UV = find_uv()


@pytest.fixture
def uv() -> str:
    # uv is a test dependency (the `test` extra); its absence is a broken setup, not a skip.
    assert UV, "uv is not installed: `pip install uv` (it ships in the test extra)"
    return UV


def _project(directory: Path, name: str, uv: str, env: dict[str, str]) -> None:
    """A uv project with a real uv.lock, then pinned to the fork at OLD_A."""
    directory.mkdir(parents=True)
    head = f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
    (directory / "pyproject.toml").write_text(head + "dependencies = []\n")
    subprocess.run([uv, "lock"], cwd=directory, env=env, check=True, capture_output=True)
    (directory / "pyproject.toml").write_text(head + f"dependencies = [\n  {FORK_PIN},\n]\n")


def _uv_env(tmp_path: Path) -> dict[str, str]:
    # Offline: uv cannot fetch the new commit's archive, so `uv lock` fails for real.
    return {
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
    }


def test_failing_uv_lock_rolls_every_file_back(tmp_path: Path, uv: str) -> None:
    root = tmp_path / "repo"
    env = {**os.environ, **_uv_env(tmp_path)}
    _project(root / "svc-a", "svc-a", uv, env)
    _project(root / "svc-b", "svc-b", uv, env)
    (root / "requirements.txt").write_text(FORK_PIN.strip('"') + "\n")
    before = snapshot(root)

    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--lock", env=_uv_env(tmp_path))

    assert proc.returncode == 2, proc.stderr
    assert f"uv lock failed in {root / 'svc-a'} (exit 1): error: Failed to download" in (
        proc.stderr
    )
    assert "every file was rolled back" in proc.stderr
    assert snapshot(root) == before  # pins, locks, requirements: bytes and mtimes
    assert OLD_A in (root / "svc-b/pyproject.toml").read_text()


def test_stale_locks_are_reported_without_lock_and_the_bump_is_kept(tmp_path: Path, uv) -> None:
    root = tmp_path / "repo"
    env = {**os.environ, **_uv_env(tmp_path)}
    _project(root / "svc-a", "svc-a", uv, env)
    lock_before = (root / "svc-a/uv.lock").read_bytes()
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["stale_locks"] == ["svc-a/uv.lock"] and summary["locked"] == []
    assert "uv.lock now stale: svc-a/uv.lock" in proc.stderr
    assert NEW_SHA in (root / "svc-a/pyproject.toml").read_text()
    assert (root / "svc-a/uv.lock").read_bytes() == lock_before
    check = subprocess.run(
        [uv, "lock", "--check"], cwd=root / "svc-a", env=env, capture_output=True, text=True
    )
    assert check.returncode != 0  # uv agrees: the lock no longer matches the pin


def test_lock_cannot_be_combined_with_dry_run(tmp_path: Path) -> None:
    proc = run_cli(NEW_SHA, "--root", str(tmp_path), "--lock", "--dry-run")
    assert proc.returncode == 2 and "--lock" in proc.stderr
