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


# Userinfo before a host (`user@`, `user:token@`, `x-access-token:${GITHUB_TOKEN}@`): pip takes it
# from the netloc before it splits the revision off the path at the last `@`
# (pip/_internal/vcs/versioncontrol.py, VersionControl.get_url_rev_and_auth).
_AUTH = r"(?:[^\s/@]+@)?"
_GITHUB = r"(?:www\.)?github\.com"
# The ref after `@` in a VCS URL runs to the fragment (`#egg=`, `#subdirectory=`).
_REF = r"(?P<ref>[^#\s]+)"


@dataclass(frozen=True)
class PinPatterns:
    """Regular expressions for the fork's URL forms, built once per repository.

    The forms pip, uv and Poetry take for a pin of a GitHub repository (docs/upstream.md, Pin
    bumping): archives (`/archive/<sha>.tar.gz`, codeload), and VCS URLs `git+https`,
    `git+http`, `git+ssh`, `git+git` and pip's scp-like `git+git@github.com:owner/name`, each
    with or without userinfo (a deploy token, `git@`).
    """

    repo: str
    urls: tuple[re.Pattern[str], ...]
    floating: re.Pattern[str]
    git_remote: re.Pattern[str]
    anywhere: re.Pattern[str]

    @classmethod
    def for_repo(cls, repo: str) -> PinPatterns:
        owner, name = (re.escape(p) for p in normalize_repo(repo).split("/"))
        slug = f"{owner}/{name}"
        # The VCS remote without `git+`: `https://[auth@]github.com/`, `ssh://git@github.com/`,
        # pip's scp-like `git@github.com:` (pip/_internal/vcs/git.py SCP_REGEX) and Poetry's
        # `git@github.com/` (python-poetry docs/dependency-specification.md, git dependencies).
        remote = (
            rf"(?:(?:https?|ssh|git)://{_AUTH}{_GITHUB}(?::\d+)?/|(?:\w+@)?github\.com[:/])"
            rf"{slug}(?:\.git)?"
        )
        forms = (
            rf"https?://{_AUTH}{_GITHUB}/{slug}/archive/(?P<ref>[^?#\s]+?)\.(?:tar\.gz|zip)",
            rf"https?://{_AUTH}codeload\.github\.com/{slug}/(?:tar\.gz|zip)/(?P<ref>[^?#/\s]+)",
            rf"git\+{remote}@{_REF}",
        )
        urls = tuple(re.compile(rf"(?:{f})(?P<fragment>#[^\s]*)?", re.I) for f in forms)
        floating = re.compile(rf"git\+{remote}/?(?P<fragment>#[^\s]*)?", re.I)
        git_remote = re.compile(rf"(?:git\+)?{remote}/?", re.I)
        # Any mention of the repository on GitHub, in any URL or remote spelling: a line or
        # value with one that is not a pin this tool can move is reported, never skipped.
        anywhere = re.compile(
            rf"(?<![A-Za-z0-9.-])(?:www\.|codeload\.|api\.)?github\.com(?::\d+)?[:/]+"
            rf"(?:repos/)?{slug}(?:\.git)?(?![A-Za-z0-9_.-])",
            re.I,
        )
        return cls(normalize_repo(repo), urls, floating, git_remote, anywhere)

    def match_url(self, url: str) -> re.Match[str] | None:
        """The match of a whole URL against one of the fork's pinned-URL forms."""
        for pattern in self.urls:
            m = pattern.fullmatch(url.strip())
            if m:
                return m
        return None

    def mentions(self, text: str) -> bool:
        """Whether `text` contains a URL of one of the fork's pin forms anywhere."""
        return any(p.search(text) for p in self.urls)

    def names_repo(self, text: str) -> bool:
        """Whether `text` mentions the fork's repository on GitHub at all (any URL form)."""
        return bool(self.anywhere.search(text))


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


@dataclass(frozen=True)
class Unmovable:
    """A line that names the fork as a dependency but holds no pin this tool can move: it is
    reported (and fails `--check`), never skipped. `text` is the line with userinfo masked."""

    rel: str
    line: int
    package: str | None
    reason: str
    text: str


@dataclass
class ManifestScan:
    """What one manifest contains: its text and the fork's pins and notices in it."""

    path: Path
    rel: str
    kind: str  # "pyproject" | "requirements"
    text: str
    pins: list[Pin] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    unmovable: list[Unmovable] = field(default_factory=list)


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
    return Notice(rel, line, f"pinned to ref {mask_userinfo(ref)!r}, not a commit; left as is")


# `scheme://userinfo@`: what a URL's userinfo looks like in any text the tool shows.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@]+)@")
# Parts of a userinfo that carry no secret: ssh's `git` user, the user name GitHub gives every
# installation token, and a whole `${NAME}` reference, which pip fills in from the environment
# when it reads a requirements file (pip/_internal/req/req_file.py, ENV_VAR_RE).
_PUBLIC_USERS = frozenset({"git", "x-access-token"})
_ENV_REFERENCE = re.compile(r"\$\{[A-Z0-9_]+\}")


def _masked_userinfo(userinfo: str) -> str:
    user, colon, password = userinfo.partition(":")
    shown_user = user if user in _PUBLIC_USERS or _ENV_REFERENCE.fullmatch(user) else "***"
    if not colon:
        return shown_user
    return f"{shown_user}:{password if _ENV_REFERENCE.fullmatch(password) else '***'}"


def mask_userinfo(text: str) -> str:
    """`text` with the credentials in every URL's userinfo masked.

    A deploy token rides in a pin as `https://x-access-token:TOKEN@github.com/...` or as
    `https://TOKEN@github.com/...` (GitHub takes a token as the user name alone): any user name
    and password is `***` unless it is one that carries no secret (`git`, `x-access-token`, a
    `${NAME}` the environment fills in)."""
    return _USERINFO.sub(lambda m: m["scheme"] + _masked_userinfo(m["userinfo"]) + "@", text)
