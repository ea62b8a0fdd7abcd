"""The patch against the plugin's own test suite, patched vs stock, from the real PyPI sdist.

Two runs of the sdist's `tests/` (concurrently, one per core):
- patched: `elastic-audit fix apply` on the unpacked sdist, as a user would run it;
- stock: the unpatched plugin with the patched test file, so the new tests meet the bug.
Each run imports the plugin from its own tree (PYTHONPATH ahead of the installed package), and
a recorder plugin proves which `task.py` was imported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import paths
from support.fix import (
    PLUGIN_VERSION,
    TEST_FILE,
    cli_json,
    installed_task_py,
    task_py,
    unpack,
)

from forensics.plugin_fix.check import check_source
from forensics.plugin_fix.patch import apply, load_patch

pytestmark = pytest.mark.e2e

SUITE_TIMEOUT_S = 900
SUPPORT = paths.SUPPORT  # files copied into the suite's and task's runs
RECORDER = SUPPORT / "fix_import_recorder.py"
LAUNCHER_HOOK = SUPPORT / "fix_launcher_hook.py"
ENTRYPOINT_TASK = SUPPORT / "fix_entrypoint_task.py"


def _new_test_names() -> set[str]:
    """Test functions the patch adds to the plugin's test file."""
    part = load_patch().split(f"+++ b/plugins/flytekit-kf-pytorch/{TEST_FILE}\n", 1)[1]
    return set(re.findall(r"^\+def (test_\w+)\(", part, re.MULTILINE))


NEW_TESTS = _new_test_names()


@dataclass(frozen=True)
class Outcome:
    """One test's result in a suite run, with the failure message when it failed."""

    outcome: str
    message: str
    text: str = ""

    @property
    def root_cause(self) -> str:
        """The first `E   SomeError: ...` line (pytest prints a chain cause first), else the message."""
        causes = re.findall(r"^E\s+([\w.]+(?:Error|Exception): .*)$", self.text, re.MULTILINE)
        cause = causes[0] if causes else self.message.splitlines()[0]
        return re.sub(r"#x1B\[[0-9;]*m", "", cause)[:160]  # terminal colours, as junit keeps them


@dataclass(frozen=True)
class SuiteRun:
    """One run of the plugin's suite: per-test outcomes and the task.py it imported."""

    tree: Path
    outcomes: dict[str, Outcome]
    imported: dict[str, str | None]
    returncode: int
    log: Path

    def new(self) -> dict[str, Outcome]:
        return {t: o for t, o in self.outcomes.items() if _function(t) in NEW_TESTS}

    def upstream(self) -> dict[str, Outcome]:
        return {t: o for t, o in self.outcomes.items() if _function(t) not in NEW_TESTS}


def _function(test_id: str) -> str:
    return test_id.split("::")[-1].split("[")[0]


def _outcomes(junit: Path) -> dict[str, Outcome]:
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, message, text = "passed", "", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message, text = node.get("message") or "", node.text or ""
        outcomes[test_id] = Outcome(outcome, message, text)
    return outcomes


def _start_suite(tree: Path, work: Path) -> subprocess.Popen[bytes]:
    work.mkdir()
    shutil.copy(RECORDER, work / RECORDER.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(work)])
    env["ELASTIC_AUDIT_IMPORT_RECORD"] = str(work / "imported.json")
    log = (work / "pytest.log").open("wb")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            RECORDER.stem,
            f"--junitxml={work / 'junit.xml'}",
            "--timeout=300",
            "-q",
            "tests",
        ],
        cwd=tree,  # outside this repository: the suite runs without our pytest config
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so a hung run can be stopped whole
    )


@dataclass(frozen=True)
class Comparison:
    """Both runs and the wall time they took together."""

    patched: SuiteRun
    stock: SuiteRun
    seconds: float


