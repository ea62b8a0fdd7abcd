"""Shared pieces of the pin-bump tests: the fixture monorepo, a fork network, the real CLI."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.cli import exit_code, run_process
from support.github_server import FakeCommit, FakeRepo, GitHubState

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MONOREPO = FIXTURES / "monorepo"
GOLDEN = FIXTURES / "pins_golden"

# Commits the fixture pins today, and the one the fix landed in.
OLD_A = "8f3c2a1b4d5e6f708192a3b4c5d6e7f8091a2b3c"
OLD_B = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"
OLD_SHORT = "5e4d3c2"
UPSTREAM = "0f1e2d3c4b5a69788796a5b4c3d2e1f001234567"  # flyteorg/flytekit: never ours
NEW_SHA = "c0ffee0123456789abcdef0123456789abcdef01"

# The rest of the fork network.
BASE = "b0" * 20
TIP = "7e" * 20  # master's tip; NEW_SHA sits between BASE and TIP
RELEASE_ONLY = "5a" * 20  # reachable only from release/1.16
IMPOSTER = "dead" * 10  # pushed to another fork: resolves here, on no branch of ours

PLUGIN_TASK = "plugins/flytekit-kf-pytorch/flytekitplugins/kfpytorch/task.py"
PLUGIN_PYPROJECT = "plugins/flytekit-kf-pytorch/pyproject.toml"
# Static metadata: uv reads it from the archive without building (no index needed).
PLUGIN_METADATA = b"""\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "flytekitplugins-kfpytorch"
version = "1.16.31"
requires-python = ">=3.9"
dependencies = []

[project.optional-dependencies]
elastic = []
"""
CHANGED = (
    "pyproject.toml",
    "requirements/base.in",
    "services/train/pyproject.toml",
    "services/train/requirements.txt",
    "services/windows-tool/pyproject.toml",
)

FORK_PIN = (
    '"flytekitplugins-kfpytorch[elastic] @ https://github.com/exa-labs/flytekit/archive/'
    f'{OLD_A}.tar.gz#subdirectory=plugins/flytekit-kf-pytorch"'
)


@dataclass
class Tree:
    """The fixture monorepo copied into a temporary directory, plus what surrounds it."""

    root: Path
    outside: Path
    base: Path


def build_tree(tmp_path: Path) -> Tree:
    """Copy the checked-in monorepo and add what git cannot carry well: links and venvs."""
    root = tmp_path / "monorepo"
    shutil.copytree(MONOREPO, root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pyproject.toml").write_text(
        f'[project]\nname = "elsewhere"\nversion = "1"\ndependencies = [\n  {FORK_PIN},\n]\n'
    )
    (outside / "requirements.txt").write_text(FORK_PIN.strip('"') + "\n")
    # Links out of the root: a directory and a file. Neither may be read nor written.
    (root / "vendor").symlink_to(outside, target_is_directory=True)
    (root / "services/api/requirements-shared.txt").symlink_to(outside / "requirements.txt")
    # A link inside the root: the real file is bumped once, the link stays a link.
    (root / "libs/train-requirements.txt").symlink_to("../services/train/requirements.txt")
    # Virtual environments (any name, found by pyvenv.cfg), node_modules and .git are skipped;
    # each holds a pin that must stay, and one holds TOML that does not even parse.
    for venv in (root / ".venv", root / "tools/py311"):
        (venv / "lib/site-packages/flytekit_src").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")
        (venv / "lib/site-packages/flytekit_src/pyproject.toml").write_text(
            f"[project]\ndependencies = [\n  {FORK_PIN},\n"  # unclosed: never parsed
        )
        (venv / "requirements.txt").write_text(FORK_PIN.strip('"') + "\n")
    for skipped in (root / "web/node_modules/pkg", root / ".git/info"):
        skipped.mkdir(parents=True)
        (skipped / "requirements.txt").write_text(FORK_PIN.strip('"') + "\n")
    return Tree(root, outside, tmp_path)


def snapshot(base: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Every file and link under `base` (links not followed): kind, content, mtime."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        for name in filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            p = Path(dirpath, name)
            rel = p.relative_to(base).as_posix()
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p), st.st_mtime_ns)
            else:
                out[rel] = ("file", p.read_bytes(), st.st_mtime_ns)
    return out


@dataclass
class CliResult:
    """Exit code and output of one CLI run."""

    returncode: int
    stdout: str
    stderr: str


def _cli_env(env: dict[str, str] | None) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GITHUB_API_URL")}
    full.update({"NO_COLOR": "1", "COLUMNS": "200"})
    full.update(env or {})
    return full


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> CliResult:
    """`elastic-audit pin-bump ...` through the console-script entry point, in this process.

    One interpreter start per test run instead of per call; stdout and stderr are not terminals,
    exactly as in a pipe, and CRLF bytes in the output are kept. Works where no capsys can
    (hypothesis examples).
    """
    out, err = io.StringIO(newline=""), io.StringIO(newline="")
    saved_env, saved_cwd = dict(os.environ), Path.cwd()
    run_env = _cli_env(env)
    os.environ.clear()
    os.environ.update(run_env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = exit_code(["pin-bump", *args])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return CliResult(code, out.getvalue(), err.getvalue())


def run_cli_process(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess:
    """`python -m forensics pin-bump ...` in a child process (for process-level limits)."""
    return run_process("pin-bump", *args, env=_cli_env(env), timeout=timeout, **kwargs)


def vulnerable_task_source() -> bytes:
    """The plugin's task.py as installed (flytekitplugins-kfpytorch 1.16.31): no fix."""
    import flytekitplugins.kfpytorch.task as task

    return Path(task.__file__).read_bytes()


