"""What a pin of the fork looks like: SHA and repository rules, URL forms, Pin and Notice."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from forensics.errors import UsageError
from forensics.params import Param, ParamError

DEFAULT_REPO = "exa-labs/flytekit"

_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")
# A ref made only of 7-40 hex digits is a (possibly abbreviated) commit; anything else
# (`main`, `v1.16.31`, `refs/heads/x`) floats or names a tag and is left alone.
COMMITISH = re.compile(r"[0-9a-fA-F]{7,40}")
# GitHub's rules: an owner is letters, digits and inner hyphens (at most 39); a repository
# name letters, digits, `.`, `-`, `_` (at most 100), and never `.` or `..` (path segments).
_REPO_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/(?!\.{1,2}$)[A-Za-z0-9_.-]{1,100}")


class ManifestError(UsageError):
    """A manifest under --root cannot be read or parsed; names the file and line (exit 2)."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {reason}")


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
        raise ParamError(Param("repo"), f" {repo!r} is not OWNER/NAME")
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


def line_of(text: str, offset: int) -> int:
    """The 1-based line number of a character offset."""
    return text.count("\n", 0, offset) + 1


def decode_manifest(rel: str, data: bytes) -> str:
    """A manifest's UTF-8 text; anything else is a ManifestError naming the line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ManifestError(Path(rel), line, "not valid UTF-8") from e


def ref_notice(rel: str, line: int, ref: str) -> Notice:
    """The notice for a pin of the fork to a ref that is not a commit (left as is)."""
    return Notice(rel, line, f"pinned to ref {ref!r}, not a commit; left as is")
