"""`fix apply` on one PyPI release of every affected minor line (1.10-1.16) and flytekit master.

The sdists are small (~20 kB) and cached in pytest's cache directory; the first run downloads
seven of them (a few seconds). Master comes from a GitHub snapshot of flyteorg/flytekit, which CI
cannot fetch: that test runs when ELASTIC_AUDIT_FLYTEKIT_GIT names one (a git directory or a
checkout) and otherwise skips saying so.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.fix import (
    TEST_FILE,
    cache_dir,
    cli_json,
    download_sdist,
    run_cli,
    snapshot,
    task_py,
    unpack,
)

from forensics.plugin_fix.check import check_source
from forensics.plugin_fix.layout import PLUGIN_DIR, TASK_PY
from forensics.plugin_fix.patch import apply, load_patch

pytestmark = pytest.mark.e2e

# One release per minor line that has the bug (from 1.10.3 on, docs/verdicts.md), the first one too.
RELEASES = ("1.10.3", "1.11.0", "1.12.3", "1.13.15", "1.14.9", "1.15.4", "1.16.31")
MASTER_ENV = "ELASTIC_AUDIT_FLYTEKIT_GIT"


def _timestamp_era(release: str) -> bool:
    """flytekit's exceptions take `timestamp=` from 1.14.0 on (flytekit #2797, flytekit/exceptions/base.py)."""
    major, minor, *_ = (int(p) for p in release.split("."))
    return (major, minor) >= (1, 14)


@pytest.fixture(scope="module")
def sdists(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    cache = cache_dir(request.config, tmp_path_factory)
    return {release: download_sdist(cache, release) for release in RELEASES}


def _signal_handler(source: str) -> ast.ExceptHandler:
    tree = ast.parse(source)
    (handler,) = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.ExceptHandler)
        and ast.unparse(n.type or ast.Pass()) == "SignalException"
    ]
    return handler


def _raises(handler: ast.ExceptHandler) -> dict[str, ast.Call]:
    return {
        ast.unparse(n.exc.func): n.exc
        for n in ast.walk(handler)
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)
    }


def _assert_fixed_for_its_era(tree: Path, timestamp: bool) -> None:
    """The patched plugin compiles, checks `fixed`, and uses only what its flytekit has."""
    for rel in (TASK_PY, TEST_FILE):
        compile((tree / rel).read_bytes(), str(tree / rel), "exec")  # SyntaxError fails it
    source = task_py(tree).read_text()
    raises = _raises(_signal_handler(source))
    assert ast.unparse(raises["SystemExit"].args[0]) == "128 + e.sigval"
    if timestamp:
        # Only with per-pod error files (_F_DES, flytekit >= 1.14): the recoverable error.
        assert [k.arg for k in raises["FlyteRecoverableException"].keywords] == ["timestamp"]
    else:
        # flytekit < 1.14: no _F_DES to honour, and `timestamp=` would be a TypeError.
        assert set(raises) == {"SystemExit"}
    assert ("_F_DES" in source) is timestamp
    assert ("import time\n" in source) is timestamp
    assert "raise IgnoreOutputs()" in source  # the legitimate no-rank-0 path stays
    tests = (tree / TEST_FILE).read_text()
    assert "def test_sigterm_to_agent_error_file(" in tests
    assert ("e.value.timestamp <= time.time()" in tests) is timestamp


@pytest.mark.parametrize("release", RELEASES)
def test_fix_apply_fixes_every_affected_release(
    release: str, sdists: dict[str, Path], tmp_path: Path
) -> None:
    tree = unpack(sdists[release], tmp_path / "sdist")
    assert check_source(tree).status == "vulnerable"

    pristine = snapshot(tree)
    assert apply(tree, check_only=True).status == "would-apply"
    assert snapshot(tree) == pristine

    done = cli_json("fix", "apply", tree, expect=0)  # the user's path, through the real CLI
    assert (done["status"], done["version"]) == ("applied", release)
    timestamp = _timestamp_era(release)
    assert ("flytekit >= 1.14" in done["adapted"][0]) is timestamp
    assert check_source(tree).status == "fixed"
    _assert_fixed_for_its_era(tree, timestamp)

    patched = snapshot(tree)
    assert apply(tree).status == "already-applied"
    assert snapshot(tree) == patched


