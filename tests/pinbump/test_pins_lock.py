"""pin-bump --lock with the real uv against loopback archives: re-lock, and roll back on failure.

uv fetches `https://github.com/exa-labs/flytekit/archive/<sha>.tar.gz` through the sandbox's
HTTPS proxy, which serves the fork network's archives (404 for unknown commits) and refuses every
other host, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.github_server import ArchiveHost, serve_github_archives
from support.pins import FORK_PIN, NEW_SHA, OLD_A, fork_network, run_cli, snapshot

from forensics.pinbump.lock import find_uv

UV = find_uv()


@pytest.fixture
def uv() -> str:
    # uv is a test dependency (the `test` extra); its absence is a broken setup, not a skip.
    assert UV, "uv is not installed: `pip install uv` (it ships in the test extra)"
    return UV


@pytest.fixture
def archives() -> Iterator[ArchiveHost]:
    state, _ = fork_network()
    with serve_github_archives(state) as host:
        yield host


@pytest.fixture
def uv_env(tmp_path: Path, archives: ArchiveHost) -> dict[str, str]:
    return {
        **archives.env,
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
    }


def _project(directory: Path, uv: str, env: dict[str, str], *extra: str) -> None:
    """A uv project with a real uv.lock at the old pin (OLD_A)."""
    directory.mkdir(parents=True)
    deps = "".join(f'  "{d}",\n' for d in extra)
    (directory / "pyproject.toml").write_text(
        f'[project]\nname = "{directory.name}"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        f"dependencies = [\n  {FORK_PIN},\n{deps}]\n"
    )
    if not extra:
        run = subprocess.run(
            [uv, "lock"], cwd=directory, env={**os.environ, **env}, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
    else:  # cannot resolve (that is the point): a lock from before the extra requirement
        (directory / "uv.lock").write_text('version = 1\nrequires-python = ">=3.10"\n')


def _uv(uv: str, directory: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [uv, *args], cwd=directory, env={**os.environ, **env}, capture_output=True, text=True
    )


@pytest.mark.e2e
def test_lock_relocks_every_stale_lock_against_the_new_archive(
    tmp_path: Path, uv: str, uv_env: dict[str, str], archives: ArchiveHost
) -> None:
    root = tmp_path / "repo"
    for name in ("svc-a", "svc-b"):
        _project(root / name, uv, uv_env)
        assert f"archive/{OLD_A}.tar.gz" in (root / name / "uv.lock").read_text()

    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--lock", "-o", "json", env=uv_env)

    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["stale_locks"] == ["svc-a/uv.lock", "svc-b/uv.lock"]
    assert summary["locked"] == ["svc-a", "svc-b"]
    for name in ("svc-a", "svc-b"):
        lock = (root / name / "uv.lock").read_text()
        assert f"archive/{NEW_SHA}.tar.gz" in lock and OLD_A not in lock
        assert _uv(uv, root / name, uv_env, "lock", "--check").returncode == 0
    fetched = f"https://github.com/exa-labs/flytekit/archive/{NEW_SHA}.tar.gz"
    assert fetched in [r.path for r in archives.state.requests]


@pytest.mark.e2e
def test_failing_lock_rolls_back_every_file_including_locks_already_rewritten(
    tmp_path: Path, uv: str, uv_env: dict[str, str]
) -> None:
    root = tmp_path / "repo"
    _project(root / "svc-a", uv, uv_env)  # locks fine
    # svc-b also asks for a version the fork's archive does not have: uv fetches the new
    # archive, reads its metadata (1.16.31) and finds no solution.
    _project(root / "svc-b", uv, uv_env, "flytekitplugins-kfpytorch>=99")
    (root / "requirements.txt").write_text(FORK_PIN.strip('"') + "\n")
    before = snapshot(root)

    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--lock", env=uv_env)

    assert proc.returncode == 2, proc.stderr
    assert f"uv lock failed in {root / 'svc-b'} (exit 1): error: No solution found" in (proc.stderr)
    assert "every file was rolled back" in proc.stderr
    # svc-a's uv.lock had been rewritten by a successful `uv lock`: it is back as well.
    assert snapshot(root) == before


@pytest.mark.e2e
def test_lock_for_a_commit_github_does_not_serve_fails_and_rolls_back(
    tmp_path: Path, uv: str, uv_env: dict[str, str]
) -> None:
    root = tmp_path / "repo"
    _project(root / "svc-a", uv, uv_env)
    before = snapshot(root)
    unknown = "ab" * 20
    proc = run_cli(unknown, "--root", str(root), "--no-verify", "--lock", env=uv_env)
    assert proc.returncode == 2, proc.stderr
    assert "404" in proc.stderr and "every file was rolled back" in proc.stderr
    assert snapshot(root) == before


@pytest.mark.e2e
def test_stale_lock_is_reported_and_uv_agrees_it_is_stale(
    tmp_path: Path, uv: str, uv_env: dict[str, str]
) -> None:
    root = tmp_path / "repo"
    _project(root / "svc-a", uv, uv_env)
    lock_before = (root / "svc-a/uv.lock").read_bytes()
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "-o", "json", env=uv_env)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["stale_locks"] == ["svc-a/uv.lock"] and summary["locked"] == []
    assert "uv.lock now stale: svc-a/uv.lock" in proc.stderr
    assert (root / "svc-a/uv.lock").read_bytes() == lock_before
    check = _uv(uv, root / "svc-a", uv_env, "lock", "--check")
    assert check.returncode == 1 and "needs to be updated" in check.stderr


def test_lock_cannot_be_combined_with_dry_run(tmp_path: Path) -> None:
    proc = run_cli(NEW_SHA, "--root", str(tmp_path), "--lock", "--dry-run")
    assert proc.returncode == 2 and "--lock" in proc.stderr
