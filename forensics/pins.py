"""pin-bump's library: find the fork's commit pins in a monorepo, plan the bump, write it safely.

Manifests are parsed with the ecosystem's own parsers (`tomllib` for pyproject.toml, `packaging`
for requirement strings, pip's line rules for requirements files) but only the commit inside each
pin is spliced into the original text, so everything else stays byte for byte.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from forensics.errors import ElasticAuditError, UsageError
from forensics.fsutil import write_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomli is tomllib's backport (a dependency on Python 3.10 only)
    import tomli as tomllib

DEFAULT_REPO = "exa-labs/flytekit"
# Someone's local state, never the monorepo's manifests (SPEC §3.4): VCS data, installed
# packages and environments. Environments are also known by their marker, whatever their name.
SKIP_DIRS = frozenset({".git", "node_modules", "site-packages", ".venv", "venv", ".tox", ".nox"})
ENV_MARKERS = ("pyvenv.cfg", "conda-meta")

_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")
# A ref made only of 7-40 hex digits is a (possibly abbreviated) commit; anything else
# (`main`, `v1.16.31`, `refs/heads/x`) floats or names a tag and is left alone.
_COMMITISH = re.compile(r"[0-9a-fA-F]{7,40}")
# GitHub's rules: an owner is letters, digits and inner hyphens (at most 39); a repository
# name letters, digits, `.`, `-`, `_` (at most 100), and never `.` or `..` (path segments).
_REPO_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}")
_TOML_LINE = re.compile(r"at line (\d+), column (\d+)")
# pip's own comment rule (pip/_internal/req/req_file.py COMMENT_RE).
_REQ_COMMENT = re.compile(r"(^|\s+)#.*$")
_EDITABLE = re.compile(r"(?:-e|--editable)(?:\s+|=)(?P<url>\S+)")


class ManifestError(UsageError):
    """A manifest under --root cannot be read or parsed; names the file and line (exit 2)."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {reason}")


class WriteError(ElasticAuditError):
    """Writing the bump failed part-way; every file was put back as it was (exit 2)."""

    exit_code = 2


class LockError(ElasticAuditError):
    """`uv lock` failed for a project; every file was put back as it was (exit 2)."""

    exit_code = 2


# --------------------------------------------------------------------------- inputs


def normalize_sha(sha: str) -> str:
    """The full 40-hex commit in lower case; anything shorter or longer is refused."""
    value = sha.strip()
    if not _FULL_SHA.fullmatch(value):
        raise UsageError(
            f"{sha!r} is not a full commit SHA (40 hex digits); abbreviated SHAs and refs are "
            "refused because they can be ambiguous or move"
        )
    return value.lower()


def normalize_repo(repo: str) -> str:
    """`owner/name` in lower case (GitHub compares both case-insensitively)."""
    value = repo.strip().removesuffix(".git")
    if not _REPO_RE.fullmatch(value):
        raise UsageError(f"--repo {repo!r} is not OWNER/NAME")
    return value.lower()


# --------------------------------------------------------------------------- URL forms


@dataclass(frozen=True)
class PinPatterns:
    """Regular expressions for the fork's URL forms, built once per repository."""

    repo: str
    urls: tuple[re.Pattern[str], ...]
    git_remote: re.Pattern[str]

    @classmethod
    def for_repo(cls, repo: str) -> PinPatterns:
        owner, name = (re.escape(p) for p in normalize_repo(repo).split("/"))
        slug = f"{owner}/{name}"
        forms = (
            rf"https://github\.com/{slug}/archive/(?P<ref>[^?#\s]+?)\.(?:tar\.gz|zip)",
            rf"https://codeload\.github\.com/{slug}/(?:tar\.gz|zip)/(?P<ref>[^?#/\s]+)",
            rf"git\+https://github\.com/{slug}(?:\.git)?@(?P<ref>[^#\s]+)",
        )
        urls = tuple(re.compile(rf"(?:{f})(?P<fragment>#[^\s]*)?", re.I) for f in forms)
        remote = re.compile(
            rf"(?:git\+)?(?:https://github\.com/|ssh://git@github\.com/|git@github\.com:)"
            rf"{slug}(?:\.git)?/?",
            re.I,
        )
        return cls(normalize_repo(repo), urls, remote)

    def match_url(self, url: str) -> re.Match[str] | None:
        """The match of a whole URL against one of the fork's pinned-URL forms."""
        for pattern in self.urls:
            m = pattern.fullmatch(url.strip())
            if m:
                return m
        return None

    def mentions(self, text: str) -> bool:
        """Whether `text` contains a URL of one of the fork's forms anywhere."""
        return any(p.search(text) for p in self.urls)


