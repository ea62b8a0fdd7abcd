"""The fork's pins in pyproject.toml: read with tomllib, located in the text by tomllib itself.

Pins are PEP 508 strings anywhere in the document (dependencies, optional-dependencies,
dependency-groups, tool.uv.override-dependencies, build-system.requires, ...) and the source
tables of uv (`tool.uv.sources`) and Poetry (`tool.poetry.*dependencies`, dependency groups).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from forensics.pinbump.patterns import (
    COMMITISH,
    ManifestError,
    ManifestScan,
    Notice,
    Pin,
    PinPatterns,
    Unmovable,
    decode_manifest,
    line_of,
    mask_userinfo,
    ref_notice,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomli is tomllib's backport (a dependency on Python 3.10 only)
    import tomli as tomllib

_TOML_LINE = re.compile(r"at line (\d+), column (\d+)")

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


def toml_values(text: str) -> dict[TomlPath, Any]:
    """Every scalar of a TOML document by its path (raises tomllib.TOMLDecodeError)."""
    return dict(_leaves(tomllib.loads(text)))


def is_uv_workspace(pyproject: Path) -> bool:
    """Whether this pyproject.toml declares a uv workspace (`[tool.uv.workspace]`)."""
    try:
        doc = tomllib.loads(pyproject.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return isinstance(doc.get("tool", {}).get("uv", {}).get("workspace"), dict)


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


# --------------------------------------------------------------------------- where pins live

_SourceTable = tuple[TomlPath, str, dict[str, Any]]  # path, package, table


def _entries(path: TomlPath, table: Any) -> Iterator[_SourceTable]:
    """The dict-valued entries of a source table (a list of them per package included)."""
    if not isinstance(table, dict):
        return
    for package, spec in table.items():
        specs = spec if isinstance(spec, list) else [spec]
        for i, one in enumerate(specs):
            if isinstance(one, dict):
                sub = (*path, package, i) if isinstance(spec, list) else (*path, package)
                yield sub, package, one


def _poetry_tables(poetry: dict[str, Any]) -> Iterator[_SourceTable]:
    for key, table in poetry.items():
        if isinstance(key, str) and key.endswith("dependencies"):
            yield from _entries(("tool", "poetry", key), table)
    groups = poetry.get("group")
    if not isinstance(groups, dict):
        return
    for group, body in groups.items():
        if isinstance(body, dict):
            path = ("tool", "poetry", "group", group, "dependencies")
            yield from _entries(path, body.get("dependencies"))


def _source_tables(data: dict[str, Any]) -> Iterator[_SourceTable]:
    """(path, package, table) for uv sources and Poetry dependency tables."""
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    uv = tool.get("uv")
    if isinstance(uv, dict):
        yield from _entries(("tool", "uv", "sources"), uv.get("sources"))
    poetry = tool.get("poetry")
    if isinstance(poetry, dict):
        yield from _poetry_tables(poetry)


_TomlNote = tuple[TomlPath, str, str]  # path, ref (or "" for an unsupported location), needle
_TomlUnmovable = tuple[TomlPath, str | None, str, str]  # path, package, reason, value


def _in_dependencies(path: TomlPath) -> bool:
    """Whether a value sits where a dependency is declared: `*dependencies` (PEP 621, PEP 735,
    uv's override/constraint lists, Poetry's tables), `build-system.requires`, uv sources."""
    keys = [k for k in path if isinstance(k, str)]
    return any(
        k.endswith("dependencies") or k in ("dependency-groups", "requires") for k in keys
    ) or keys[:3] == ["tool", "uv", "sources"]


@dataclass
class _TomlFinds:
    """Pins (as TOML paths) and notes on what is left alone, gathered from a parsed pyproject."""

    patterns: PinPatterns
    targets: list[_TomlTarget] = field(default_factory=list)
    notes: list[_TomlNote] = field(default_factory=list)
    unmovable: list[_TomlUnmovable] = field(default_factory=list)
    handled: set[TomlPath] = field(default_factory=set)

    def url_source(self, path: TomlPath, package: str, url: str) -> None:
        m = self.patterns.match_url(url)
        if not m:
            if self.patterns.names_repo(url):
                self.handled.add((*path, "url"))
                reason = "a URL of the fork in a form pin-bump cannot rewrite"
                self.unmovable.append(((*path, "url"), package, reason, url))
            return
        self.handled.add((*path, "url"))
        if COMMITISH.fullmatch(m["ref"]):
            self.targets.append(
                _TomlTarget((*path, "url"), package, url, m.start("ref"), m.end("ref"))
            )
        else:
            self.notes.append(((*path, "url"), m["ref"], url))

    def git_source(self, path: TomlPath, package: str, table: dict[str, Any]) -> None:
        self.handled.add((*path, "git"))
        rev = table.get("rev")
        if isinstance(rev, str) and COMMITISH.fullmatch(rev):
            self.handled.add((*path, "rev"))
            self.targets.append(_TomlTarget((*path, "rev"), package, rev, 0, len(rev)))
        elif rev is not None and not isinstance(rev, str):
            reason = "its rev is not a string"
            self.unmovable.append(((*path, "git"), package, reason, str(table.get("git"))))
        else:
            ref = rev or table.get("tag") or table.get("branch") or "default branch"
            self.notes.append(((*path, "git"), str(ref), str(ref)))

    def unknown_git(self, path: TomlPath, package: str, git: str) -> None:
        """A `git = ...` naming the fork in a spelling no installer's remote form matches."""
        self.handled.add((*path, "git"))
        reason = "a git remote of the fork in a form pin-bump cannot read"
        self.unmovable.append(((*path, "git"), package, reason, git))

    def requirement(self, path: TomlPath, value: str) -> None:
        """A string naming the fork: a pin, a floating ref, or (where a dependency is declared)
        one pin-bump cannot move; elsewhere (project.urls, a description) not a pin at all."""
        try:
            req = Requirement(value)
        except InvalidRequirement:
            req = None
        url = req.url if req is not None else None
        m = self.patterns.match_url(url) if url else None
        package = req.name if req is not None else None
        if m is not None and COMMITISH.fullmatch(m["ref"]):
            start = value.find(url) + m.start("ref")
            self.targets.append(_TomlTarget(path, req.name, value, start, start + len(m["ref"])))
        elif m is not None:
            self.notes.append((path, m["ref"], url))
        elif url and self.patterns.floating.fullmatch(url):
            self.notes.append((path, "the default branch", url))
        elif url or _in_dependencies(path):
            reason = (
                "a URL of the fork in a form pin-bump cannot rewrite"
                if url
                else "cannot parse it as a requirement with a URL"
            )
            self.unmovable.append((path, package, reason, value))
        elif self.patterns.mentions(value):
            self.notes.append((path, "", value))


