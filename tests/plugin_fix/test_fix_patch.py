"""The bundled patch and `elastic-audit fix show/apply` on the real PyPI sdist of the plugin."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run
from support.fix import (
    FIX_DIR_PATCH,
    PLUGIN_VERSION,
    REPO,
    TEST_FILE,
    cli_json,
    make_checkout,
    make_plugin_dir,
    run_cli,
    snapshot,
    task_py,
)

from forensics.plugin_fix.check import check_source
from forensics.plugin_fix.layout import PLUGIN_DIR, TASK_PY
from forensics.plugin_fix.patch import apply, load_patch, parse_patch


def test_bundled_patch_is_the_one_in_fix_dir() -> None:
    assert load_patch().encode() == FIX_DIR_PATCH.read_bytes()


def test_patch_is_git_format_against_the_flytekit_repository_layout() -> None:
    text = load_patch()
    assert text.startswith("From ")
    assert "\nSubject: [PATCH] " in text
    paths = [fp.path for fp in parse_patch(text)]
    assert paths == [f"{PLUGIN_DIR}/{TASK_PY}", f"{PLUGIN_DIR}/{TEST_FILE}"]


@pytest.mark.e2e
def test_fix_show_prints_the_patch_byte_for_byte_even_into_a_pipe() -> None:
    proc = run_cli("fix", "show")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == load_patch()


@pytest.mark.e2e
def test_fix_show_json_describes_the_patch() -> None:
    data = cli_json("fix", "show", expect=0)
    assert data["patch"] == load_patch()
    assert data["sha256"] == hashlib.sha256(FIX_DIR_PATCH.read_bytes()).hexdigest()
    assert data["files"] == [fp.path for fp in parse_patch(load_patch())]
    csv = run_cli("fix", "show", "-o", "csv")
    assert (csv.returncode, csv.stdout) == (2, "")
    assert "'csv' is not one of table, json" in csv.stderr


@pytest.mark.e2e
def test_git_apply_and_fix_apply_give_the_same_checkout(sdist_tree: Path, tmp_path: Path) -> None:
    """The patch is a real git patch (upstream PR material), and our applier agrees with git."""
    by_git = make_checkout(sdist_tree, tmp_path / "by-git")
    by_us = make_checkout(sdist_tree, tmp_path / "by-us")
    subprocess.run(["git", "init", "-q"], cwd=by_git, check=True)
    git = subprocess.run(
        ["git", "apply", "--check", "-"], cwd=by_git, input=load_patch(), text=True
    )
    assert git.returncode == 0
    subprocess.run(["git", "apply", "-"], cwd=by_git, input=load_patch(), text=True, check=True)
    shutil.rmtree(by_git / ".git")
    assert cli_json("fix", "apply", by_us, expect=0)["status"] == "applied"
    assert snapshot(by_us) == snapshot(by_git)
    assert snapshot(by_us) != snapshot(make_checkout(sdist_tree, tmp_path / "pristine"))


@pytest.mark.e2e
@pytest.mark.parametrize("layout", ["sdist", "plugin", "checkout"])
def test_fix_apply_detects_the_layout_and_is_idempotent(
    layout: str, sdist_tree: Path, tmp_path: Path
) -> None:
    tree = {
        "sdist": lambda: sdist_tree,
        "plugin": lambda: make_plugin_dir(sdist_tree, tmp_path / "repo"),
        "checkout": lambda: make_checkout(sdist_tree, tmp_path / "repo"),
    }[layout]()
    assert check_source(tree).status == "vulnerable"

    first = cli_json("fix", "apply", tree, expect=0)
    assert (first["status"], first["kind"]) == ("applied", layout)
    assert first["version"] == (PLUGIN_VERSION if layout != "checkout" else None)
    assert check_source(tree).status == "fixed"
    after_first = snapshot(tree)

    second = cli_json("fix", "apply", tree, expect=0)
    assert second["status"] == "already-applied"
    assert snapshot(tree) == after_first
    table = run_cli("fix", "apply", tree, "-o", "table")
    assert table.returncode == 0
    assert "already-applied" in table.stdout


@pytest.mark.e2e
def test_fix_apply_check_writes_nothing(sdist_tree: Path) -> None:
    before = snapshot(sdist_tree)
    data = cli_json("fix", "apply", "--check", sdist_tree, expect=0)
    assert data["status"] == "would-apply"
    assert snapshot(sdist_tree) == before
    assert check_source(sdist_tree).status == "vulnerable"


def _assert_refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()  # one line, never a traceback
    assert line.startswith("elastic-audit: error: ")
    for word in words:
        assert word in line


@pytest.mark.e2e
def test_fix_apply_refuses_a_directory_that_is_not_flytekit(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tmp_path / "task.py").write_text("raise IgnoreOutputs()\n")
    before = snapshot(tmp_path)
    _assert_refused(run_cli("fix", "apply", tmp_path), "is not a flytekit checkout")
    _assert_refused(run_cli("fix", "apply", "--check", tmp_path), "is not a flytekit checkout")
    assert snapshot(tmp_path) == before


@pytest.mark.e2e
def test_fix_apply_points_at_the_sdist_inside_the_unpack_dir(sdist_tree: Path) -> None:
    proc = run_cli("fix", "apply", sdist_tree.parent)
    _assert_refused(proc, f"did you mean {sdist_tree}?")


@pytest.mark.e2e
def test_fix_apply_refuses_the_tarball_and_a_missing_directory(
    kfpytorch_sdist: Path, tmp_path: Path
) -> None:
    _assert_refused(run_cli("fix", "apply", kfpytorch_sdist), "not a directory", "tar xzf")
    _assert_refused(run_cli("fix", "apply", tmp_path / "nope"), "no such directory")


@pytest.mark.e2e
def test_fix_apply_refuses_an_installed_package(sdist_tree: Path, tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    shutil.copytree(sdist_tree / "flytekitplugins", site / "flytekitplugins")
    before = snapshot(site)
    _assert_refused(run_cli("fix", "apply", site), "installed package")
    assert snapshot(site) == before


@pytest.mark.e2e
def test_fix_apply_reports_a_source_it_was_not_written_for(sdist_tree: Path) -> None:
    """Someone's own (non-recoverable) change to the handler: not the known bug, nothing written."""
    task = task_py(sdist_tree)
    task.write_text(task.read_text().replace("raise IgnoreOutputs()\n\n", "raise\n\n", 1))
    before = snapshot(sdist_tree)
    proc = run_cli("fix", "apply", sdist_tree, "-o", "json")
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert data["status"] == "cannot-apply"
    assert "the `except SignalException` handler is not the known bug" in data["reason"]
    assert snapshot(sdist_tree) == before


