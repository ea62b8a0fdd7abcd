"""pin-bump's plan: read every manifest, splice the new commit into each stale pin, write it safely.

Manifests are parsed with the ecosystem's own parsers (`tomllib` for pyproject.toml, `packaging`
for requirement strings, pip's line rules for requirements files) but only the commit inside each
pin is spliced into the original text, so everything else stays byte for byte.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from forensics.errors import ElasticAuditError
from forensics.fsutil import FileSet, WriteFailed
from forensics.params import Param, ParamError
from forensics.pinbump.discover import discover
from forensics.pinbump.patterns import (
    DEFAULT_REPO,
    ManifestError,
    ManifestScan,
    Notice,
    Pin,
    PinPatterns,
    Unmovable,
    mask_userinfo,
    normalize_repo,
    normalize_sha,
)
from forensics.pinbump.pyproject import is_uv_workspace, scan_pyproject, toml_values
from forensics.pinbump.requirements import scan_requirements


class WriteError(ElasticAuditError):
    """Writing the bump failed part-way; every file was put back as it was (exit 2)."""


def scan_tree(root: Path, repo: str = DEFAULT_REPO) -> list[ManifestScan]:
    """Every manifest under `root` with its pins of `repo` (any unparseable one raises)."""
    root = root.resolve()
    patterns = PinPatterns.for_repo(repo)
    scans = []
    for path in discover(root):
        rel = path.relative_to(root).as_posix()
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ManifestError(Path(rel), None, f"cannot read: {e.strerror or e}") from e
        if path.name == "pyproject.toml":
            scans.append(scan_pyproject(path, rel, data, patterns))
        else:
            scans.append(scan_requirements(path, rel, data, patterns))
    return scans


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class FileChange:
    """One manifest to rewrite: its text before and after, and the pins that move in it."""

    path: Path
    rel: str
    before: str
    after: str
    pins: tuple[Pin, ...]

    def diff(self) -> str:
        return unified_diff(self.rel, self.before, self.after)

    @property
    def masks_credentials(self) -> bool:
        """Whether the diff shows a line with its credentials masked (its hunk cannot apply)."""
        return self.diff() != unified_diff(self.rel, self.before, self.after, mask=False)


@dataclass(frozen=True)
class BumpPlan:
    """Everything pin-bump would do, computed without writing anything."""

    root: Path
    repo: str
    sha: str
    pins: tuple[Pin, ...]  # selected pins (already at `sha` or not)
    unselected: tuple[Pin, ...]  # pins of the fork left alone because of --package
    notices: tuple[Notice, ...]
    changes: tuple[FileChange, ...]
    stale_locks: tuple[Path, ...]  # uv.lock files the change makes stale
    # Lines naming the fork as a dependency that hold no pin it can move: each fails --check.
    unmovable: tuple[Unmovable, ...] = ()

    @property
    def stale_pins(self) -> tuple[Pin, ...]:
        return tuple(p for p in self.pins if not p.at(self.sha))

    @property
    def from_commits(self) -> dict[str, int]:
        """Old commit → number of pins moving away from it (most common first)."""
        return dict(Counter(p.commit.lower() for p in self.stale_pins).most_common())

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)


def unified_diff(rel: str, before: str, after: str, *, mask: bool = True) -> str:
    """A `git diff`-style unified diff of one file, marking a missing final newline.

    The userinfo of every URL in it is masked (a pin may carry a deploy token): such a line no
    longer matches the file, so `git apply` refuses its hunk rather than write `***`."""
    out = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{rel}",
        tofile=f"b/{rel}",
    ):
        out.append(mask_userinfo(line) if mask else line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _splice(text: str, pins: Iterable[Pin], sha: str) -> str:
    for pin in sorted(pins, key=lambda p: p.offset, reverse=True):
        assert text[pin.offset : pin.offset + len(pin.commit)] == pin.commit
        text = text[: pin.offset] + sha + text[pin.offset + len(pin.commit) :]
    return text


def _check_rewrite(scan: ManifestScan, after: str, moved: Sequence[Pin], sha: str) -> None:
    """Re-parse the rewritten text: only the moved pins may differ, and they read `sha`."""
    if scan.kind == "pyproject":
        before_doc = toml_values(scan.text)
        after_doc = toml_values(after)
        differing = {p for p in before_doc if before_doc[p] != after_doc.get(p)}
        if len(differing) != len(moved) or before_doc.keys() != after_doc.keys():
            raise ManifestError(Path(scan.rel), None, "rewrite changed more than the pins")
    patterns_check = [(p.offset, p.commit) for p in moved]
    delta = 0
    for offset, commit in sorted(patterns_check):
        start = offset + delta
        if after[start : start + len(sha)] != sha:
            raise ManifestError(Path(scan.rel), None, "rewrite misplaced a commit")
        delta += len(sha) - len(commit)


def _stale_locks(root: Path, changed: Iterable[Path]) -> tuple[Path, ...]:
    """uv.lock beside each changed pyproject, or the uv workspace root's lock above it."""
    locks: set[Path] = set()
    for path in changed:
        if path.name != "pyproject.toml":
            continue
        for d in [path.parent, *path.parent.parents]:
            if not d.is_relative_to(root):
                break
            lock = d / "uv.lock"
            if lock.is_file() and (d == path.parent or is_uv_workspace(d / "pyproject.toml")):
                locks.add(lock)
                break
    return tuple(sorted(locks))


