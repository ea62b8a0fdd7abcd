"""`elastic-audit fix check`: the static source check and the probe run in a target interpreter."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.fix import (
    PLUGIN_VERSION,
    cli_json,
    installed_task_py,
    make_checkout,
    run_cli,
    task_py,
)

from forensics.plugin_fix.check import analyze_task_source, check_source, source_has_fix
from forensics.plugin_fix.layout import PLUGIN_DIR, TASK_PY
from forensics.plugin_fix.patch import apply

STOCK = installed_task_py().read_text()
HANDLER = (
    "        except SignalException as e:\n"
    '            logger.exception(f"Elastic launch agent process terminating: {e}")\n'
    "            raise IgnoreOutputs()\n"
)


def _with_handler(body: str, source: str = STOCK) -> str:
    """The stock task.py with the `except SignalException` handler's body replaced."""
    assert source.count(HANDLER) == 1
    head = "        except SignalException as e:\n"
    return source.replace(HANDLER, head + body)


RECOVERABLE_FIX = _with_handler(
    '            logger.exception(f"Elastic launch agent process terminating: {e}")\n'
    "            raise FlyteRecoverableException(\n"
    '                f"Elastic launch agent process was terminated by signal {e.sigval.name}",\n'
    "                timestamp=time.time(),\n"
    "            ) from e\n"
)


# ----------------------------------------------------------------------------- static check


def test_stock_plugin_source_is_vulnerable() -> None:
    status, reason = analyze_task_source(STOCK)
    assert status == "vulnerable"
    assert "IgnoreOutputs" in reason
    assert "PytorchElasticFunctionTask._execute" in reason
    assert not source_has_fix(STOCK)


def test_the_fix_as_pin_bump_expects_it_counts_as_fixed() -> None:
    assert source_has_fix(RECOVERABLE_FIX)


@pytest.mark.parametrize(
    "disguise",
    [
        "            # raise FlyteRecoverableException(...) from e  -- TODO\n"
        "            raise IgnoreOutputs()\n",
        '            """raise FlyteRecoverableException(msg, timestamp=time.time()) from e"""\n'
        "            raise IgnoreOutputs()\n",
        '            msg = "FlyteRecoverableException"\n            raise IgnoreOutputs(msg)\n',
    ],
    ids=["comment", "docstring", "string"],
)
def test_static_check_is_not_fooled_by_the_fix_in_a_comment_or_string(disguise: str) -> None:
    source = _with_handler(disguise)
    assert "FlyteRecoverableException" in source.split("except SignalException")[1][:300]
    assert analyze_task_source(source)[0] == "vulnerable"


@pytest.mark.parametrize(
    "body,expected",
    [
        ("            sys.exit(0)\n", "vulnerable"),
        ("            raise SystemExit()\n", "vulnerable"),
        ("            pass\n", "vulnerable"),
        ("            return None\n", "vulnerable"),
        ("            if e.sigval == 15:\n                raise IgnoreOutputs()\n", "vulnerable"),
        (
            "            if e.sigval == 15:\n                raise FlyteRecoverableException(str(e))\n",
            "unknown",
        ),
        ("            raise SystemExit(128 + e.sigval) from e\n", "fixed"),
        # Not silent, but not the fix: flytekit makes these non-recoverable, never retried.
        ("            raise\n", "vulnerable"),
        ("            raise e\n", "vulnerable"),
        ("            raise RuntimeError(str(e)) from e\n", "vulnerable"),
        ("            raise FlyteUserRuntimeException(e) from e\n", "vulnerable"),
        (
            "            if self.max_nodes > 1:\n                raise\n"
            "            raise FlyteRecoverableException(str(e)) from e\n",
            "vulnerable",
        ),
        (
            "            if self.max_nodes > 1:\n                sys.exit(143)\n"
            "            raise FlyteRecoverableException(str(e)) from e\n",
            "fixed",
        ),
    ],
    ids=[
        "sys-exit-0",
        "bare-system-exit",
        "swallowed",
        "returns",
        "conditional-ignore",
        "may-fall-through",
        "exit-128-plus-signal",
        "bare-re-raise",
        "raise-e",
        "runtime-error",
        "user-runtime-error",
        "re-raise-on-one-path",
        "exit-or-recoverable",
    ],
)
def test_static_check_judges_what_the_handler_does(body: str, expected: str) -> None:
    assert analyze_task_source(_with_handler(body))[0] == expected


def test_static_check_follows_import_aliases() -> None:
    source = _with_handler("            raise Skip()\n").replace(
        "from flytekit.extend import IgnoreOutputs, TaskPlugins",
        "from flytekit.extend import IgnoreOutputs as Skip, TaskPlugins",
    )
    assert analyze_task_source(source)[0] == "vulnerable"


def test_static_check_without_a_handler_is_unknown() -> None:
    source = STOCK.replace(HANDLER, "")
    status, reason = analyze_task_source(source)
    assert status == "unknown"
    assert "no `except SignalException` handler" in reason
    assert analyze_task_source("def broken(:\n")[0] == "unknown"