def fixed_task_source() -> bytes:
    """The same task.py with the fix applied in its recoverable-error form (`import time`, fix/README.md)."""
    text = vulnerable_task_source().decode()
    old = (
        "        except SignalException as e:\n"
        '            logger.exception(f"Elastic launch agent process terminating: {e}")\n'
        "            raise IgnoreOutputs()\n"
    )
    new = (
        "        except SignalException as e:\n"
        '            logger.exception(f"Elastic launch agent process terminating: {e}")\n'
        "            raise FlyteRecoverableException(\n"
        '                f"Elastic launch agent process was terminated by signal {e.sigval.name} '
        '(e.g. pod preemption/eviction)",\n'
        "                timestamp=time.time(),\n"
        "            ) from e\n"
    )
    assert text.count(old) == 1, "the installed plugin no longer has the known handler"
    text = text.replace(old, new).replace("import os\n", "import os\nimport time\n", 1)
    return text.encode()


def fork_network(*, fixed: bool | None = None) -> tuple[GitHubState, FakeRepo]:
    """exa-labs/flytekit: master (BASE → OLD_B → OLD_A → NEW_SHA → TIP), release/1.16, an imposter.

    `fixed` chooses the plugin source every commit carries (None: no plugin file at all).
    """
    files: dict[str, bytes] = {"README.md": b"flytekit fork\n", PLUGIN_PYPROJECT: PLUGIN_METADATA}
    if fixed is not None:
        files[PLUGIN_TASK] = fixed_task_source() if fixed else vulnerable_task_source()
    state = GitHubState()
    fork = state.repo("exa-labs", "flytekit", default_branch="master")
    fork.add(FakeCommit(BASE, files=files))
    fork.add(FakeCommit(OLD_B, (BASE,), files=files))
    fork.add(FakeCommit(OLD_A, (OLD_B,), files=files))
    fork.add(FakeCommit(NEW_SHA, (OLD_A,), files=files))
    fork.add(FakeCommit(TIP, (NEW_SHA,), files=files), branch="master")
    fork.add(FakeCommit(RELEASE_ONLY, (BASE,), files=files), branch="release/1.16")
    fork.add(FakeCommit(IMPOSTER, (NEW_SHA,), files=files))  # objects shared across forks
    state.repo("flyteorg", "flytekit").add(FakeCommit(BASE, files=files), branch="master")
    return state, fork
