"""`fix build`: a fixed wheel of one flytekitplugins-kfpytorch release, for teams without a fork."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from forensics.archive import UnsafeArchive, extract_tarball
from forensics.errors import UsageError
from forensics.fsutil import write_atomic
from forensics.params import Param, ParamError
from forensics.plugin_fix.check import check_source
from forensics.plugin_fix.layout import PLUGIN_DIST
from forensics.plugin_fix.patch import apply

LOCAL_LABEL = "elasticaudit.1"
# The handler came with flytekit PR #2064, first released in 1.10.3
# (docs/upstream.md#the-bug-chain).
FIRST_AFFECTED = Version("1.10.3")
PIP_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class BuildResult:
    """The wheel `fix build` wrote, and how the fix was fitted to the release."""

    release: str
    version: str
    wheel: Path
    sha256: str
    adapted: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "version": self.version,
            "wheel": str(self.wheel),
            "sha256": self.sha256,
            "adapted": list(self.adapted),
        }


def _release(text: str) -> Version:
    try:
        release = Version(text)
    except InvalidVersion:
        raise UsageError(f"{text!r} is not a version (e.g. 1.13.15)") from None
    if release.local is not None:
        raise UsageError(f"{text}: give the release as published (no local label)")
    if release < FIRST_AFFECTED:
        raise UsageError(
            f"{PLUGIN_DIST} {text} does not have the bug (the `except SignalException` handler came "
            f"in {FIRST_AFFECTED}, flytekit #2064): nothing to build"
        )
    return release


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    # This interpreter's pip, so the user's pip configuration (index URL, proxies, certificates,
    # pip.conf, PIP_* variables) is the one that applies.
    try:
        return subprocess.run(
            [sys.executable, "-m", "pip", *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=PIP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"pip {args[0]} did not finish in {PIP_TIMEOUT_S:.0f}s") from None


def _last_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    return (errors or lines or ["no output"])[-1]


def _download(release: str, dest: Path) -> Path:
    proc = _pip(
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        f"{PLUGIN_DIST}=={release}",
        "-d",
        str(dest),
    )
    if proc.returncode != 0:
        why = _last_error(proc)
        if "No matching distribution found" in why or "Could not find a version" in why:
            raise UsageError(
                f"{PLUGIN_DIST} {release} is not on the package index pip is configured for ({why})"
            )
        raise UsageError(f"pip download of {PLUGIN_DIST} {release} failed: {why}")
    found = sorted(dest.glob("*.tar.gz"))
    if len(found) != 1:
        raise UsageError(f"pip download of {PLUGIN_DIST} {release} gave no sdist")
    return found[0]


def _unpack(tarball: Path, dest: Path) -> Path:
    try:
        extract_tarball(tarball, dest)
    except UnsafeArchive as e:
        raise UsageError(f"{tarball.name}: {e}") from None
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise UsageError(f"{tarball.name}: not a single-directory sdist")
    return tops[0]


_SETUP_VERSION = re.compile(r"""^(__version__\s*=\s*)(["'])([^"']+)\2""", re.MULTILINE)


def _label(tree: Path, release: str, local: str) -> None:
    """Give the tree's version the local label, in setup.py (what setuptools builds) and PKG-INFO."""
    setup = tree / "setup.py"
    text = setup.read_text(encoding="utf-8")
    m = _SETUP_VERSION.search(text)
    if m is None or m.group(3) != release:
        raise UsageError(
            f"{PLUGIN_DIST} {release}: setup.py does not declare __version__ = {release!r}"
        )
    setup.write_text(text[: m.start(3)] + local + text[m.end(3) :], encoding="utf-8")
    info = tree / "PKG-INFO"
    info.write_text(
        info.read_text(encoding="utf-8").replace(
            f"\nVersion: {release}\n", f"\nVersion: {local}\n", 1
        ),
        encoding="utf-8",
    )


def build(release_text: str, out: Path) -> BuildResult:
    """Download the release's sdist through pip, apply the fix, build a `+elasticaudit.1` wheel."""
    release = str(_release(release_text))
    local = f"{release}+{LOCAL_LABEL}"
    if out.exists() and not out.is_dir():
        raise ParamError(Param("out"), f" {out}: not a directory")
    with tempfile.TemporaryDirectory(prefix="elastic-audit-build-") as tmp:
        work = Path(tmp)
        (work / "sdist").mkdir()
        tree = _unpack(_download(release, work / "sdist"), work / "src")
        before = check_source(tree)
        if before.status != "vulnerable":
            raise UsageError(
                f"{PLUGIN_DIST} {release} does not have the known bug "
                f"({before.status}: {before.reason}): nothing to build"
            )
        result = apply(tree)
        if result.status != "applied":
            raise UsageError(f"{PLUGIN_DIST} {release}: {result.status}: {result.reason}")
        _label(tree, release, local)
        (work / "wheel").mkdir()
        proc = _pip("wheel", "--no-deps", "--wheel-dir", str(work / "wheel"), str(tree))
        wheels = sorted((work / "wheel").glob("*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise UsageError(
                f"building the wheel of {PLUGIN_DIST} {local} failed: {_last_error(proc)}"
            )
        wheel = wheels[0]
        if f"-{local}-" not in wheel.name:
            raise UsageError(f"the wheel built is {wheel.name}, not version {local}")
        data = wheel.read_bytes()
        target = out / wheel.name
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(target, data)
        except OSError as e:  # the folder changed during the build: say so, never a traceback
            raise ParamError(
                Param("out"), f" {out}: cannot write {wheel.name} ({e.strerror})"
            ) from None
    return BuildResult(
        release, local, target.resolve(), hashlib.sha256(data).hexdigest(), result.adapted
    )
