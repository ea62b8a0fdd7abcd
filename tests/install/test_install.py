"""Installed as users install it: a fresh venv, current pip, `pip install .`, no constraints file.

These tests build virtual environments from scratch and install the package from PyPI, so they
need the network and take minutes (see README, "Tests"). On Python 3.10 and 3.12 (the ends of the
supported range) they install the package plainly (no moto, no cheroot; every command's help runs
and `demo` names the `demo` extra), add the extra and run the demo end to end, then the pure unit
tests; on the running interpreter they time pip's resolution alone. With uv, on 3.10 and 3.12,
every direct dependency (and the `demo` extra's) is installed at the lowest version pyproject.toml
declares, and every command, `--version` and the demo run on it: a lower bound is a claim that
this test checks. The README's set-up (`pip install -c constraints.txt -e ".[test]"`) is resolved
on 3.10 and 3.12 too. An absent interpreter is a loud skip with the reason.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support import paths
from support.expected import EXPECTED_WITH_EVENTS

from forensics.sandbox.incident import REFERENCE_CHECKPOINT

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomli is tomllib's backport (a dependency on Python 3.10 only)
    import tomli as tomllib

ROOT = paths.ROOT
# pip's resolution alone (measured 37-54 s on 3.10-3.12 here) must stay well under 5 minutes;
# without the aiobotocore bound it did not finish in 15 (backtracking through boto3/aiobotocore/
# s3fs/fsspec).
RESOLVE_BUDGET_S = 180
# Resolution plus downloading and installing ~145 packages (measured 142-202 s on a loaded machine).
INSTALL_BUDGET_S = 420
# Unit tests of the pure parts (parsing, config, decisions): where Python versions differ
# (fromisoformat, enum and signal rendering, tomllib) they differ here first.
UNIT_TESTS = [
    "tests/core/test_timeutil.py",
    "tests/core/test_config.py",
    "tests/core/test_identifiers.py",
    "tests/core/test_detect.py",
    "tests/evidence/test_evidence.py",
]
# Those that format their lines with real torch need the test extra's multi-GB torch: not here.
UNIT_TESTS_WITHOUT_TORCH = "not torch_ and not flytekit_plugin_line"

# The `demo` extra's distributions (pyproject.toml): a plain install has none of them.
DEMO_EXTRA = ["moto", "cheroot"]
PRESENT_DISTRIBUTIONS = """
import sys
from importlib.metadata import PackageNotFoundError, distribution
for name in sys.argv[1:]:
    try:
        distribution(name)
        print(name)
    except PackageNotFoundError:
        pass
"""
# Run in the lowest-bounds venv: each `name==version ; marker` line of the file in argv[1] whose
# marker holds there, and the version installed ("ok" when they agree).
LOWEST_INSTALLED = """
import sys
from importlib.metadata import version
from packaging.requirements import Requirement
from packaging.version import Version
for line in open(sys.argv[1]).read().splitlines():
    req = Requirement(line)
    if req.marker is None or req.marker.evaluate():
        want = next(iter(req.specifier)).version
        got = version(req.name)
        print("ok" if Version(got) == Version(want) else "WRONG", req.name, "declared", want, "installed", got)
"""
# What a plain install must run (their --help loads each command's modules).
PLAIN_COMMANDS = ["scan", "show", "relaunch", "pin-bump", "fix", "fix apply", "watch"]

pytestmark = [pytest.mark.install, pytest.mark.timeout(1200)]


def _python_version(exe: str) -> str | None:
    try:
        out = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> tuple[str | None, list[str]]:
    """An interpreter of `version` (e.g. "3.10") and every place looked at, for the skip reason."""
    var = "ELASTIC_AUDIT_TEST_PYTHON" + version.replace(".", "")
    candidates = [os.environ.get(var), shutil.which(f"python{version}")]
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(
        glob.glob(f"{pyenv}/versions/{version}.*/bin/python{version}"), reverse=True
    )
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    looked = [f"${var}"] + [c for c in candidates[1:] if c]
    for exe in candidates:
        if exe and _python_version(exe) == version:
            return exe, looked
    return None, looked


def require_python(version: str) -> str:
    exe, looked = find_python(version)
    if exe is None:
        pytest.skip(
            f"Python {version} is not installed, so installing on {version} is NOT tested "
            f"(looked at: {', '.join(looked)}; set ELASTIC_AUDIT_TEST_PYTHON"
            f"{version.replace('.', '')} to an interpreter)"
        )
    return exe


def user_env() -> dict[str, str]:
    """The environment of a user's shell: no pip configuration of this machine (its constraints
    file, local wheel directories and extra indexes), no virtualenv or PYTHONPATH leaking in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    for keep in ("PIP_CERT", "PIP_INDEX_URL", "PIP_DEFAULT_TIMEOUT"):  # how this host reaches PyPI
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