# --------------------------------------------------------------------------- pins


@dataclass(frozen=True)
class Pin:
    """One commit pin of the fork in one manifest: where it is and what it points at."""

    path: Path  # the real file (symlinks resolved)
    rel: str  # path relative to --root, for people
    line: int
    location: str  # e.g. `project.dependencies[0]`, `tool.uv.sources.flytekit.rev`, `requirement`
    package: str | None  # canonical name when known
    commit: str  # the commit as written in the file
    offset: int  # character offset of `commit` in the file's text

    def at(self, sha: str) -> bool:
        return self.commit.lower() == sha


@dataclass(frozen=True)
class Notice:
    """Something found and deliberately left alone (a floating ref, an unknown location)."""

    rel: str
    line: int
    message: str


@dataclass
class ManifestScan:
    """What one manifest contains: its text and the fork's pins and notices in it."""

    path: Path
    rel: str
    kind: str  # "pyproject" | "requirements"
    text: str
    pins: list[Pin] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _decode(path: Path, rel: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ManifestError(Path(rel), line, "not valid UTF-8") from e


def _ref_notice(rel: str, line: int, ref: str) -> Notice:
    return Notice(rel, line, f"pinned to ref {ref!r}, not a commit; left as is")


# --------------------------------------------------------------------------- pyproject.toml


TomlPath = tuple[str | int, ...]


def _leaves(node: Any, prefix: TomlPath = ()) -> Iterator[tuple[TomlPath, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, (*prefix, index))
    else:
        yield prefix, node


def _dotted(path: TomlPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else f'"{part}"'
            out += f".{key}" if out else key
    return out


@dataclass(frozen=True)
class _TomlTarget:
    path: TomlPath
    package: str | None
    value: str
    start: int  # span of the commit inside `value`
    end: int

    @property
    def commit(self) -> str:
        return self.value[self.start : self.end]

    def replaced(self, sha: str) -> str:
        return self.value[: self.start] + sha + self.value[self.end :]


def _source_tables(data: dict[str, Any]) -> Iterator[tuple[TomlPath, str, dict[str, Any]]]:
    """(path, package, table) for uv sources and Poetry dependency tables."""
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}

    def entries(path: TomlPath, table: Any) -> Iterator[tuple[TomlPath, str, dict[str, Any]]]:
        if not isinstance(table, dict):
            return
        for package, spec in table.items():
            specs = spec if isinstance(spec, list) else [spec]
            for i, one in enumerate(specs):
                if isinstance(one, dict):
                    sub = (*path, package, i) if isinstance(spec, list) else (*path, package)
                    yield sub, package, one

    uv = tool.get("uv")
    if isinstance(uv, dict):
        yield from entries(("tool", "uv", "sources"), uv.get("sources"))
    poetry = tool.get("poetry")
    if isinstance(poetry, dict):
        for key, table in poetry.items():
            if isinstance(key, str) and key.endswith("dependencies"):
                yield from entries(("tool", "poetry", key), table)
        groups = poetry.get("group")
        if isinstance(groups, dict):
            for group, body in groups.items():
                if isinstance(body, dict):
                    yield from entries(
                        ("tool", "poetry", "group", group, "dependencies"), body.get("dependencies")
                    )


_TomlNote = tuple[TomlPath, str, str]  # path, ref (or "" for an unsupported location), needle


def _toml_targets(
    data: dict[str, Any], patterns: PinPatterns
) -> tuple[list[_TomlTarget], list[_TomlNote]]:
    """Pins (as TOML paths) and notes on what is left alone, from a parsed pyproject."""
    targets: list[_TomlTarget] = []
    notes: list[_TomlNote] = []
    handled: set[TomlPath] = set()

    for path, package, table in _source_tables(data):
        url, git = table.get("url"), table.get("git")
        if isinstance(url, str):
            m = patterns.match_url(url)
            if m:
                handled.add((*path, "url"))
                if _COMMITISH.fullmatch(m["ref"]):
                    targets.append(
                        _TomlTarget((*path, "url"), package, url, m.start("ref"), m.end("ref"))
                    )
                else:
                    notes.append(((*path, "url"), m["ref"], url))
        if isinstance(git, str) and patterns.git_remote.fullmatch(git.strip()):
            handled.add((*path, "git"))
            rev = table.get("rev")
            if isinstance(rev, str) and _COMMITISH.fullmatch(rev):
                handled.add((*path, "rev"))
                targets.append(_TomlTarget((*path, "rev"), package, rev, 0, len(rev)))
            else:
                ref = rev or table.get("tag") or table.get("branch") or "default branch"
                notes.append(((*path, "git"), str(ref), str(ref)))

    # A PEP 508 string anywhere (dependencies, optional-dependencies, dependency-groups,
    # tool.uv.override-dependencies, build-system.requires, ...) is a dependency pin.
    for path, value in _leaves(data):
        if path in handled or not isinstance(value, str) or not patterns.mentions(value):
            continue
        try:
            req = Requirement(value)
        except InvalidRequirement:
            req = None
        m = patterns.match_url(req.url) if req is not None and req.url else None
        if req is None or m is None:
            notes.append((path, "", value))
            continue
        if not _COMMITISH.fullmatch(m["ref"]):
            notes.append((path, m["ref"], req.url))
            continue
        start = value.find(req.url) + m.start("ref")
        targets.append(_TomlTarget(path, req.name, value, start, start + len(m["ref"])))
    return targets, notes


def _toml_error(rel: str, text: str, err: tomllib.TOMLDecodeError) -> ManifestError:
    m = _TOML_LINE.search(str(err))
    line = int(m.group(1)) if m else _line_of(text, len(text))
    reason = _TOML_LINE.sub("", str(err)).replace("()", "").strip()
    return ManifestError(Path(rel), line, f"invalid TOML: {reason}")


def _locate_in_toml(
    rel: str, text: str, data: dict[str, Any], targets: Sequence[_TomlTarget]
) -> dict[TomlPath, int]:
    """Character offset of each target's commit in `text`.

    For each textual occurrence of an old commit, tomllib itself says which value it belongs
    to: the occurrence is substituted and the document re-parsed; the occurrence is a target's
    when exactly that target's value changes, exactly as expected. Comments, keys and other
    strings that merely contain the same hex never qualify.
    """
    original = dict(_leaves(data))
    by_path = {t.path: t for t in targets}
    found: dict[TomlPath, int] = {}
    for commit in sorted({t.commit for t in targets}):
        probe = "0" * 40 if commit.lower() != "0" * 40 else "1" * 40
        occurrences = re.finditer(rf"(?<![0-9A-Za-z]){re.escape(commit)}(?![0-9A-Za-z])", text)
        for occ in occurrences:
            candidate = text[: occ.start()] + probe + text[occ.end() :]
            try:
                changed_doc = dict(_leaves(tomllib.loads(candidate)))
            except tomllib.TOMLDecodeError:
                continue
            changed = {
                p
                for p in original.keys() | changed_doc.keys()
                if original.get(p, None) != changed_doc.get(p, None)
            }
            if len(changed) != 1:
                continue
            (path,) = changed
            target = by_path.get(path)
            if target and target.commit == commit and changed_doc[path] == target.replaced(probe):
                found[path] = occ.start()
    for t in targets:
        if t.path not in found:
            raise ManifestError(
                Path(rel),
                None,
                f"cannot locate the commit of {_dotted(t.path)} in the text (escaped string?)",
            )
    return found


def scan_pyproject(path: Path, rel: str, data: bytes, patterns: PinPatterns) -> ManifestScan:
    """The fork's pins in one pyproject.toml; malformed TOML raises ManifestError (file:line)."""
    text = _decode(path, rel, data)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _toml_error(rel, text, e) from e
    scan = ManifestScan(path, rel, "pyproject", text)
    targets, notes = _toml_targets(doc, patterns)
    offsets = _locate_in_toml(rel, text, doc, targets) if targets else {}
    for t in targets:
        off = offsets[t.path]
        package = str(canonicalize_name(t.package)) if t.package else None
        scan.pins.append(
            Pin(path, rel, _line_of(text, off), _dotted(t.path), package, t.commit, off)
        )
    scan.pins.sort(key=lambda p: p.offset)
    for note_path, ref, needle in notes:
        found = text.find(needle)
        line = _line_of(text, found) if found >= 0 else 1
        if ref:
            scan.notices.append(_ref_notice(rel, line, ref))
        else:
            msg = f"{_dotted(note_path)} mentions the fork but is not a dependency pin; left as is"
            scan.notices.append(Notice(rel, line, msg))
    return scan


# --------------------------------------------------------------------------- requirements files


@dataclass(frozen=True)
class _LogicalLine:
    text: str  # joined, comment-stripped, stripped (pip's view of the line)
    offsets: tuple[int, ...]  # offset in the file of each character of `text` (-1: synthetic)
    first_line: int


def _physical_lines(text: str) -> Iterator[tuple[int, int, str]]:
    """(line number, offset, content without terminator), split as pip does (splitlines)."""
    offset = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        content = raw.splitlines()[0] if raw.splitlines() else ""
        yield number, offset, content
        offset += len(raw)


def _logical_lines(text: str) -> Iterator[_LogicalLine]:
    """pip's join_lines + ignore_comments, keeping where each character came from."""
    chars: list[str] = []
    offs: list[int] = []
    first = 0

    def finish() -> _LogicalLine | None:
        joined = "".join(chars)
        m = _REQ_COMMENT.search(joined)
        end = m.start() if m else len(joined)
        body = joined[:end]
        lead = len(body) - len(body.lstrip())
        stripped = body.strip()
        if not stripped:
            return None
        return _LogicalLine(stripped, tuple(offs[lead : lead + len(stripped)]), first)

    for number, offset, line in _physical_lines(text):
        continues = line.endswith("\\") and not _REQ_COMMENT.match(line)
        if not chars:
            first = number
        if continues:
            body = line.strip("\\")
            start = len(line) - len(line.lstrip("\\"))
            chars.extend(body)
            offs.extend(range(offset + start, offset + start + len(body)))
            continue
        if _REQ_COMMENT.match(line) and chars:
            chars.append(" ")  # pip: a comment ends a continuation but stays a comment
            offs.append(-1)
        chars.extend(line)
        offs.extend(range(offset, offset + len(line)))
        done = finish()
        chars, offs = [], []
        if done:
            yield done
    if chars:
        done = finish()
        if done:
            yield done


def _egg_name(fragment: str | None) -> str | None:
    if not fragment:
        return None
    for part in fragment.lstrip("#").split("&"):
        key, _, value = part.partition("=")
        if key == "egg" and value:
            return re.split(r"[\[;]", value, maxsplit=1)[0]
    return None


def _requirement_url(args: str, patterns: PinPatterns) -> tuple[str | None, str] | None:
    """(package, url) for a requirement line's argument part, or None if it is not a pin."""
    try:
        req = Requirement(args)
    except InvalidRequirement:
        req = None
    if req is not None and req.url:
        return req.name, req.url
    # A bare URL (optionally `url ; marker`), as pip accepts.
    url = re.split(r"\s+;|;\s", args, maxsplit=1)[0].strip()
    m = patterns.match_url(url)
    if m:
        return _egg_name(m["fragment"]), url
    return None


def scan_requirements(path: Path, rel: str, data: bytes, patterns: PinPatterns) -> ManifestScan:
    """The fork's pins in a requirements file (pip's continuation and comment rules)."""
    owner_name = patterns.repo.encode()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if owner_name in data.lower():
            text = _decode(path, rel, data)  # raises with the line
        return ManifestScan(path, rel, "requirements", "")
    scan = ManifestScan(path, rel, "requirements", text)
    for logical in _logical_lines(text):
        line = logical.text
        if not patterns.mentions(line):
            continue
        # pip's break_args_options: arguments end at the first token starting with '-'.
        editable = _EDITABLE.match(line)
        if editable:
            arg_start, args = editable.start("url"), editable["url"]
        elif line.startswith("-"):
            continue  # -r / -c / --index-url lines: not requirements, never touched
        else:
            arg_start = 0
            args = " ".join(_args_tokens(line.split(" ")))
        found = _requirement_url(args, patterns)
        if found is None:
            raise ManifestError(
                Path(rel), logical.first_line, f"cannot parse requirement: {line!r}"
            )
        package, url = found
        m = patterns.match_url(url)
        if m is None:
            continue
        index = line.find(url, arg_start)
        ref_at = index + m.start("ref")
        offset = logical.offsets[ref_at]
        if not _COMMITISH.fullmatch(m["ref"]):
            scan.notices.append(_ref_notice(rel, _line_of(text, offset), m["ref"]))
            continue
        if text[offset : offset + len(m["ref"])] != m["ref"]:
            # The commit is split across a line continuation: refuse rather than guess.
            raise ManifestError(
                Path(rel), logical.first_line, "the commit is split across lines; join it first"
            )
        name = str(canonicalize_name(package)) if package else None
        scan.pins.append(
            Pin(path, rel, _line_of(text, offset), "requirement", name, m["ref"], offset)
        )
        if "--hash" in line[arg_start + len(args) :]:
            scan.notices.append(
                Notice(
                    rel,
                    _line_of(text, offset),
                    "--hash pins the old archive's digest; regenerate it after the bump",
                )
            )
    return scan


def _args_tokens(tokens: list[str]) -> Iterator[str]:
    for token in tokens:
        if token.startswith("-"):
            return
        yield token


# --------------------------------------------------------------------------- discovery


def is_requirements_file(path: Path) -> bool:
    """requirements*.txt, *.in (not MANIFEST.in), and *.txt in a `requirements/` directory."""
    name = path.name
    if fnmatch.fnmatch(name, "requirements*.txt"):
        return True
    if name.endswith(".in") and name.lower() != "manifest.in":
        return True
    return name.endswith(".txt") and path.parent.name == "requirements"


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
            candidate = here / name
            if name != "pyproject.toml" and not is_requirements_file(candidate):
                continue
            real = candidate.resolve()
            if not real.is_relative_to(root) or not real.is_file():
                continue
            # A link inside root to a skipped place (a venv, node_modules) stays skipped.
            if _in_skipped_dir(real, root):
                continue
            if tracked is not None and real not in tracked:
                continue
            found.add(real)
    return sorted(found)


def _in_skipped_dir(path: Path, root: Path) -> bool:
    for parent in path.relative_to(root).parents:
        d = root / parent
        if d != root and _skipped(d):
            return True
    return False


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

    @property
    def stale_pins(self) -> tuple[Pin, ...]:
        return tuple(p for p in self.pins if not p.at(self.sha))

    @property
    def from_commits(self) -> dict[str, int]:
        """Old commit → number of pins moving away from it (most common first)."""
        return dict(Counter(p.commit.lower() for p in self.stale_pins).most_common())

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)


def unified_diff(rel: str, before: str, after: str) -> str:
    """A `git diff`-style unified diff of one file, marking a missing final newline."""
    out = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{rel}",
        tofile=f"b/{rel}",
    ):
        out.append(line)
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
        before_doc = dict(_leaves(tomllib.loads(scan.text)))
        after_doc = dict(_leaves(tomllib.loads(after)))
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
            if lock.is_file() and (d == path.parent or _is_uv_workspace(d / "pyproject.toml")):
                locks.add(lock)
                break
    return tuple(sorted(locks))


