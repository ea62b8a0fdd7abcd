"""The fix at run time in each flytekit era: the oldest affected line (1.10.3) and the newest (1.16.31).

Each era runs in a venv of its own flytekit and today's torch (2.13.0, the CPU wheel; pinned so
pip never pulls a CUDA build). 1.16.31 is this project's own venv. The 1.10.3 venv is built once
with pip into pytest's cache directory (`.pytest_cache/d/elastic-audit-era-venvs`, kept between
tests and between runs of the same checkout): about 1.5 min on an idle 2-core machine, 4.5 min
under heavy load; later runs reuse it.

In each era: `fix check --python` drives the stock plugin (vulnerable) and the patched one (fixed)
with a real torch `SignalException`, and the signal tests the fix adds to the plugin's own suite
pass against the patched plugin and fail against the stock one under that era's flytekit. In the
1.16 era that includes reading the recoverable error file back with flytekit's own reader.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.fix import (
    TEST_FILE,
    cache_dir,
    cli_json,
    download_sdist,
    new_venv,
    pip_install,
    unpack,
)

from forensics.plugin_fix.patch import apply

pytestmark = pytest.mark.e2e

TORCH = "torch==2.13.0"  # what this project pins; an unpinned torch pulls a multi-GB CUDA build
SIGNAL_TESTS = "sigterm or rank_zero"


def _era_python(release: str, cache: Path) -> Path:
    """A venv with flytekit and the plugin at `release`, torch 2.13.0 and pytest (built once)."""
    if release == "1.16.31":
        return Path(sys.executable)  # this project's own venv is that era
    venv = cache / f"flytekit-{release}"
    python = venv / "bin" / "python"
    ready = venv / "elastic-audit-ready"
    if ready.is_file():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    new_venv(venv)
    constraints = cache / "torch-constraint.txt"
    constraints.write_text(TORCH + "\n")
    pip_install(
        python,
        "-c",
        str(constraints),
        f"flytekit=={release}",
        f"flytekitplugins-kfpytorch[elastic]=={release}",
        TORCH,
        "pytest",
        what=f"the flytekit {release} venv",
    )
    ready.write_text(release + "\n")
    return python


def _seeing(python: Path, tree: Path, where: Path) -> Path:
    """`python`, importing the plugin from `tree` ahead of the installed one."""
    wrapper = where / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{tree}" exec "{python}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def _signal_tests(python: Path, plugin: Path, tests: Path) -> subprocess.CompletedProcess[str]:
    """The fix's signal tests (from `tests`) run by `python` against the plugin in `plugin`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "_F_", "FLYTE_"))}
    env["PYTHONPATH"] = str(plugin)
    return subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            str(tests),
            "-k",
            SIGNAL_TESTS,
        ],
        capture_output=True,
        text=True,
        env=env,
        # Not the tree's own directory: `python -m` puts the cwd first on sys.path, ahead of
        # PYTHONPATH, and the stock run would import the patched plugin next to the tests.
        cwd=tests.parent.parent.parent,
        timeout=900,
    )


@pytest.mark.parametrize("release", ["1.10.3", "1.16.31"], ids=["oldest-1.10", "newest-1.16"])
def test_fix_in_its_own_flytekit_era(
    release: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
) -> None:
    cache = cache_dir(request.config, tmp_path_factory)
    python = _era_python(release, cache.parent / "elastic-audit-era-venvs")
    stock = unpack(download_sdist(cache, release), tmp_path / "stock")
    patched = shutil.copytree(stock, tmp_path / "patched")
    assert apply(patched).status == "applied"

    before = cli_json(
        "fix", "check", "--python", _seeing(python, stock, tmp_path / "stock"), expect=1
    )
    assert (before["status"], before["flytekit_version"]) == ("vulnerable", release)
    assert before["torch_version"].startswith("2.13.0")
    after = cli_json(
        "fix", "check", "--python", _seeing(python, patched, tmp_path / "patched"), expect=0
    )
    assert (after["status"], after["flytekit_version"]) == ("fixed", release)
    outcomes = {s["name"]: s["outcome"] for s in after["scenarios"]}
    newest = release == "1.16.31"
    assert outcomes == {
        "single-node": "exit-143",
        "multi-node, shared error file": "exit-143",
        # per-pod error files exist only from flytekit 1.14 on
        "multi-node, error aggregation": "recoverable-error" if newest else "exit-143",
    }

    # The plugin's own new tests, in this era: pass on the fix, fail on the bug.
    passed = _signal_tests(python, patched, patched / TEST_FILE)
    assert passed.returncode == 0, passed.stdout[-3000:]
    assert " 8 passed" in passed.stdout, passed.stdout[-600:]
    caught = _signal_tests(python, stock, patched / TEST_FILE)
    assert caught.returncode == 1, caught.stdout[-3000:]
    assert "7 failed, 1 passed" in caught.stdout, caught.stdout[-600:]  # no-rank-0 passes on both
    # From 1.14 on, this case reads the recoverable error file the fix writes back with that
    # flytekit's own proto reader (utils.load_proto_from_file); before, it checks that the pod
    # exits 143 and writes none even with _F_DES set.
    assert "test_sigterm_to_agent_error_file[multi-node-error-aggregation] PASSED" in passed.stdout
