"""pin-bump under interruption: all files or none, whatever happens between plan and write.

Covered elsewhere and not repeated (see RELIABILITY.md): a read-only file refused before
writing, a write failing mid-way (EFBIG) with every file restored, `uv lock` failing after the
rewrite (tests/pinbump/test_pins_rewrite.py, tests/pinbump/test_pins_lock.py), GitHub 5xx/timeouts/unreachable
(tests/pinbump/test_pins_github.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.github_server import Fault, serve_github, serve_github_archives
from support.pins import CHANGED, NEW_SHA, _cli_env, build_tree, fork_network, run_cli, snapshot

from forensics.pinbump.lock import find_uv


@pytest.fixture
def tree(tmp_path: Path):
    return build_tree(tmp_path)


@pytest.mark.e2e
def test_a_file_edited_while_the_commit_is_verified_refuses_and_writes_nothing(tree) -> None:
    # GitHub answers slowly; meanwhile a colleague saves a change to one of the files the plan
    # was computed from. Writing now would overwrite that edit with a stale rewrite.
    state, _ = fork_network()
    state.faults.append(Fault(r"/compare/", status=None, delay=1.5))
    edited = tree.root / CHANGED[1]
    with serve_github(state) as gh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "forensics", "pin-bump", NEW_SHA, "--root", str(tree.root)],
            env=_cli_env({"GITHUB_API_URL": gh.url}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not any("/compare/" in r.path for r in state.requests):
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
            edited.write_text(edited.read_text() + "# added while pin-bump was verifying\n")
            before = snapshot(tree.base)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 2, stderr
    assert "changed since it was read; nothing written" in stderr and "Traceback" not in stderr
    assert snapshot(tree.base) == before  # the colleague's edit stands, nothing else moved


@pytest.mark.integration
def test_ctrl_c_between_two_file_writes_puts_every_file_back(tree, monkeypatch) -> None:
    # Injection (in-process, at the OS boundary): the second os.replace into the tree lands,
    # then a KeyboardInterrupt is raised, as a Ctrl-C arriving right after it would be.
    before = snapshot(tree.base)
    real_replace = os.replace
    landed: list[str] = []

    def replace_then_ctrl_c(src, dst, *args, **kwargs):
        real_replace(src, dst, *args, **kwargs)
        if str(dst).startswith(str(tree.root)):
            landed.append(str(dst))
            if len(landed) == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace_then_ctrl_c)
    result = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify")
    monkeypatch.undo()
    assert len(landed) >= 2  # two files were really replaced before the interrupt
    assert result.returncode == 130, result.stderr
    assert "interrupted" in result.stderr and "Traceback" not in result.stderr
    assert snapshot(tree.base) == before  # bytes and mtimes; no temporary file left


@pytest.mark.e2e
def test_ctrl_c_while_uv_locks_puts_pins_and_locks_back(tmp_path) -> None:
    # Real uv, fetching the new archive through the loopback HTTPS host, which holds the
    # download; the Ctrl-C reaches pin-bump while it waits for uv.
    from test_pins_lock import _project

    uv = find_uv()
    assert uv, "uv is not installed: `pip install uv` (it ships in the test extra)"
    state, _ = fork_network()
    with serve_github_archives(state) as archives:
        env = {
            **archives.env,
            "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
            "UV_NO_CONFIG": "1",
            "UV_PYTHON_DOWNLOADS": "never",
        }
        root = tmp_path / "repo"
        for name in ("svc-a", "svc-b"):
            _project(root / name, uv, env)
        before = snapshot(root)
        state.faults.append(Fault(rf"/archive/{NEW_SHA}\.tar\.gz", status=None, delay=5.0))
        cmd = [sys.executable, "-m", "forensics", "pin-bump", NEW_SHA, "--root", str(root)]
        proc = subprocess.Popen(
            [*cmd, "--no-verify", "--lock"],
            env=_cli_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not any(NEW_SHA in r.path for r in state.requests):
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.02)
            assert f"archive/{NEW_SHA}" not in (root / "svc-a/uv.lock").read_text()
            assert NEW_SHA in (root / "svc-a/pyproject.toml").read_text()  # pins were written
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert snapshot(root) == before  # pyproject.toml and uv.lock of both projects, as they were
