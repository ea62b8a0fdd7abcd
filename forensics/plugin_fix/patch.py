"""The bundled kfpytorch plugin patch, and applying the fix to a source tree all or nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.errors import UsageError
from forensics.fsutil import FileSet, WriteFailed
from forensics.plugin_fix.check import analyze_task_source
from forensics.plugin_fix.layout import (
    PLUGIN_DIR,
    TASK_PY,
    TEST_FILE,
    data_text,
    sdist_version,
    setup_py_version,
)

PATCH_NAME = "0001-kfpytorch-signal-recoverable.patch"

_PATCH_RESOURCE = "kfpytorch-signal.patch"

# ----------------------------------------------------------------------------- the patch


def load_patch() -> str:
    """The bundled patch (git format, paths as in the flytekit repository)."""
    return data_text(_PATCH_RESOURCE)


@dataclass(frozen=True)
class Hunk:
    """One `@@` block: the lines it expects (`old`) and the lines it leaves (`new`)."""

    old_start: int
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    """The hunks of one file; `path` is relative to the flytekit repository root."""

    path: str
    hunks: tuple[Hunk, ...]


_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _hunk_body(
    lines: list[str], at: int, old_count: int, new_count: int
) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """(old lines, new lines, index of its last line) of the hunk whose header is `lines[at]`."""
    old: list[str] = []
    new: list[str] = []
    i = at
    # Counts drive the parse, so a removed line that starts with "-- " is never taken for the
    # signature separator that ends a format-patch mail.
    while len(old) < old_count or len(new) < new_count:
        i += 1
        body = lines[i]
        tag, content = body[:1], body[1:]
        if body.startswith("\\"):  # "\ No newline at end of file": not in our patch
            raise ValueError("patches without a final newline are not supported")
        if tag in (" ", "\n"):
            content = content if tag == " " else "\n"
            old.append(content)
            new.append(content)
        elif tag == "-":
            old.append(content)
        elif tag == "+":
            new.append(content)
        else:
            raise ValueError(f"malformed hunk line {body!r}")
    return tuple(old), tuple(new), i


def _hunk(lines: list[str], at: int, path: str | None) -> tuple[Hunk, int]:
    """The hunk starting at header line `at`, and the index of its last line."""
    m = _HUNK_HEADER.match(lines[at])
    if m is None or path is None:
        raise ValueError(f"malformed hunk header {lines[at]!r}")
    old, new, end = _hunk_body(lines, at, int(m.group(2) or 1), int(m.group(4) or 1))
    return Hunk(int(m.group(1)), old, new), end


def parse_patch(text: str) -> tuple[FilePatch, ...]:
    """Parse a git-format patch of modified text files (no renames, modes or binaries)."""
    lines = text.splitlines(keepends=True)
    files: list[FilePatch] = []
    i = 0
    path: str | None = None
    hunks: list[Hunk] = []
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            if path is not None:
                files.append(FilePatch(path, tuple(hunks)))
            path, hunks = None, []
        elif line.startswith("+++ "):
            target = line[4:].rstrip("\n")
            if not target.startswith("b/"):
                raise ValueError(f"unsupported patch target {target!r}")
            path = target[2:]
        elif line.startswith("@@"):
            hunk, i = _hunk(lines, i, path)
            hunks.append(hunk)
        i += 1
    if path is not None:
        files.append(FilePatch(path, tuple(hunks)))
    if not files:
        raise ValueError("the patch modifies no file")
    return tuple(files)


# ----------------------------------------------------------------------------- targets

_KIND_TEXT = {
    "checkout": "flytekit checkout",
    "plugin": "flytekit-kf-pytorch plugin directory",
    "sdist": "unpacked flytekitplugins-kfpytorch sdist",
}


@dataclass(frozen=True)
class Target:
    """A source tree the patch can apply to: a flytekit checkout, the plugin dir, or an sdist.

    `prefix` is what the patch's repository paths lose to become paths under `root`.
    """

    root: Path
    kind: str
    prefix: str
    version: str | None = None

    @property
    def description(self) -> str:
        version = f" {self.version}" if self.version else ""
        return f"{_KIND_TEXT[self.kind]}{version}"

    def path_of(self, repo_path: str) -> Path:
        if not repo_path.startswith(self.prefix):
            raise UsageError(f"the patch touches {repo_path}, outside the plugin directory")
        return self.root / repo_path[len(self.prefix) :]


def _classify(root: Path) -> Target | None:
    if (root / PLUGIN_DIR / TASK_PY).is_file():
        return Target(root, "checkout", "", None)
    if not (root / TASK_PY).is_file():
        return None
    prefix = PLUGIN_DIR + "/"
    version = sdist_version(root)
    if version is not None:
        return Target(root, "sdist", prefix, version)
    if (root / "setup.py").is_file() or (root / "pyproject.toml").is_file():
        return Target(root, "plugin", prefix, setup_py_version(root))
    return None


def detect_target(directory: Path | str) -> Target:
    """Which kind of source tree `directory` is; UsageError (exit 2) when it is none of them."""
    root = Path(directory)
    if not root.exists():
        raise UsageError(f"{root}: no such directory")
    if not root.is_dir():
        hint = " (unpack the sdist first: tar xzf FILE)" if root.name.endswith(".tar.gz") else ""
        raise UsageError(f"{root}: not a directory{hint}")
    target = _classify(root)
    if target is not None:
        return target
    if (root / TASK_PY).is_file():
        raise UsageError(
            f"{root} holds flytekitplugins/kfpytorch but no setup.py, pyproject.toml or PKG-INFO: "
            "it looks like an installed package; patch a source tree and reinstall from it"
        )
    nested = sorted(p for p in root.iterdir() if p.is_dir() and _classify(p) is not None)
    hint = f"; did you mean {nested[0]}?" if len(nested) == 1 else ""
    raise UsageError(
        f"{root} is not a flytekit checkout, the flytekit-kf-pytorch plugin directory or an "
        f"unpacked flytekitplugins-kfpytorch sdist (no {PLUGIN_DIR}/{TASK_PY} or {TASK_PY}){hint}"
    )


# ----------------------------------------------------------------------------- applying


@dataclass(frozen=True)
class ApplyResult:
    """What `apply` found or did: applied, already-applied, would-apply or cannot-apply.

    `adapted` says how the fix was fitted to the release (see forensics.plugin_fix.rewrite.Era).
    """

    target: Target
    status: str
    files: tuple[str, ...]
    reason: str
    adapted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "target": str(self.target.root),
            "kind": self.target.kind,
            "version": self.target.version,
            "files": list(self.files),
            "reason": self.reason,
            "adapted": list(self.adapted),
        }


def _read_exact(path: Path) -> str | None:
    """The file's text as it is on disk (newline="": no silent CRLF conversion); None: not UTF-8."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return fh.read()
    except UnicodeDecodeError:
        return None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def apply(directory: Path | str, check_only: bool = False) -> ApplyResult:
    """Fix the plugin in a checkout, plugin dir or unpacked sdist of any affected release.

    By syntax (forensics.plugin_fix.rewrite): the `except SignalException` handler must be
    exactly the known bug, wherever it sits, and the fix written is the one the release's
    flytekit can run. The plugin's test module gets the signal tests fitted to the same release.
    Idempotent; with `check_only` nothing is written; otherwise all files are written or none.
    """
    # libcst costs ~1 s to import: only `apply` needs it, not `fix check` or pin-bump.
    from forensics.plugin_fix.rewrite import RewriteError, rewrite_task, rewrite_tests

    target = detect_target(directory)
    task_path = target.path_of(f"{PLUGIN_DIR}/{TASK_PY}")
    tests_path = target.path_of(f"{PLUGIN_DIR}/{TEST_FILE}")
    rel = tuple(str(p.relative_to(target.root)) for p in (task_path, tests_path))
    if not tests_path.is_file():
        return ApplyResult(target, "cannot-apply", rel, f"{rel[1]} is missing")
    task_text, tests_text = _read_exact(task_path), _read_exact(tests_path)
    if task_text is None or tests_text is None:
        bad = rel[0] if task_text is None else rel[1]
        return ApplyResult(target, "cannot-apply", rel, f"{bad} is not UTF-8 text")
    try:
        task = rewrite_task(task_text, analyze_task_source(task_text)[0] == "fixed")
        tests_state, tests_new = rewrite_tests(tests_text, task.era)
    except RewriteError as e:
        return ApplyResult(target, "cannot-apply", rel, f"the source differs from the fix: {e}")
    adapted = task.era.notes()
    if (task.state, tests_state) == ("applied", "applied"):
        return ApplyResult(target, "already-applied", rel, "the fix is already in place", adapted)
    if task.state != tests_state:
        done = rel[0] if task.state == "applied" else rel[1]
        return ApplyResult(
            target,
            "cannot-apply",
            rel,
            f"the fix is partly applied ({done} only); restore the files first",
            adapted,
        )
    if check_only:
        return ApplyResult(target, "would-apply", rel, "the fix applies", adapted)
    _write_fix(target, {task_path: (task_text, task.text), tests_path: (tests_text, tests_new)})
    return ApplyResult(target, "applied", rel, "patched", adapted)


def _write_fix(target: Target, texts: dict[Path, tuple[str, str]]) -> None:
    """Write the fixed files all or nothing: an error or Ctrl-C part-way puts every one back."""
    files = FileSet({path: before.encode("utf-8") for path, (before, _) in texts.items()})
    try:
        files.write({path: after.encode("utf-8") for path, (_, after) in texts.items()})
    except WriteFailed as e:
        why = f"cannot write in {target.root}: {e.error.strerror}"
        if e.unrestored:
            unrestored = ", ".join(map(str, e.unrestored))
            raise UsageError(f"{why}; COULD NOT RESTORE: {unrestored}") from None
        raise UsageError(f"{why}; nothing written") from None