def test_the_patch_shown_is_what_apply_writes_on_the_release_it_was_cut_from(
    sdists: dict[str, Path], tmp_path: Path
) -> None:
    """1.16.31 = master's plugin: git's result of `fix show` and `fix apply` agree byte for byte."""
    by_us = unpack(sdists["1.16.31"], tmp_path / "us")
    by_git = tmp_path / "git"
    shutil.copytree(unpack(sdists["1.16.31"], tmp_path / "sdist"), by_git / PLUGIN_DIR)
    subprocess.run(["git", "init", "-q"], cwd=by_git, check=True)
    subprocess.run(["git", "apply", "-"], cwd=by_git, input=load_patch(), text=True, check=True)
    cli_json("fix", "apply", by_us, expect=0)
    for rel in (TASK_PY, TEST_FILE):
        assert (by_us / rel).read_bytes() == (by_git / PLUGIN_DIR / rel).read_bytes()


def _master_plugin(tmp_path: Path) -> Path:
    """flytekit master's plugin directory, from the snapshot named by $ELASTIC_AUDIT_FLYTEKIT_GIT."""
    where = os.environ.get(MASTER_ENV)
    if not where or not Path(where).exists():
        pytest.skip(
            f"no flytekit master snapshot: set {MASTER_ENV} to a flyteorg/flytekit git directory "
            "or checkout (CI cannot fetch GitHub)"
        )
    root = Path(where)
    if (root / PLUGIN_DIR).is_dir():
        return root / PLUGIN_DIR
    dest = tmp_path / "flytekit"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "--git-dir", str(root), "archive", "HEAD", PLUGIN_DIR],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / PLUGIN_DIR


def test_fix_apply_fixes_flytekit_master(tmp_path: Path) -> None:
    plugin = _master_plugin(tmp_path)
    tree = tmp_path / "master"
    shutil.copytree(plugin, tree)
    assert cli_json("fix", "check", "--source", tree, expect=1)["status"] == "vulnerable"
    assert cli_json("fix", "apply", tree, expect=0)["status"] == "applied"
    assert cli_json("fix", "check", "--source", tree, expect=0)["status"] == "fixed"
    _assert_fixed_for_its_era(tree, timestamp=True)
    # The shown patch is cut from master: git applies it to the same tree as cleanly.
    by_git = tmp_path / "git"
    shutil.copytree(plugin, by_git / PLUGIN_DIR)
    subprocess.run(["git", "init", "-q"], cwd=by_git, check=True)
    subprocess.run(["git", "apply", "-"], cwd=by_git, input=load_patch(), text=True, check=True)
    for rel in (TASK_PY, TEST_FILE):
        assert (tree / rel).read_bytes() == (by_git / PLUGIN_DIR / rel).read_bytes()


def test_fix_apply_refuses_a_handler_that_is_not_the_known_bug(
    sdists: dict[str, Path], tmp_path: Path
) -> None:
    """Someone's own change in the handler: nothing is written, the reason names the handler."""
    tree = unpack(sdists["1.12.3"], tmp_path / "sdist")
    task = task_py(tree)
    task.write_text(
        task.read_text().replace(
            "            raise IgnoreOutputs()\n\n        # `out`",
            "            reason = str(e)\n            raise IgnoreOutputs(reason)\n\n        # `out`",
        )
    )
    assert check_source(tree).status == "vulnerable"
    before = snapshot(tree)
    proc = run_cli("fix", "apply", tree, "-o", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "not the known bug" in proc.stdout
    assert snapshot(tree) == before