def _toml_targets(data: dict[str, Any], patterns: PinPatterns) -> _TomlFinds:
    """Pins and notes of a parsed pyproject: source tables first, then every PEP 508 string."""
    finds = _TomlFinds(patterns)
    for path, package, table in _source_tables(data):
        url, git = table.get("url"), table.get("git")
        if isinstance(url, str):
            finds.url_source(path, package, url)
        if isinstance(git, str) and patterns.git_remote.fullmatch(git.strip()):
            finds.git_source(path, package, table)
        elif isinstance(git, str) and patterns.names_repo(git):
            finds.unknown_git(path, package, git)
    for path, value in _leaves(data):
        if path not in finds.handled and isinstance(value, str) and patterns.names_repo(value):
            finds.requirement(path, value)
    return finds


# --------------------------------------------------------------------------- locating in text


def _toml_error(rel: str, text: str, err: tomllib.TOMLDecodeError) -> ManifestError:
    m = _TOML_LINE.search(str(err))
    line = int(m.group(1)) if m else line_of(text, len(text))
    reason = _TOML_LINE.sub("", str(err)).replace("()", "").strip()
    return ManifestError(Path(rel), line, f"invalid TOML: {reason}")


def _sole_change(original: dict[TomlPath, Any], candidate: str) -> tuple[TomlPath, Any] | None:
    """The one value `candidate` changes against `original` (None: unparseable, 0 or 2+)."""
    try:
        changed_doc = toml_values(candidate)
    except tomllib.TOMLDecodeError:
        return None
    changed = {
        p
        for p in original.keys() | changed_doc.keys()
        if original.get(p, None) != changed_doc.get(p, None)
    }
    if len(changed) != 1:
        return None
    (path,) = changed
    return path, changed_doc.get(path)


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
            change = _sole_change(original, text[: occ.start()] + probe + text[occ.end() :])
            if change is None:
                continue
            path, value = change
            target = by_path.get(path)
            if target and target.commit == commit and value == target.replaced(probe):
                found[path] = occ.start()
    for t in targets:
        if t.path not in found:
            raise ManifestError(
                Path(rel),
                None,
                f"cannot locate the commit of {_dotted(t.path)} in the text (escaped string?)",
            )
    return found


def _note(rel: str, text: str, note: _TomlNote) -> Notice:
    note_path, ref, needle = note
    found = text.find(needle)
    line = line_of(text, found) if found >= 0 else 1
    if ref:
        return ref_notice(rel, line, ref)
    msg = f"{_dotted(note_path)} mentions the fork but is not a dependency pin; left as is"
    return Notice(rel, line, msg)


def _unmovable(rel: str, text: str, item: _TomlUnmovable) -> Unmovable:
    path, package, reason, value = item
    found = text.find(value)
    line = line_of(text, found) if found >= 0 else 1
    name = str(canonicalize_name(package)) if package else None
    return Unmovable(rel, line, name, f"{_dotted(path)}: {reason}", mask_userinfo(value))


def scan_pyproject(path: Path, rel: str, data: bytes, patterns: PinPatterns) -> ManifestScan:
    """The fork's pins in one pyproject.toml; malformed TOML raises ManifestError (file:line)."""
    text = decode_manifest(rel, data)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _toml_error(rel, text, e) from e
    scan = ManifestScan(path, rel, "pyproject", text)
    finds = _toml_targets(doc, patterns)
    offsets = _locate_in_toml(rel, text, doc, finds.targets) if finds.targets else {}
    for t in finds.targets:
        off = offsets[t.path]
        package = str(canonicalize_name(t.package)) if t.package else None
        scan.pins.append(
            Pin(path, rel, line_of(text, off), _dotted(t.path), package, t.commit, off)
        )
    scan.pins.sort(key=lambda p: p.offset)
    scan.notices.extend(_note(rel, text, note) for note in finds.notes)
    scan.unmovable.extend(_unmovable(rel, text, item) for item in finds.unmovable)
    return scan
