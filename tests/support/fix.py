"""Shared pieces of the plugin-fix tests: the PyPI sdist (cached), trees to patch, the real CLI."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from forensics.archive import extract_tarball
from forensics.plugin_fix.layout import PLUGIN_DIR, TASK_PY
from support.cli import run_process

REPO = Path(__file__).resolve().parents[2]
FIX_DIR_PATCH = REPO / "fix" / "0001-kfpytorch-signal-recoverable.patch"
# The constrained (installed) version: the stock plugin the tests compare against.
PLUGIN_VERSION = version("flytekitplugins-kfpytorch")
TEST_FILE = "tests/test_elastic_task.py"


def cache_dir(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the sdist is kept between runs: pytest's cache directory when there is one."""
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        return Path(cache.mkdir("elastic-audit-fix-sdist"))
    return tmp_path_factory.mktemp("sdist")


def download_sdist(cache_dir: Path, release: str = PLUGIN_VERSION) -> Path:
    """The PyPI sdist of a plugin release (default: the installed one), downloaded once."""
    pattern = f"flytekitplugins[-_]kfpytorch-{release}.tar.gz"
    found = [p for p in cache_dir.iterdir() if fnmatch.fnmatch(p.name, pattern)]
    if found:
        return found[0]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"flytekitplugins-kfpytorch=={release}",
            "-d",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = [p for p in cache_dir.iterdir() if fnmatch.fnmatch(p.name, pattern)]
    if proc.returncode != 0 or not found:
        pytest.fail(f"pip download of the plugin sdist failed:\n{proc.stdout}\n{proc.stderr}")
    return found[0]


def unpack(tarball: Path, dest: Path) -> Path:
    """Unpack the sdist under `dest`; returns its single top-level directory."""
    top = extract_tarball(tarball, dest)
    assert top != dest, f"{tarball.name}: not a single-directory sdist"
    return top


def make_checkout(sdist_dir: Path, dest: Path) -> Path:
    """A flytekit-checkout-shaped tree holding the sdist's sources under plugins/."""
    plugin = dest / PLUGIN_DIR
    shutil.copytree(sdist_dir, plugin)
    for generated in ("PKG-INFO", "setup.cfg"):
        (plugin / generated).unlink()
    shutil.rmtree(plugin / "flytekitplugins_kfpytorch.egg-info")
    (dest / "flytekit").mkdir()
    (dest / "flytekit" / "__init__.py").write_text('"""flytekit"""\n')
    (dest / "pyproject.toml").write_text('[project]\nname = "flytekit"\n')
    return dest


def make_plugin_dir(sdist_dir: Path, dest: Path) -> Path:
    """The plugin's own directory as in a checkout (no PKG-INFO)."""
    return make_checkout(sdist_dir, dest) / PLUGIN_DIR


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, by relative path: proves what was (not) written."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_cli(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m forensics ...`: the real entry point, in a child process (outside pytest's env)."""
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    run_env.update(env or {})
    return run_process(*args, env=run_env, cwd=cwd or REPO)


def cli_json(*args: str | Path, expect: int, **kwargs: object) -> dict:
    """Run the CLI with `-o json`, assert its exit code, return the parsed output."""
    proc = run_cli(*args, "-o", "json", **kwargs)  # type: ignore[arg-type]
    assert proc.returncode == expect, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def task_py(tree: Path) -> Path:
    """The plugin's task.py in an sdist or plugin-dir tree."""
    return tree / TASK_PY


def installed_task_py() -> Path:
    import flytekitplugins.kfpytorch.task as task

    return Path(task.__file__)


def new_venv(where: Path) -> Path:
    """An empty venv (no pip of its own); returns its python. Fill it with `pip_install`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where / "bin" / "python"


def pip_install(python: Path, *args: str, what: str) -> None:
    """This venv's pip installing into `python`'s environment (pip's own configuration applies)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", *args],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    if proc.returncode != 0:
        pytest.fail(f"installing {what} failed:\n{proc.stderr[-3000:]}")
