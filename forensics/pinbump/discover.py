"""Which manifests pin-bump reads: pyproject.toml and requirements files git tracks under --root.

Someone's local state is never the monorepo's manifests (docs/commands.md, pin-bump): untracked
and ignored files, VCS data, installed packages and environments. Environments are also known by
their marker, whatever their name.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from forensics.errors import UsageError
from forensics.pinbump.requirements import is_requirements_file

SKIP_DIRS = frozenset({".git", "node_modules", "site-packages", ".venv", "venv", ".tox", ".nox"})
ENV_MARKERS = ("pyvenv.cfg", "conda-meta")


def _skipped(d: Path) -> bool:
    return d.name in SKIP_DIRS or any((d / marker).exists() for marker in ENV_MARKERS)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, stdin=subprocess.DEVNULL, timeout=60
    )


def _git_tracked(root: Path) -> set[Path] | None:
    """Real paths of the files git tracks under `root`; None when `root` is not in a work tree."""
    try:
        inside = _git(root, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
        if inside.returncode != 0 or not inside.stdout.startswith(b"true"):
            return None  # not a repository (or git is absent below): walk the tree as it is
        listed = _git(root, "ls-files", "-z", "--cached", "--full-name", "--", ".")
    except FileNotFoundError:
        return None  # no git on this machine: nothing can say what is tracked
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"{root}: git cannot list the tracked files ({e})") from None
    if listed.returncode != 0:
        why = listed.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(
            f"{root} is in a git work tree but `git ls-files` failed "
            f"({why[-1] if why else 'no message'}); pin-bump edits only tracked files"
        )
    toplevel = Path(os.fsdecode(inside.stdout.splitlines()[1])).resolve()
    return {(toplevel / name).resolve() for name in os.fsdecode(listed.stdout).split("\0") if name}


def discover(root: Path) -> list[Path]:
    """Manifests under `root`, as real paths inside it, sorted and without duplicates.

    In a git work tree only the files git tracks (untracked and ignored files are someone's
    local state). Everywhere, skips `.git`, `node_modules`, `site-packages`, `.venv`/`venv`,
    `.tox`, `.nox` and any directory holding a `pyvenv.cfg` or `conda-meta/`; never follows a
    link (file or directory) that leads out of `root`.
    """
    root = root.resolve()
    tracked = _git_tracked(root)
    found: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _skipped(here / d))
        for name in filenames:
            real = _manifest(here / name, root, tracked)
            if real is not None:
                found.add(real)
    return sorted(found)


def _manifest(candidate: Path, root: Path, tracked: set[Path] | None) -> Path | None:
    """The real path of `candidate` when it is a manifest pin-bump may edit, else None."""
    if candidate.name != "pyproject.toml" and not is_requirements_file(candidate):
        return None
    real = candidate.resolve()
    if not real.is_relative_to(root) or not real.is_file():
        return None
    # A link inside root to a skipped place (a venv, node_modules) stays skipped.
    if _in_skipped_dir(real, root):
        return None
    if tracked is not None and real not in tracked:
        return None
    return real


def _in_skipped_dir(path: Path, root: Path) -> bool:
    for parent in path.relative_to(root).parents:
        d = root / parent
        if d != root and _skipped(d):
            return True
    return False
