"""The fork's pins in requirements files, read with pip's own line rules (continuations, comments).

pip's rules are in pip/_internal/req/req_file.py (join_lines, ignore_comments, break_args_options).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from forensics.pinbump.patterns import (
    COMMITISH,
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

# pip's own comment rule (pip/_internal/req/req_file.py COMMENT_RE).
_REQ_COMMENT = re.compile(r"(^|\s+)#.*$")
_EDITABLE = re.compile(r"(?:-e|--editable)(?:\s+|=)(?P<url>\S+)")


def is_requirements_file(path: Path) -> bool:
    """requirements*.txt, *.in (not MANIFEST.in), and *.txt in a `requirements/` directory."""
    name = path.name
    if fnmatch.fnmatch(name, "requirements*.txt"):
        return True
    if name.endswith(".in") and name.lower() != "manifest.in":
        return True
    return name.endswith(".txt") and path.parent.name == "requirements"


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
    m = patterns.match_url(url) or patterns.floating.fullmatch(url)
    if m:
        return _egg_name(m["fragment"]), url
    return None


def _args_tokens(tokens: list[str]) -> Iterator[str]:
    for token in tokens:
        if token.startswith("-"):
            return
        yield token


def _arguments(line: str) -> tuple[int, str] | None:
    """(offset, text) of a requirement line's argument part; None for an option line."""
    # pip's break_args_options: arguments end at the first token starting with '-'.
    editable = _EDITABLE.match(line)
    if editable:
        return editable.start("url"), editable["url"]
    if line.startswith("-"):
        return None  # -r / -c / --index-url lines: not requirements, never touched
    return 0, " ".join(_args_tokens(line.split(" ")))


def _scan_line(scan: ManifestScan, logical: _LogicalLine, patterns: PinPatterns) -> None:
    """The pin, notice or cannot-move report of one logical line that names the fork."""
    line = logical.text

    def cannot_move(reason: str, package: str | None = None) -> None:
        scan.unmovable.append(
            Unmovable(scan.rel, logical.first_line, package, reason, mask_userinfo(line))
        )

    arguments = _arguments(line)
    if arguments is None:
        cannot_move("an option line, not a requirement; pin-bump does not edit it")
        return
    arg_start, args = arguments
    found = _requirement_url(args, patterns)
    if found is None:
        cannot_move("cannot parse it as a requirement or a URL of the fork")
        return
    package, url = found
    name = str(canonicalize_name(package)) if package else None
    m = patterns.match_url(url)
    if m is None:
        if patterns.floating.fullmatch(url):
            msg = "not pinned to a commit (the default branch); left as is"
            scan.notices.append(Notice(scan.rel, logical.first_line, msg))
        else:
            cannot_move("a URL of the fork in a form pin-bump cannot rewrite", name)
        return
    offset = logical.offsets[line.find(url, arg_start) + m.start("ref")]
    number = line_of(scan.text, offset)
    if not COMMITISH.fullmatch(m["ref"]):
        scan.notices.append(ref_notice(scan.rel, number, m["ref"]))
        return
    if scan.text[offset : offset + len(m["ref"])] != m["ref"]:
        cannot_move("the commit is split across lines; join it first", name)
        return
    scan.pins.append(Pin(scan.path, scan.rel, number, "requirement", name, m["ref"], offset))
    if "--hash" in line[arg_start + len(args) :]:
        msg = "--hash pins the old archive's digest; regenerate it after the bump"
        scan.notices.append(Notice(scan.rel, number, msg))


def scan_requirements(path: Path, rel: str, data: bytes, patterns: PinPatterns) -> ManifestScan:
    """The fork's pins in a requirements file (pip's continuation and comment rules)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if patterns.names_repo(data.decode("utf-8", "replace")):
            decode_manifest(rel, data)  # raises with the line
        return ManifestScan(path, rel, "requirements", "")
    scan = ManifestScan(path, rel, "requirements", text)
    for logical in _logical_lines(text):
        if patterns.names_repo(logical.text):
            _scan_line(scan, logical, patterns)
    return scan
