"""GitHub REST client for pin-bump: is a commit on one of the fork's branches, and its source.

A commit pushed to *any* fork of a network resolves under every fork of it (objects are shared),
so "GET /repos/{owner}/{repo}/commits/{sha} answers 200" proves nothing about the fork. The
commit is accepted only when it is reachable from one of the repository's own branches:
for each branch tip, `GET /repos/{owner}/{repo}/compare/{tip}...{sha}` reports `ahead_by` = the
commits in `sha` that the tip lacks (`git log tip..sha`); 0 (status `identical` or `behind`)
means the branch contains the commit. `branches-where-head` is not used: it only lists branches
whose tip *is* the commit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from forensics import __version__
from forensics import archive as archive_mod
from forensics.archive import EXTRACT_LIMIT, MEMBER_LIMIT
from forensics.config import Secret
from forensics.errors import FailureKind, SourceError
from forensics.failures import http_status_kind, os_error, os_failure
from forensics.retry import ONE_TRY, Again, RetryPolicy, call
from forensics.secrets import masked_url

DEFAULT_API_URL = "https://api.github.com"
ARCHIVE_LIMIT = 256 * 1024**2  # bytes downloaded; flytekit's tarball is a few MB
MAX_BRANCHES = 200  # compare calls are one request each; unauthenticated quota is 60/hour


class GitHubError(SourceError):
    """GitHub could not confirm or deliver what pin-bump needs; it refuses (exit 2)."""

    def __init__(
        self,
        cause: str,
        *,
        target: str | None = None,
        retryable: bool = False,
        kind: FailureKind | None = None,
    ) -> None:
        super().__init__("github", cause, target=target, retryable=retryable, kind=kind)


class UnverifiedCommitError(GitHubError):
    """The commit does not exist in the repository, or is on none of its branches."""

    default_kind = FailureKind.NOT_FOUND


class UnsafeArchiveError(GitHubError):
    """The source archive is too large or holds a member that could escape its directory."""

    default_kind = FailureKind.REJECTED


@dataclass(frozen=True)
class Branch:
    """A branch of the repository and the commit at its tip."""

    name: str
    sha: str


@dataclass(frozen=True)
class CommitVerification:
    """Proof that `sha` is on `branch` of `repo`."""

    repo: str
    sha: str
    branch: str
    branches_checked: int


def _network_failure(e: requests.RequestException) -> tuple[str, FailureKind]:
    """Why a request got no answer, in a few words, and what that means: by the exception's
    type and the operating system's error behind it."""
    kind = os_failure(e) or FailureKind.UNREACHABLE
    if isinstance(e, requests.Timeout) or kind is FailureKind.TIMED_OUT:
        return "timed out", FailureKind.TIMED_OUT
    below = os_error(e)
    if below is not None and below.strerror:
        return below.strerror.strip().lower(), kind
    if isinstance(e, requests.ConnectionError):
        return type(e).__name__, kind
    return type(e).__name__, FailureKind.FAILED


# A GET is tried again on a connection failure or a 5xx answer (no Retry-After is read).
_RETRY_STATUSES = frozenset({500, 502, 503, 504})