@dataclass
class _Selection:
    """The pins --package selects (all when it is empty), and the rewrites they need."""

    sha: str
    wanted: set[str]
    selected: list[Pin]
    unselected: list[Pin]
    notices: list[Notice]
    changes: list[FileChange]
    unmovable: list[Unmovable]

    def add(self, scan: ManifestScan) -> None:
        self.notices.extend(scan.notices)
        # One whose package is unknown is everyone's: --package never hides it.
        self.unmovable.extend(
            u for u in scan.unmovable if not self.wanted or u.package in self.wanted | {None}
        )
        chosen = [p for p in scan.pins if not self.wanted or p.package in self.wanted]
        self.unselected.extend(p for p in scan.pins if p not in chosen)
        self.selected.extend(chosen)
        moving = [p for p in chosen if not p.at(self.sha)]
        if not moving:
            return
        after = _splice(scan.text, moving, self.sha)
        _check_rewrite(scan, after, moving, self.sha)
        self.changes.append(FileChange(scan.path, scan.rel, scan.text, after, tuple(moving)))

    def refuse_unmatched(self, repo: str, root: Path) -> None:
        """A --package that names no pin is a typo or a wrong --repo: refuse it."""
        missing = sorted(
            self.wanted - {p.package for p in self.selected} - {u.package for u in self.unmovable}
        )
        if not missing:
            return
        present = sorted({p.package or "?" for p in self.unselected})
        raise ParamError(
            Param("package"),
            f" {', '.join(missing)} matches no pin of {repo} under {root}"
            + (f" (pinned packages: {', '.join(present)})" if present else ""),
        )


def plan_bump(
    root: Path, sha: str, *, repo: str = DEFAULT_REPO, packages: Sequence[str] = ()
) -> BumpPlan:
    """Scan `root` and compute the rewrite of every selected pin of `repo` to `sha`."""
    sha = normalize_sha(sha)
    repo = normalize_repo(repo)
    root = root.resolve()
    if not root.is_dir():
        raise ParamError(Param("root"), f" {root} is not a directory")
    wanted = {str(canonicalize_name(p)) for p in packages}
    selection = _Selection(sha, wanted, [], [], [], [], [])
    for scan in scan_tree(root, repo):
        selection.add(scan)
    selection.refuse_unmatched(repo, root)
    return BumpPlan(
        root=root,
        repo=repo,
        sha=sha,
        pins=tuple(selection.selected),
        unselected=tuple(selection.unselected),
        notices=tuple(selection.notices),
        changes=tuple(selection.changes),
        stale_locks=_stale_locks(root, (c.path for c in selection.changes)),
        unmovable=tuple(selection.unmovable),
    )


# --------------------------------------------------------------------------- writing


def _refuse_unsafe(originals: Mapping[Path, bytes]) -> None:
    """Refuse before writing anything: a file edited since the plan read it, or read-only."""
    for path, original in originals.items():
        try:
            current = path.read_bytes()
            mode = path.stat().st_mode
        except OSError as e:
            raise WriteError(f"{path}: {e.strerror or e}; nothing written") from e
        if current != original:
            raise WriteError(f"{path}: changed since it was read; nothing written")
        if not mode & 0o222:
            # Honour a read-only mark even as root, where permission checks never fail.
            raise WriteError(f"{path}: file is read-only; nothing written")
        if not os.access(path.parent, os.W_OK):
            raise WriteError(f"{path.parent}: directory is not writable; nothing written")


def apply_plan(plan: BumpPlan) -> FileSet:
    """Write every change of `plan` (all or nothing); the FileSet can roll them back."""
    originals = {c.path: c.before.encode("utf-8") for c in plan.changes}
    _refuse_unsafe(originals)
    files = FileSet(originals, suffix=".pin-bump")
    try:
        files.write({c.path: c.after.encode("utf-8") for c in plan.changes})
    except WriteFailed as e:
        msg = f"writing {e.path} failed ({e.error.strerror or e.error})"
        if e.unrestored:
            raise WriteError(
                f"{msg}; COULD NOT RESTORE: {', '.join(map(str, e.unrestored))}"
            ) from e.error
        raise WriteError(f"{msg}; every file was restored, nothing changed") from e.error
    return files