@pytest.mark.e2e
def test_check_source_finds_the_plugin_in_a_github_tarball_layout(
    sdist_tree: Path, tmp_path: Path
) -> None:
    """GitHub's tarball wraps the checkout in one `owner-repo-sha/` directory."""
    extracted = tmp_path / "extracted"
    make_checkout(sdist_tree, extracted / "exa-labs-flytekit-c0ffee0")
    result = check_source(extracted)
    assert result.status == "vulnerable"
    assert result.path == str(extracted / "exa-labs-flytekit-c0ffee0" / PLUGIN_DIR / TASK_PY)
    apply(extracted / "exa-labs-flytekit-c0ffee0")
    assert check_source(extracted).status == "fixed"


@pytest.mark.e2e
def test_fix_check_source_refuses_a_bare_reraise_as_the_fix(sdist_tree: Path) -> None:
    """`raise` instead of IgnoreOutputs is not silent, but every preemption would fail for good."""
    task = task_py(sdist_tree)
    task.write_text(_with_handler("            raise\n", task.read_text()))
    data = cli_json("fix", "check", "--source", sdist_tree, expect=1)
    assert data["status"] == "vulnerable"
    assert "non-recoverably" in data["reason"]


def test_static_check_follows_an_alias_of_the_recoverable_error() -> None:
    source = _with_handler("            raise Retry(str(e)) from e\n").replace(
        "from flytekit.exceptions.user import FlyteRecoverableException,",
        "from flytekit.exceptions.user import FlyteRecoverableException as Retry,",
    )
    assert "as Retry" in source
    assert analyze_task_source(source)[0] == "fixed"


@pytest.mark.e2e
def test_fix_check_source_on_the_stock_and_the_patched_sdist(sdist_tree: Path) -> None:
    assert task_py(sdist_tree).read_text() == STOCK  # the sdist is the installed plugin
    stock = cli_json("fix", "check", "--source", sdist_tree, expect=1)
    assert (stock["status"], stock["mode"]) == ("vulnerable", "source")
    assert stock["plugin_version"] == PLUGIN_VERSION
    cli_json("fix", "apply", sdist_tree, expect=0)
    fixed = cli_json("fix", "check", "--source", sdist_tree, expect=0)
    assert fixed["status"] == "fixed"
    assert "FlyteRecoverableException" in fixed["reason"]
    assert "SystemExit(128 + e.sigval)" in fixed["reason"]


@pytest.mark.e2e
def test_fix_check_source_without_a_plugin_is_unknown(tmp_path: Path) -> None:
    data = cli_json("fix", "check", "--source", tmp_path, expect=2)
    assert data["status"] == "unknown"


@pytest.mark.e2e
def test_fix_check_refuses_python_and_source_together(tmp_path: Path) -> None:
    proc = run_cli("fix", "check", "--python", sys.executable, "--source", tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("elastic-audit: error: --python and --source")


# ----------------------------------------------------------------------------- probe


@pytest.mark.e2e
def test_stock_plugin_environment_is_vulnerable() -> None:
    data = cli_json("fix", "check", expect=1)
    assert data["status"] == "vulnerable"
    assert data["path"] == str(installed_task_py())
    assert data["plugin_version"] == PLUGIN_VERSION
    assert data["torch_version"] and data["flytekit_version"]
    assert {s["outcome"] for s in data["scenarios"]} == {"ignore-outputs"}


def _interpreter_seeing(tree: Path, tmp_path: Path) -> Path:
    """A `python` wrapper whose imports find the plugin in `tree` before the installed one."""
    wrapper = tmp_path / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="{tree}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


@pytest.mark.e2e
def test_patched_plugin_environment_is_fixed(sdist_tree: Path, tmp_path: Path) -> None:
    cli_json("fix", "apply", sdist_tree, expect=0)
    python = _interpreter_seeing(sdist_tree, tmp_path)
    data = cli_json("fix", "check", "--python", python, expect=0)
    assert data["status"] == "fixed"
    assert data["path"] == str(task_py(sdist_tree))  # the patched file is what the probe drove
    outcomes = {s["name"]: s["outcome"] for s in data["scenarios"]}
    assert outcomes == {
        "single-node": "exit-143",
        "multi-node, shared error file": "exit-143",
        "multi-node, error aggregation": "recoverable-error",
    }
    assert "terminated by signal SIGTERM" in data["scenarios"][2]["detail"]
    table = run_cli("fix", "check", "--python", python, "-o", "table")
    assert table.returncode == 0
    assert "fixed" in table.stdout and "exit-143" in table.stdout


@pytest.mark.e2e
def test_interpreter_without_the_plugin_is_not_installed(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    data = cli_json("fix", "check", "--python", venv / "bin" / "python", expect=2)
    assert data["status"] == "not-installed"
    assert data["plugin_version"] is None


@pytest.mark.e2e
def test_fix_check_with_a_missing_or_broken_interpreter(tmp_path: Path) -> None:
    proc = run_cli("fix", "check", "--python", tmp_path / "no-such-python")
    assert proc.returncode == 2
    assert proc.stderr.startswith("elastic-audit: error: --python ")
    assert "Traceback" not in proc.stderr
    broken = cli_json("fix", "check", "--python", "false", expect=2)
    assert broken["status"] == "unknown"
    assert "the probe failed" in broken["reason"]