@pytest.mark.e2e
def test_fix_apply_refuses_a_half_patched_tree(sdist_tree: Path, tmp_path: Path) -> None:
    pristine_tests = (sdist_tree / TEST_FILE).read_bytes()
    cli_json("fix", "apply", sdist_tree, expect=0)
    (sdist_tree / TEST_FILE).write_bytes(pristine_tests)
    before = snapshot(sdist_tree)
    proc = run_cli("fix", "apply", sdist_tree, "-o", "json")
    assert proc.returncode == 2
    assert "partly applied" in json.loads(proc.stdout)["reason"]
    assert snapshot(sdist_tree) == before


@pytest.mark.e2e
def test_fix_apply_never_rewrites_line_endings(sdist_tree: Path) -> None:
    """A CRLF checkout (core.autocrlf on Windows) is fixed in CRLF, never converted to LF."""
    for rel in (TASK_PY, TEST_FILE):
        path = sdist_tree / rel
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    result = apply(sdist_tree)
    assert result.status == "applied"
    for rel in (TASK_PY, TEST_FILE):
        data = (sdist_tree / rel).read_bytes()
        assert b"SignalException" in data
        assert data.count(b"\n") == data.count(b"\r\n")
    assert check_source(sdist_tree).status == "fixed"
    assert apply(sdist_tree).status == "already-applied"


def _tree_state(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Bytes, mode and mtime of every file under `root` (temporary files included)."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("interrupt", "code"),
    [(KeyboardInterrupt, 130), (lambda: SystemExit(143), 143)],
    ids=["ctrl-c", "system-exit"],
)
def test_an_interrupt_between_the_two_file_replacements_puts_both_files_back(
    sdist_tree: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    interrupt,
    code: int,
) -> None:
    # Injection (in-process, at the OS boundary): the first os.replace into the tree lands
    # (task.py is fixed), then Ctrl-C (or a SIGTERM handler's SystemExit) arrives before the
    # second file is replaced. Half a fix must never stay on disk.
    before = _tree_state(sdist_tree)
    real_replace = os.replace
    landed: list[Path] = []

    def replace_then_interrupt(src, dst, *args, **kwargs):
        real_replace(src, dst, *args, **kwargs)
        if Path(dst).is_relative_to(sdist_tree):
            landed.append(Path(dst))
            if len(landed) == 1:
                raise interrupt()

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    got, _, err = run(["fix", "apply", str(sdist_tree)], capsys)
    monkeypatch.undo()
    assert landed[0] == sdist_tree / TASK_PY  # the fix had really landed in task.py
    assert got == code, err
    assert "Traceback" not in err
    assert code != 130 or "interrupted" in err
    assert _tree_state(sdist_tree) == before  # bytes, modes, mtimes; no temporary file left
    assert check_source(sdist_tree).status == "vulnerable"


@pytest.mark.e2e
def test_fix_commands_work_from_a_non_editable_install(sdist_tree: Path, tmp_path: Path) -> None:
    """Build the wheel, install it into a plain directory, and run `fix` from there."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(REPO / "pyproject.toml", src)
    shutil.copytree(
        REPO / "forensics", src / "forensics", ignore=shutil.ignore_patterns("__pycache__")
    )
    readme = REPO / "README.md"
    (src / "README.md").write_text(readme.read_text() if readme.exists() else "elastic-audit\n")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-w",
            "dist",
            ".",
        ],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = (src / "dist").glob("elastic_audit-*.whl")
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    env = {"PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import forensics; print(forensics.__file__)"],
        env={**os.environ, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(site)

    shown = run_cli("fix", "show", env=env, cwd=tmp_path)
    assert shown.returncode == 0
    assert shown.stdout == FIX_DIR_PATCH.read_text()
    applied = cli_json("fix", "apply", sdist_tree, expect=0, env=env, cwd=tmp_path)
    assert applied["status"] == "applied"
    checked = cli_json("fix", "check", "--source", sdist_tree, expect=0, env=env, cwd=tmp_path)
    assert checked["status"] == "fixed"