@pytest.fixture(scope="module")
def runs(kfpytorch_sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    base = tmp_path_factory.mktemp("plugin-suites")
    patched = unpack(kfpytorch_sdist, base / "patched")
    applied = cli_json("fix", "apply", patched, expect=0)
    assert (applied["status"], applied["kind"]) == ("applied", "sdist")

    stock = unpack(kfpytorch_sdist, base / "stock")
    shutil.copy(patched / TEST_FILE, stock / TEST_FILE)
    assert check_source(stock).status == "vulnerable"

    started = time.monotonic()
    procs = {
        name: (tree, _start_suite(tree, base / f"{name}-run"))
        for name, tree in (("patched", patched), ("stock", stock))
    }
    try:
        codes = {name: proc.wait(timeout=SUITE_TIMEOUT_S) for name, (_, proc) in procs.items()}
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:  # a hung run: stop it and the workers it started
                os.killpg(proc.pid, signal.SIGKILL)
    seconds = time.monotonic() - started
    results = {}
    for name, (tree, _) in procs.items():
        work = base / f"{name}-run"
        assert (work / "junit.xml").exists(), (work / "pytest.log").read_text()[-3000:]
        results[name] = SuiteRun(
            tree=tree,
            outcomes=_outcomes(work / "junit.xml"),
            imported=json.loads((work / "imported.json").read_text()),
            returncode=codes[name],
            log=work / "pytest.log",
        )
    return Comparison(results["patched"], results["stock"], seconds)


def test_each_run_imported_the_plugin_under_test(runs: Comparison) -> None:
    assert runs.patched.imported["file"] == str(task_py(runs.patched.tree))
    assert runs.stock.imported["file"] == str(task_py(runs.stock.tree))
    assert task_py(runs.stock.tree).read_bytes() == installed_task_py().read_bytes()
    assert check_source(runs.patched.tree).status == "fixed"


def test_new_tests_pass_against_the_patched_plugin(runs: Comparison) -> None:
    new = runs.patched.new()
    assert {_function(t) for t in new} == NEW_TESTS
    assert {t.split("::")[-1] for t in new} >= {
        "test_sigterm_to_agent_end_to_end[spawn]",
        "test_sigterm_to_agent_end_to_end[fork]",
    }
    assert {t: o.outcome for t, o in new.items()} == dict.fromkeys(new, "passed")


def test_new_tests_catch_the_bug_in_the_stock_plugin(runs: Comparison) -> None:
    new = runs.stock.new()
    assert new.keys() == runs.patched.new().keys()
    for test_id, result in new.items():
        if "sigterm" in test_id:
            assert result.outcome == "failed", test_id
        else:  # guards the IgnoreOutputs the fix keeps (no global rank 0): passes on both
            assert result.outcome == "passed", test_id
    end_to_end = {t: o for t, o in new.items() if "end_to_end" in t}
    assert len(end_to_end) == 2
    for test_id, result in end_to_end.items():
        assert "IgnoreOutputs" in result.message, (test_id, result.message)


def _counts(run: dict[str, Outcome]) -> Counter[str]:
    return Counter(o.outcome for o in run.values())


def test_upstream_suite_is_unchanged_by_the_patch(
    runs: Comparison, capsys: pytest.CaptureFixture[str]
) -> None:
    patched, stock = runs.patched.upstream(), runs.stock.upstream()
    assert patched.keys() == stock.keys()
    assert len(patched) > 20
    assert {t: o.outcome for t, o in patched.items()} == {t: o.outcome for t, o in stock.items()}
    assert "error" not in _counts(patched) | _counts(stock)
    for test_id, result in patched.items():
        if result.outcome == "failed":  # the same known failure on both sides, not a new one
            assert result.message.split(":")[0] == stock[test_id].message.split(":")[0]
    with capsys.disabled():
        print("\n" + _report(runs))


def _report(runs: Comparison) -> str:
    """The side-by-side comparison, printed also when everything passes."""
    rows = [
        f"plugin suite of flytekitplugins-kfpytorch {PLUGIN_VERSION} (sdist tests/), "
        f"patched vs stock, {runs.seconds:.0f}s wall for both runs concurrently",
        f"{'':28}{'patched':>10}{'stock':>10}",
    ]
    for group in ("upstream", "new"):
        p = _counts(getattr(runs.patched, group)())
        s = _counts(getattr(runs.stock, group)())
        for outcome in sorted(set(p) | set(s)):
            rows.append(f"{group + ' ' + outcome:28}{p[outcome]:>10}{s[outcome]:>10}")
    for test_id, result in sorted(runs.patched.upstream().items()):
        if result.outcome != "passed":
            stock = runs.stock.upstream()[test_id]
            rows.append(
                f"  {test_id.split('::')[-1]}: patched {result.outcome}, stock {stock.outcome}"
            )
            rows.append(f"    {result.root_cause}")
    return "\n".join(rows)


# ----------------------------------------------------------------------------- entrypoint process

# What flytekit's real `pyflyte-execute` process does when the agent gets SIGTERM: its exit code
# and what it uploads are all flytepropeller (and the training operator) get to see.
ENTRYPOINT_CASES = {
    # case: (patched plugin, nnodes, distributed error strategy, exit code, uploads)
    "stock": (False, 1, None, 0, []),  # the bug: a clean exit that uploads nothing
    # the fix: a pod that fails as the signal would (propeller: a system interruption) ...
    "single-node": (True, 1, None, 143, []),
    # ... unless each pod has an error file of its own, where the earliest (the root cause) wins
    "multi-node-error-aggregation": (True, 2, "Earliest", 0, ["error-*.pb"]),
    "multi-node-shared-error-file": (True, 2, None, 143, []),
}


def _start_entrypoint(case: str, plugin: Path, work: Path) -> subprocess.Popen[bytes]:
    _patched, nnodes, strategy, _, _ = ENTRYPOINT_CASES[case]
    (work / "hook").mkdir(parents=True)
    shutil.copy(LAUNCHER_HOOK, work / "hook" / "sitecustomize.py")
    (work / "code").mkdir()
    shutil.copy(ENTRYPOINT_TASK, work / "code")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "_F_", "FLYTE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(work / "hook"), str(plugin)])
    env["ELASTIC_AUDIT_NNODES"] = str(nnodes)
    if strategy:
        env.update({"_F_DES": strategy, "_F_WN": f"{case}-worker-0"})
    inputs = work / "inputs.pb"
    inputs.write_bytes(b"")  # an empty LiteralMap: the task takes no inputs
    pyflyte_execute = Path(sys.executable).with_name("pyflyte-execute")
    return subprocess.Popen(
        [
            str(pyflyte_execute),
            "--inputs",
            str(inputs),
            "--output-prefix",
            str(work / "outputs"),
            "--raw-output-data-prefix",
            str(work / "raw"),
            "--resolver",
            "flytekit.core.python_auto_container.default_task_resolver",
            "--",
            "task-module",
            ENTRYPOINT_TASK.stem,
            "task-name",
            "train",
        ],
        cwd=work / "code",
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=(work / "entrypoint.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def test_entrypoint_process_exit_code_and_uploads(sdist_tree: Path, tmp_path: Path) -> None:
    from flyteidl.core import errors_pb2

    stock = sdist_tree
    patched = shutil.copytree(sdist_tree, tmp_path / "patched")
    assert apply(patched).status == "applied"
    procs = {
        case: _start_entrypoint(case, patched if spec[0] else stock, tmp_path / case)
        for case, spec in ENTRYPOINT_CASES.items()
    }
    for case, proc in procs.items():
        _, _, _, exit_code, uploads = ENTRYPOINT_CASES[case]
        proc.wait(timeout=300)
        log = (tmp_path / case / "entrypoint.log").read_text()
        assert proc.returncode == exit_code, (case, log[-3000:])
        outputs = tmp_path / case / "outputs"
        uploaded = sorted(p.name for p in outputs.iterdir()) if outputs.exists() else []
        assert len(uploaded) == len(uploads), (case, uploaded)
        for name, pattern in zip(uploaded, uploads, strict=True):
            assert Path(name).match(pattern), (case, uploaded)
            error = errors_pb2.ErrorDocument.FromString((outputs / name).read_bytes()).error
            assert error.kind == errors_pb2.ContainerError.RECOVERABLE
            assert "terminated by signal SIGTERM" in error.message
            assert error.worker == f"{case}-worker-0"