def _is_uv_workspace(pyproject: Path) -> bool:
    try:
        doc = tomllib.loads(pyproject.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return isinstance(doc.get("tool", {}).get("uv", {}).get("workspace"), dict)


def plan_bump(
    root: Path, sha: str, *, repo: str = DEFAULT_REPO, packages: Sequence[str] = ()
) -> BumpPlan:
    """Scan `root` and compute the rewrite of every selected pin of `repo` to `sha`."""
    sha = normalize_sha(sha)
    repo = normalize_repo(repo)
    root = root.resolve()
    if not root.is_dir():
        raise UsageError(f"--root {root} is not a directory")
    wanted = {str(canonicalize_name(p)) for p in packages}
    scans = scan_tree(root, repo)
    selected: list[Pin] = []
    unselected: list[Pin] = []
    notices: list[Notice] = []
    changes: list[FileChange] = []
    for scan in scans:
        notices.extend(scan.notices)
        chosen = [p for p in scan.pins if not wanted or p.package in wanted]
        unselected.extend(p for p in scan.pins if p not in chosen)
        selected.extend(chosen)
        moving = [p for p in chosen if not p.at(sha)]
        if not moving:
            continue
        after = _splice(scan.text, moving, sha)
        _check_rewrite(scan, after, moving, sha)
        changes.append(FileChange(scan.path, scan.rel, scan.text, after, tuple(moving)))
    if wanted:
        known = {p.package for p in selected}
        missing = sorted(wanted - known)
        if missing:
            present = sorted({p.package or "?" for p in unselected})
            raise UsageError(
                f"--package {', '.join(missing)} matches no pin of {repo} under {root}"
                + (f" (pinned packages: {', '.join(present)})" if present else "")
            )
    return BumpPlan(
        root=root,
        repo=repo,
        sha=sha,
        pins=tuple(selected),
        unselected=tuple(unselected),
        notices=tuple(notices),
        changes=tuple(changes),
        stale_locks=_stale_locks(root, (c.path for c in changes)),
    )


# --------------------------------------------------------------------------- writing


class FileSet:
    """Writes a set of files all or nothing, and can put them back afterwards.

    `originals` are the bytes each file must still hold when writing starts (the plan was
    computed from them); any difference, or a read-only file, refuses before anything is
    written. A failure part-way restores every file already written.
    """

    def __init__(self, originals: Mapping[Path, bytes]) -> None:
        self.originals = dict(originals)
        self.times: dict[Path, tuple[int, int]] = {}
        for path in self.originals:
            try:
                st = path.stat()
                self.times[path] = (st.st_atime_ns, st.st_mtime_ns)
            except OSError:
                pass
        self.written: list[Path] = []

    def validate(self, updates: Mapping[Path, bytes]) -> None:
        for path in updates:
            if path not in self.originals:
                raise WriteError(f"{path}: not part of the plan")
            try:
                current = path.read_bytes()
                mode = path.stat().st_mode
            except OSError as e:
                raise WriteError(f"{path}: {e.strerror or e}; nothing written") from e
            if current != self.originals[path]:
                raise WriteError(f"{path}: changed since it was read; nothing written")
            if not mode & 0o222:
                # Honour a read-only mark even as root, where permission checks never fail.
                raise WriteError(f"{path}: file is read-only; nothing written")
            if not os.access(path.parent, os.W_OK):
                raise WriteError(f"{path.parent}: directory is not writable; nothing written")

    def write(self, updates: Mapping[Path, bytes]) -> None:
        self.validate(updates)
        for path in sorted(updates):
            # Listed first: restore() compares bytes, so a file the write never reached is left
            # alone, and one it reached (or half-reached) is put back.
            self.written.append(path)
            try:
                write_atomic(path, updates[path], suffix=".pin-bump")
            except OSError as e:
                failed = self.restore()
                msg = f"writing {path} failed ({e.strerror or e})"
                if failed:
                    raise WriteError(
                        f"{msg}; COULD NOT RESTORE: {', '.join(map(str, failed))}"
                    ) from e
                raise WriteError(f"{msg}; every file was restored, nothing changed") from e
            except BaseException:  # Ctrl-C between two files: all or nothing still holds
                self.restore()
                raise

    def restore(self) -> list[Path]:
        """Put every written file back; returns the files that could not be restored."""
        failed = []
        for path in reversed(self.written):
            try:
                if path.read_bytes() != self.originals[path]:
                    write_atomic(path, self.originals[path], suffix=".pin-bump")
                if path in self.times:  # as it was, timestamps included (make, CI caches)
                    os.utime(path, ns=self.times[path])
            except OSError:
                failed.append(path)
        self.written = [p for p in self.written if p in failed]
        return failed


def apply_plan(plan: BumpPlan) -> FileSet:
    """Write every change of `plan` (all or nothing); the FileSet can roll them back."""
    originals = {c.path: c.before.encode("utf-8") for c in plan.changes}
    files = FileSet(originals)
    files.write({c.path: c.after.encode("utf-8") for c in plan.changes})
    return files


# --------------------------------------------------------------------------- uv lock


def find_uv() -> str | None:
    """The `uv` executable: on PATH, else beside the running interpreter (a venv's bin)."""
    return shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))