def source_copy(tmp: Path) -> Path:
    """What `pip install .` builds from, copied so the build never writes into the checkout."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "forensics", src / "forensics", ignore=shutil.ignore_patterns("__pycache__")
    )
    return src


def user_cmd(
    cmd: list[str],
    *,
    cwd: Path,
    timeout: float,
    what: str,
    expect: int = 0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`cmd` (pip, the venv's console script...) as a user's shell runs it; exits `expect`."""
    try:
        r = subprocess.run(
            cmd, cwd=cwd, env=env or user_env(), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: did not finish in {timeout:.0f} s: {' '.join(cmd)}")
    assert r.returncode == expect, (
        f"{what} exited {r.returncode}, not {expect}:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    )
    return r


def fresh_venv(python: str, tmp: Path) -> Path:
    """A new virtual environment with the current pip from PyPI; returns its python."""
    venv = tmp / "venv"
    user_cmd([python, "-m", "venv", str(venv)], cwd=tmp, timeout=300, what="venv")
    py = venv / "bin" / "python"
    user_cmd(
        [str(py), "-m", "pip", "install", "-q", "-U", "pip"], cwd=tmp, timeout=300, what="pip -U"
    )
    return py


@pytest.mark.parametrize("version", ["3.10", "3.12"])
def test_pip_install_without_constraints_runs_the_demo(version, tmp_path):
    python = require_python(version)
    py = fresh_venv(python, tmp_path)
    src = source_copy(tmp_path)
    started = time.monotonic()
    user_cmd(
        [str(py), "-m", "pip", "install", "-q", str(src)],
        cwd=tmp_path,
        timeout=INSTALL_BUDGET_S,
        what=f"pip install . on Python {version}",
    )
    install_s = time.monotonic() - started
    user_cmd([str(py), "-m", "pip", "check"], cwd=tmp_path, timeout=120, what="pip check")
    started = time.monotonic()
    check_plain_install(py, tmp_path)
    plain_s = time.monotonic() - started

    # Then the extra, as a user adds it to the same environment, for the demo.
    started = time.monotonic()
    user_cmd(
        [str(py), "-m", "pip", "install", "-q", f"{src}[demo]"],
        cwd=tmp_path,
        timeout=INSTALL_BUDGET_S,
        what=f"pip install '.[demo]' on Python {version}",
    )
    extra_s = time.monotonic() - started
    user_cmd([str(py), "-m", "pip", "check"], cwd=tmp_path, timeout=120, what="pip check [demo]")

    where = user_cmd(
        [str(py), "-c", "import forensics; print(forensics.__file__)"],
        cwd=tmp_path,
        timeout=60,
        what="import",
    )
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "venv"), where.stdout

    # The console script, as a user runs it: the whole scan against the loopback sandbox.
    demo = user_cmd(
        [str(py.parent / "elastic-audit"), "demo", "-o", "json", "--no-progress"],
        cwd=tmp_path,
        timeout=600,
        what=f"elastic-audit demo on Python {version}",
    )
    check_demo_report(json.loads(demo.stdout))

    # The pure parts' own tests, run against the installed package on this Python.
    user_cmd(
        [str(py), "-m", "pip", "install", "-q", "pytest", "pytest-timeout"],
        cwd=tmp_path,
        timeout=300,
        what="pip install pytest",
    )
    user_cmd(
        [
            str(py),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            UNIT_TESTS_WITHOUT_TORCH,
            *(str(ROOT / t) for t in UNIT_TESTS),
        ],
        cwd=tmp_path,
        timeout=600,
        what=f"unit tests on Python {version}",
    )
    print(
        f"Python {version}: pip install . took {install_s:.0f} s, its checks {plain_s:.0f} s, "
        f"adding [demo] {extra_s:.0f} s"
    )


def check_demo_report(report: dict) -> None:
    """The demo reads Kubernetes events too: the reference incident's findings and one proved by
    an event alone."""
    found = {
        (f["execution"]["project"], f["execution"]["domain"], f["execution"]["name"],
         f["node_id"], f["attempt"]): f["verdict"]
        for f in report["findings"]
    }  # fmt: skip
    assert report["complete"] is True and found == EXPECTED_WITH_EVENTS
    ref = next(f for f in report["findings"] if f["execution"]["name"] == "azvg5f9v9974m78fvlf7")
    assert ref["verdict"] == "affected" and ref["signal"]["at"] == "2026-09-10T19:45:22Z"
    assert ref["checkpoint"]["uri"] == REFERENCE_CHECKPOINT
    assert ref["checkpoint"]["state"] == "empty"


def check_plain_install(py: Path, tmp: Path) -> None:
    """Without the `demo` extra: no moto or cheroot, every command but demo works, and demo says
    how to get the extra."""
    present = user_cmd(
        [str(py), "-c", PRESENT_DISTRIBUTIONS, *DEMO_EXTRA], cwd=tmp, timeout=60, what="dists"
    )
    assert present.stdout.split() == [], f"a plain install has {present.stdout}"
    script = str(py.parent / "elastic-audit")
    for command in PLAIN_COMMANDS:
        helped = user_cmd(
            [script, *command.split(), "--help"], cwd=tmp, timeout=120, what=f"{command} --help"
        )
        assert helped.stdout.startswith("Usage: elastic-audit " + command), helped.stdout
    demo = user_cmd([script, "demo"], cwd=tmp, timeout=120, what="demo without [demo]", expect=2)
    assert demo.stdout == ""
    (line,) = demo.stderr.splitlines()  # one line, no traceback
    assert line.startswith("elastic-audit: error: demo needs the demo extra (moto, "), line
    assert line.endswith("cheroot not installed): pip install 'elastic-audit[demo]'"), line


def test_pip_resolves_without_constraints_on_this_python(tmp_path):
    """pip alone (resolution, no install) on the interpreter running the suite."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    py = fresh_venv(getattr(sys, "_base_executable", sys.executable), tmp_path)
    src = source_copy(tmp_path)
    started = time.monotonic()
    user_cmd(
        [str(py), "-m", "pip", "install", "-q", "--dry-run", "--report", "report.json", str(src)],
        cwd=tmp_path,
        timeout=RESOLVE_BUDGET_S,
        what=f"pip's resolution of . on Python {version}",
    )
    resolve_s = time.monotonic() - started
    chosen = {
        i["metadata"]["name"].lower(): i["metadata"]["version"]
        for i in json.loads((tmp_path / "report.json").read_text())["install"]
    }
    # One botocore for boto3 and for the aiobotocore under flytekit's s3fs: pip really resolved.
    assert {"boto3", "botocore", "aiobotocore", "s3fs", "flytekit"} <= chosen.keys(), chosen
    print(f"Python {version}: pip resolved . in {resolve_s:.0f} s")


# The lowest-bounds install: resolving and installing ~150 packages with uv (measured 10-30 s per
# Python here with uv's cache warm), then every command's help and the demo.
LOWEST_INSTALL_BUDGET_S = 300
# What tests/conftest.py imports beyond the package (test tools, newest: not the bounds under test).
LOWEST_TEST_TOOLS = [
    "pytest",
    "pytest-timeout",
    "hypothesis",
    "jsonschema",
    "tomlkit",
    "cryptography",
]
# The guard's state on S3 relies on If-Match / If-None-Match, which the sandbox's moto must honour.
S3_STATE_TEST = (
    "tests/guard/test_guard_process.py::test_s3_state_writes_are_conditional_on_the_etag_read"
)


def lowest_constraints(extras: tuple[str, ...] = ("demo",)) -> dict[str, str]:
    """`name==lowest` (with its marker) for every dependency pyproject.toml declares, runtime and
    `extras`: each lower bound (`>=` or `==`) pinned, extras of a requirement dropped."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in extras:
        declared += project["optional-dependencies"][extra]
    out: dict[str, str] = {}
    for text in declared:
        req = Requirement(text)
        lows = [s.version for s in req.specifier if s.operator in (">=", "==", "~=")]
        assert len(lows) == 1, f"{text}: no single lower bound to test"
        marker = f" ; {req.marker}" if req.marker else ""
        out[canonicalize_name(req.name)] = f"{req.name}=={lows[0]}{marker}"
    return out


def uv_env() -> dict[str, str]:
    """A user's shell for uv: no uv configuration of this machine, no Python downloads, this
    host's way to PyPI (pip's certificate bundle and index, when set) given to uv."""
    env = user_env()
    env.update(UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    if "PIP_CERT" in os.environ:
        env["SSL_CERT_FILE"] = os.environ["PIP_CERT"]
    if "PIP_INDEX_URL" in os.environ:
        env["UV_DEFAULT_INDEX"] = os.environ["PIP_INDEX_URL"]
    return env


def uv_bin() -> str:
    from uv import find_uv_bin  # the test extra's uv

    return find_uv_bin()


def listed_commands(script: str, tmp: Path, *group: str) -> list[tuple[str, ...]]:
    """Every command the app's help lists under `group`, sub-commands of a group included."""
    helped = user_cmd([script, *group, "--help"], cwd=tmp, timeout=120, what="--help")
    _, _, listing = helped.stdout.partition("Commands:\n")
    out: list[tuple[str, ...]] = []
    for line in listing.splitlines():
        if line.startswith("  ") and line[2:3] not in (" ", ""):  # a name, not its help's next line
            out.append((*group, line.split()[0]))
            out += listed_commands(script, tmp, *out[-1])
    return out


@pytest.mark.parametrize("version", ["3.10", "3.12"])
def test_lowest_declared_versions_run_every_command_and_the_demo(version, tmp_path):
    """Every dependency at the lowest version pyproject.toml allows: a bound that admits a
    release without an API the code uses fails here (an import, a keyword, a proto field)."""
    python = require_python(version)
    src = source_copy(tmp_path)
    pins = lowest_constraints()
    constraints = tmp_path / "lowest.txt"
    constraints.write_text("\n".join(pins.values()) + "\n")
    venv = tmp_path / "venv"
    uv = uv_bin()

    started = time.monotonic()
    user_cmd(
        [uv, "venv", "-q", "--python", python, str(venv)],
        cwd=tmp_path,
        timeout=120,
        what="uv venv",
        env=uv_env(),
    )
    py = venv / "bin" / "python"
    user_cmd(
        [uv, "pip", "install", "-q", "--python", str(py), "-c", str(constraints), f"{src}[demo]"],
        cwd=tmp_path,
        timeout=LOWEST_INSTALL_BUDGET_S,
        what=f"install at the lowest declared versions on Python {version}",
        env=uv_env(),
    )
    install_s = time.monotonic() - started

    # What is installed is what was declared: each lower bound (its marker true on this Python).
    installed = user_cmd(
        [str(py), "-c", LOWEST_INSTALLED, str(constraints)], cwd=tmp_path, timeout=60, what="pins"
    )
    wrong = [line for line in installed.stdout.splitlines() if not line.startswith("ok ")]
    assert wrong == [], wrong

    started = time.monotonic()
    script = str(venv / "bin" / "elastic-audit")
    flytekit_low = pins["flytekit"].split("==")[1]
    shown = user_cmd([script, "--version"], cwd=tmp_path, timeout=120, what="--version")
    assert f"(flytekit {flytekit_low}," in shown.stdout, shown.stdout
    commands = listed_commands(script, tmp_path)
    assert {("scan",), ("demo",), ("fix", "apply")} <= set(commands), commands
    for command in commands:
        helped = user_cmd(
            [script, *command, "--help"], cwd=tmp_path, timeout=120, what=f"{command} --help"
        )
        assert helped.stdout.startswith("Usage: elastic-audit " + " ".join(command)), helped.stdout
    # A usage error is one line and exit 2 (typer.TyperException: typer 0.27.2 and newer).
    bad = user_cmd(
        [script, "scan", "--no-such-flag"], cwd=tmp_path, timeout=120, what="usage error", expect=2
    )
    assert bad.stderr.splitlines() == [
        "elastic-audit: error: No such option: --no-such-flag (see 'elastic-audit scan --help')"
    ], bad.stderr
    demo = user_cmd(
        [script, "demo", "-o", "json", "--no-progress"],
        cwd=tmp_path,
        timeout=600,
        what=f"elastic-audit demo at the lowest versions on Python {version}",
    )
    check_demo_report(json.loads(demo.stdout))

    # The pure parts' tests, and the guard's conditional S3 writes against the sandbox's moto.
    user_cmd(
        [uv, "pip", "install", "-q", "--python", str(py), *LOWEST_TEST_TOOLS],
        cwd=tmp_path,
        timeout=300,
        what="uv pip install pytest",
        env=uv_env(),
    )
    user_cmd(
        [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", UNIT_TESTS_WITHOUT_TORCH]
        + [str(ROOT / t) for t in [*UNIT_TESTS, S3_STATE_TEST]],
        cwd=tmp_path,
        timeout=600,
        what=f"tests at the lowest declared versions on Python {version}",
    )
    checks_s = time.monotonic() - started
    print(
        f"Python {version}: lowest declared versions installed in {install_s:.0f} s, "
        f"every command's help, the demo and the tests in {checks_s:.0f} s"
    )


# The README's set-up command, resolved (pip --dry-run: metadata only, no wheel of torch fetched)
# from a fresh venv with current pip (measured 170-180 s per Python here, most of it pip's
# resolution of ~190 packages).
SETUP_RESOLVE_BUDGET_S = 420


def constraint_pins(version: str) -> dict[str, str]:
    """constraints.txt's pins whose marker holds on Python `version`: name -> version."""
    env = {"python_version": version, "python_full_version": f"{version}.0"}
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                assert canonicalize_name(req.name) not in pins, (
                    f"two pins hold on {version}: {line}"
                )
                pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    return pins


@pytest.mark.parametrize("version", ["3.10", "3.12"])
def test_readme_setup_resolves_within_the_constraints(version, tmp_path):
    """`pip install -c constraints.txt -e ".[test]"` on the ends of the supported range: it
    resolves, and every package it chooses is one constraints.txt pins for that Python."""
    python = require_python(version)
    py = fresh_venv(python, tmp_path)
    src = source_copy(tmp_path)
    shutil.copy2(ROOT / "constraints.txt", src / "constraints.txt")
    started = time.monotonic()
    user_cmd(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "-q",
            "--dry-run",
            "--report",
            "report.json",
            "-c",
            str(src / "constraints.txt"),
            "-e",
            f"{src}[test]",
        ],
        cwd=tmp_path,
        timeout=SETUP_RESOLVE_BUDGET_S,
        what=f"the README's set-up, resolved on Python {version}",
    )
    resolve_s = time.monotonic() - started
    chosen = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads((tmp_path / "report.json").read_text())["install"]
    }
    pins = constraint_pins(version)
    unpinned = sorted(chosen.keys() - pins.keys() - {"elastic-audit"})
    assert unpinned == [], f"constraints.txt pins none of {unpinned} for Python {version}"
    assert chosen["torch"] == "2.13.0" and chosen["typer"] == pins["typer"], chosen
    print(f"Python {version}: the README's set-up resolved in {resolve_s:.0f} s")