class _Status(Exception):
    """A 5xx answer worth another try; `response` is the answer if none is left."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _again(e: Exception) -> Again | None:
    if isinstance(e, _Status):
        return Again(f"answered {e.response.status_code}")
    if isinstance(e, (requests.ConnectionError, requests.Timeout)):
        return Again("failed")
    return None


class GitHubClient:
    """A small GitHub REST v3 client bound to one repository (`owner/name`).

    The token is sent as `Authorization: Bearer ...` and is never part of a message or repr.
    GETs are retried on connection errors and 5xx answers (forensics/retry.py, short backoff).
    """

    def __init__(
        self,
        repo: str,
        *,
        api_url: str = DEFAULT_API_URL,
        token: Secret | None = None,
        timeout: float = 30.0,
        retries: int = 2,
    ) -> None:
        self.repo = repo
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self._token = token if token else None
        self.session = requests.Session()
        self._retry = RetryPolicy(
            retries=retries, backoff_factor=0.2, backoff_max=120.0, total_time=math.inf
        )
        adapter = HTTPAdapter(max_retries=ONE_TRY)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"elastic-audit/{__version__}",
            }
        )
        if self._token:
            self.session.headers["Authorization"] = f"Bearer {self._token.value}"

    @classmethod
    def from_env(
        cls, repo: str, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> GitHubClient:
        """Client configured from GITHUB_API_URL and GITHUB_TOKEN (gh/Actions conventions)."""
        env = os.environ if env is None else env
        api_url = env.get("GITHUB_API_URL") or DEFAULT_API_URL
        token = env.get("GITHUB_TOKEN")
        return cls(repo, api_url=api_url, token=Secret(token) if token else None, **kwargs)

    def __repr__(self) -> str:
        auth = "token" if self._token else "anonymous"
        return f"GitHubClient({self.repo!r}, api_url={masked_url(self.api_url)!r}, {auth})"

    def close(self) -> None:
        self.session.close()

    # ------------------------------------------------------------------ HTTP

    def _request(
        self, path: str, *, params: dict[str, Any] | None = None, stream: bool = False
    ) -> requests.Response:
        url = path if path.startswith(("http://", "https://")) else f"{self.api_url}{path}"

        def once() -> requests.Response:
            resp = self.session.get(url, params=params, timeout=self.timeout, stream=stream)
            if resp.status_code in _RETRY_STATUSES:
                _ = resp.content  # read (a streamed one too): the connection goes back to the pool
                raise _Status(resp)
            return resp

        try:
            return call(self._retry, once, _again)
        except _Status as answered:
            return answered.response
        except requests.RequestException as e:
            reason, kind = _network_failure(e)
            raise GitHubError(
                f"cannot reach {masked_url(self.api_url)}: {reason}",
                target=path,
                retryable=True,
                kind=kind,
            ) from None

    def _raise_for(self, resp: requests.Response, path: str) -> None:
        if resp.status_code < 400:
            return
        message = ""
        try:
            body = resp.json()
            if isinstance(body, dict):
                message = str(body.get("message", ""))
        except ValueError:
            pass
        detail = f": {message}" if message else ""
        if resp.status_code == 401:
            if self._token:
                raise GitHubError(
                    f"GitHub rejected the token (401{detail}); check GITHUB_TOKEN",
                    kind=FailureKind.AUTH_REFUSED,
                )
            raise GitHubError(
                f"GitHub requires authentication (401{detail}); set GITHUB_TOKEN",
                kind=FailureKind.AUTH_REFUSED,
            )
        if resp.status_code in (403, 429) and (
            resp.headers.get("X-RateLimit-Remaining") == "0" or "rate limit" in message.lower()
        ):
            hint = "" if self._token else "; set GITHUB_TOKEN for a higher quota"
            raise GitHubError(
                f"GitHub API rate limit exceeded{hint}", retryable=True, kind=FailureKind.THROTTLED
            )
        raise GitHubError(
            f"GitHub answered HTTP {resp.status_code}{detail}",
            target=path,
            retryable=resp.status_code >= 500,
            kind=http_status_kind(resp.status_code),
        )

    def _get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        resp = self._request(path, params=params)
        self._raise_for(resp, path)
        try:
            return resp.json()
        except ValueError:
            raise GitHubError(
                "GitHub answered with invalid JSON", target=path, kind=FailureKind.BAD_ANSWER
            ) from None

    # ------------------------------------------------------------------ API

    def get_commit(self, sha: str) -> str:
        """The full SHA of `sha` as resolved in the repository's network (`commits/{ref}`)."""
        path = f"/repos/{self.repo}/commits/{sha}"
        resp = self._request(path)
        if resp.status_code in (404, 422):
            if resp.status_code == 404 and not self._repo_exists():
                raise GitHubError(
                    f"repository {self.repo} not found (private? set GITHUB_TOKEN)",
                    target=path,
                    kind=FailureKind.NOT_FOUND,
                )
            raise UnverifiedCommitError(f"commit {sha} does not exist in {self.repo}")
        self._raise_for(resp, path)
        try:
            full = str(resp.json()["sha"])
        except (ValueError, KeyError, TypeError):
            raise GitHubError(
                "GitHub answered with an unexpected commit body",
                target=path,
                kind=FailureKind.BAD_ANSWER,
            ) from None
        return full

    def _repo_exists(self) -> bool:
        resp = self._request(f"/repos/{self.repo}")
        return resp.status_code == 200

    def default_branch(self) -> str:
        body = self._get_json(f"/repos/{self.repo}")
        return str(body.get("default_branch") or "")

    def branches(self) -> Iterator[Branch]:
        """Every branch, following the `Link: rel="next"` pagination."""
        url: str | None = f"/repos/{self.repo}/branches"
        params: dict[str, Any] | None = {"per_page": 100}
        while url:
            resp = self._request(url, params=params)
            self._raise_for(resp, url)
            try:
                page = resp.json()
            except ValueError:
                raise GitHubError(
                    "GitHub answered with invalid JSON", target=url, kind=FailureKind.BAD_ANSWER
                ) from None
            for item in page:
                yield Branch(str(item["name"]), str(item["commit"]["sha"]))
            url = resp.links.get("next", {}).get("url")
            params = None  # the next link carries them

    def contains(self, tip: str, sha: str) -> bool:
        """Whether `sha` is reachable from commit `tip` (an ancestor of it, or it).

        `compare/{tip}...{sha}`: status `identical` or `behind` (ahead_by 0) means contained;
        404 means the two share no history (zizmor's impostor-commit audit reads it the same).
        """
        path = f"/repos/{self.repo}/compare/{tip}...{sha}"
        resp = self._request(path, params={"per_page": 1})
        if resp.status_code == 404:
            return False
        self._raise_for(resp, path)
        try:
            body = resp.json()
            status, ahead_by = body["status"], int(body["ahead_by"])
        except (ValueError, KeyError, TypeError):
            raise GitHubError(
                "GitHub answered with an unexpected comparison",
                target=path,
                kind=FailureKind.BAD_ANSWER,
            ) from None
        return status in ("identical", "behind") and ahead_by == 0

    def verify_commit(self, sha: str) -> CommitVerification:
        """Refuse unless `sha` exists in the repository and is on one of its branches."""
        full = self.get_commit(sha)
        if full.lower() != sha.lower():
            raise UnverifiedCommitError(f"{sha} resolves to {full} in {self.repo}")
        default = self.default_branch()
        branches = sorted(self.branches(), key=lambda b: (b.name != default, b.name))
        for b in branches:
            if b.sha.lower() == sha.lower():
                return CommitVerification(self.repo, full, b.name, 0)
        for checked, b in enumerate(branches[:MAX_BRANCHES], start=1):
            if self.contains(b.sha, full):
                return CommitVerification(self.repo, full, b.name, checked)
        more = (
            f" (only the first {MAX_BRANCHES} were checked)" if len(branches) > MAX_BRANCHES else ""
        )
        raise UnverifiedCommitError(
            f"commit {sha} resolves in the fork network but is on none of the {len(branches)} "
            f"branches of {self.repo}{more}; it may come from another fork — refusing"
        )

    def download_tarball(self, sha: str, dest: Path, *, limit: int = ARCHIVE_LIMIT) -> Path:
        """Download `tarball/{sha}` (following the redirect) into `dest` and unpack it safely.

        Returns the unpacked source tree (the archive's single top directory).
        """
        path = f"/repos/{self.repo}/tarball/{sha}"
        resp = self._request(path, stream=True)
        with resp:
            if resp.status_code in (404, 422):
                raise UnverifiedCommitError(f"no source archive for {sha} in {self.repo}")
            self._raise_for(resp, path)
            declared = resp.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise UnsafeArchiveError(f"source archive is {declared} bytes (limit {limit})")
            archive = dest / "source.tar.gz"
            size = 0
            try:
                with archive.open("wb") as f:
                    for chunk in resp.iter_content(chunk_size=1 << 16):
                        size += len(chunk)
                        if size > limit:
                            raise UnsafeArchiveError(f"source archive exceeds {limit} bytes")
                        f.write(chunk)
            except requests.RequestException as e:
                reason, kind = _network_failure(e)
                raise GitHubError(
                    f"downloading the source archive failed: {reason}", target=path, kind=kind
                ) from None
        return extract_tarball(archive, dest / "src")


def extract_tarball(
    archive: Path, into: Path, *, max_bytes: int = EXTRACT_LIMIT, max_members: int = MEMBER_LIMIT
) -> Path:
    """Unpack a .tar.gz refusing absolute paths, '..', escaping links, devices and bombs."""
    try:
        return archive_mod.extract_tarball(
            archive, into, max_bytes=max_bytes, max_members=max_members
        )
    except archive_mod.UnsafeArchive as e:
        raise UnsafeArchiveError(f"source archive {e}") from None