@dataclass(frozen=True)
class LockRun:
    """One `uv lock` run: the project directory and uv's output."""

    directory: Path
    returncode: int
    output: str


def _uv_error(output: str) -> str:
    """uv's `error:` line and its causes on one line (uv prints progress before them)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.startswith("error:")), 0)
    text = " ".join(lines[start:]) or "no output"
    return text if len(text) <= 400 else text[:397] + "..."


def lock_projects(
    locks: Sequence[Path], applied: FileSet, *, uv: str, timeout: float = 600.0
) -> list[LockRun]:
    """Run `uv lock` beside each stale lock; on any failure put every file back and raise."""
    snapshot = FileSet({lock: lock.read_bytes() for lock in locks})
    snapshot.written = list(locks)  # uv rewrites them in place: restore compares bytes
    runs: list[LockRun] = []
    for lock in locks:
        try:
            proc = subprocess.run(
                [uv, "lock"],
                cwd=lock.parent,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
            run = LockRun(lock.parent, proc.returncode, (proc.stderr or proc.stdout).strip())
        except (OSError, subprocess.TimeoutExpired) as e:
            run = LockRun(lock.parent, -1, str(e))
        except BaseException:  # Ctrl-C while uv runs: no half-locked tree either
            snapshot.restore()
            applied.restore()
            raise
        runs.append(run)
        if run.returncode != 0:
            failed = snapshot.restore() + applied.restore()
            msg = (
                f"uv lock failed in {lock.parent} (exit {run.returncode}): {_uv_error(run.output)}"
            )
            if failed:
                raise LockError(f"{msg}; COULD NOT RESTORE: {', '.join(map(str, failed))}")
            raise LockError(f"{msg}; every file was rolled back")
    return runs
