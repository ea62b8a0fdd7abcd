"""A loopback emulator of the GitHub REST endpoints pin-bump uses, for the tests.

State (repositories, commits with parents, branches, per-commit source files) lives in plain
dataclasses; the HTTP layer only translates requests against it, as moto splits models from
responses. Served: `GET /repos/{o}/{r}`, `/commits/{sha}`, `/branches` (paginated with a Link
header), `/compare/{base}...{head}`, `/tarball/{ref}` (302 to a codeload-like URL that serves a
.tar.gz built on the fly). Fault injection: an HTTP status or a delay for matching paths.

`serve_github_archives` adds what installers fetch: an HTTPS proxy that answers
`https://github.com/{o}/{r}/archive/{sha}.tar.gz` and `codeload.github.com/{o}/{r}/tar.gz/{sha}`
from the same state (404 for unknown commits), so `uv lock` runs for real on loopback. One
module over 400 lines on purpose: the API and the archive hosts serve one state and its faults.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import socketserver
import ssl
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from support.tls import self_signed


@dataclass
class FakeCommit:
    """A commit object in the fork network, with its parents and source files."""

    sha: str
    parents: tuple[str, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)  # repository path -> content
    message: str = ""


@dataclass
class FakeRepo:
    """One repository of the network: its branches and every commit that resolves under it.

    GitHub resolves any object of the fork network under every fork, so `commits` holds
    commits pushed elsewhere too (imposters): they resolve, but no branch here reaches them.
    """

    owner: str
    name: str
    default_branch: str = "master"
    branches: dict[str, str] = field(default_factory=dict)  # name -> tip sha
    commits: dict[str, FakeCommit] = field(default_factory=dict)
    archives: dict[str, bytes] = field(default_factory=dict)  # sha -> raw .tar.gz override

    @property
    def slug(self) -> str:
        return f"{self.owner}/{self.name}"

    def add(self, commit: FakeCommit, *, branch: str | None = None) -> FakeCommit:
        self.commits[commit.sha] = commit
        if branch:
            self.branches[branch] = commit.sha
        return commit

    def resolve(self, ref: str) -> FakeCommit | None:
        """A branch name, `refs/heads/<name>`, a full SHA or a unique SHA prefix (>= 7)."""
        name = ref.removeprefix("refs/heads/")
        if name in self.branches:
            return self.commits[self.branches[name]]
        ref = ref.lower()
        if ref in self.commits:
            return self.commits[ref]
        if re.fullmatch(r"[0-9a-f]{7,39}", ref):
            hits = [c for s, c in self.commits.items() if s.startswith(ref)]
            if len(hits) == 1:
                return hits[0]
        return None

    def ancestors(self, sha: str) -> list[str]:
        """`sha` and every commit reachable from it, nearest first."""
        seen: list[str] = []
        todo = [sha]
        while todo:
            cur = todo.pop(0)
            if cur in seen or cur not in self.commits:
                continue
            seen.append(cur)
            todo.extend(self.commits[cur].parents)
        return seen


@dataclass
class Fault:
    """Answer requests whose path matches `pattern` with `status` (after `delay` seconds)."""

    pattern: str
    status: int | None = 500
    delay: float = 0.0
    times: int | None = None  # None: every matching request


@dataclass
class RecordedRequest:
    """A request the emulator received (for assertions on paths and headers)."""

    method: str
    path: str
    headers: dict[str, str]


@dataclass
class GitHubState:
    """Everything the emulator serves."""

    repos: dict[str, FakeRepo] = field(default_factory=dict)  # "owner/name" lower-case
    token: str | None = None  # when set, requests must carry `Authorization: Bearer <token>`
    faults: list[Fault] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    page_size: int = 100

    def repo(self, owner: str, name: str, **kwargs: object) -> FakeRepo:
        r = FakeRepo(owner, name, **kwargs)  # type: ignore[arg-type]
        self.repos[r.slug.lower()] = r
        return r

    def injected_status(self, target: str) -> int | None:
        """The first fault matching `target` with uses left: counts a use, waits its delay, and
        returns its status (None: answer normally)."""
        for fault in self.faults:
            if re.search(fault.pattern, target) and fault.times != 0:
                if fault.times is not None:
                    fault.times -= 1
                time.sleep(fault.delay)
                return fault.status
        return None


def build_tarball(repo: FakeRepo, commit: FakeCommit, top: str | None = None) -> bytes:
    """A GitHub-style source archive with one top directory.

    The API's tarball names it `<owner>-<name>-<sha7>`; `github.com/.../archive/` URLs use
    `<name>-<sha>`.
    """
    top = top or f"{repo.owner}-{repo.name}-{commit.sha[:7]}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.pax_headers = {"comment": commit.sha}
        dirs: set[str] = set()
        for path in sorted(commit.files):
            parts = path.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(f"{top}/{d}")
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            data = commit.files[path]
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), mtime=0)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass  # tests read state.requests instead of stderr noise

    def _send(self, status: int, body: object = None, headers: dict[str, str] | None = None):
        raw = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"message": message, "status": str(status)})

    def do_GET(self) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        state.requests.append(RecordedRequest("GET", url.path, dict(self.headers.items())))
        status = state.injected_status(url.path)
        if status:
            return self._error(status, "injected fault")
        if url.path.startswith("/_codeload/"):
            return self._codeload(url.path)  # like codeload: no API token needed
        if state.token and self.headers.get("Authorization") != f"Bearer {state.token}":
            return self._error(401, "Bad credentials")
        m = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)?", url.path)
        if not m:
            return self._error(404, "Not Found")
        repo = state.repos.get(f"{m[1]}/{m[2]}".lower())
        if repo is None:
            return self._error(404, "Not Found")
        return self._repo_get(repo, m[3] or "", url.path, parse_qs(url.query))

    def _repo_get(self, repo: FakeRepo, rest: str, path: str, query: dict[str, list[str]]) -> None:
        """`GET /repos/{o}/{r}{rest}`."""
        if rest == "":
            return self._send(
                200, {"full_name": repo.slug, "default_branch": repo.default_branch, "fork": True}
            )
        if m2 := re.fullmatch(r"/commits/([^/]+)", rest):
            return self._commit(repo, m2[1])
        if rest == "/branches":
            return self._branches(repo, query, path)
        if m2 := re.fullmatch(r"/compare/(.+)\.\.\.(.+)", rest):
            return self._compare(repo, m2[1], m2[2])
        if m2 := re.fullmatch(r"/tarball/(.+)", rest):
            commit = repo.resolve(m2[1])
            if commit is None:
                return self._error(404, "Not Found")
            host = self.headers.get("Host", "127.0.0.1")
            location = f"http://{host}/_codeload/{repo.slug}/legacy.tar.gz/{commit.sha}"
            return self._send(302, None, {"Location": location})
        return self._error(404, "Not Found")

    def _commit(self, repo: FakeRepo, ref: str) -> None:
        commit = repo.resolve(ref)
        if commit is None:
            return self._error(422, f"No commit found for SHA: {ref}")
        self._send(
            200,
            {
                "sha": commit.sha,
                "commit": {"message": commit.message},
                "parents": [{"sha": p} for p in commit.parents],
            },
        )

    def _branches(self, repo: FakeRepo, query: dict[str, list[str]], path: str) -> None:
        per_page = min(int(query.get("per_page", ["30"])[0]), self.server.state.page_size)
        page = int(query.get("page", ["1"])[0])
        names = sorted(repo.branches)
        chunk = names[(page - 1) * per_page : page * per_page]
        body = [{"name": n, "commit": {"sha": repo.branches[n]}, "protected": False} for n in chunk]
        headers = {}
        if page * per_page < len(names):
            host = self.headers.get("Host", "127.0.0.1")
            nxt = f"http://{host}{path}?per_page={per_page}&page={page + 1}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._send(200, body, headers)

    def _compare(self, repo: FakeRepo, base_ref: str, head_ref: str) -> None:
        base, head = repo.resolve(base_ref), repo.resolve(head_ref)
        if base is None or head is None:
            return self._error(404, "Not Found")
        base_anc, head_anc = repo.ancestors(base.sha), repo.ancestors(head.sha)
        common = [s for s in head_anc if s in base_anc]
        if not common:
            return self._error(404, f"No common ancestor between {base_ref} and {head_ref}.")
        merge_base = common[0]
        ahead = [s for s in head_anc if s not in repo.ancestors(merge_base)]
        behind = [s for s in base_anc if s not in repo.ancestors(merge_base)]
        if not ahead and not behind:
            status = "identical"
        elif ahead and behind:
            status = "diverged"
        else:
            status = "ahead" if ahead else "behind"
        self._send(
            200,
            {
                "status": status,
                "ahead_by": len(ahead),
                "behind_by": len(behind),
                "total_commits": len(ahead),
                "base_commit": {"sha": base.sha},
                "merge_base_commit": {"sha": merge_base},
                "commits": [{"sha": s} for s in ahead[:1]],
            },
        )

    def _codeload(self, path: str) -> None:
        m = re.fullmatch(r"/_codeload/([^/]+)/([^/]+)/legacy\.tar\.gz/([0-9a-f]{40})", path)
        repo = self.server.state.repos.get(f"{m[1]}/{m[2]}".lower()) if m else None
        commit = repo.commits.get(m[3]) if repo and m else None
        if repo is None or commit is None:
            return self._error(404, "Not Found")
        data = repo.archives.get(commit.sha) or build_tarball(repo, commit)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: GitHubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


@dataclass
class GitHubSandbox:
    """A running emulator: `url` is what GITHUB_API_URL should be set to."""

    state: GitHubState
    url: str


@contextmanager
def _serving(server: socketserver.BaseServer, name: str) -> Iterator[str]:
    """Run `server` in a daemon thread for the block; yields its `http://host:port`."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name
    )
    thread.daemon = True
    thread.start()
    try:
        host, port = server.server_address[:2]  # type: ignore[misc]
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def serve_github(state: GitHubState) -> Iterator[GitHubSandbox]:
    """Serve `state` on 127.0.0.1 (a free port) for the duration of the block."""
    with _serving(_Server(state), "github-sandbox") as url:
        yield GitHubSandbox(state, url)


# --------------------------------------------------------------------------- archive host


@dataclass
class ArchiveHost:
    """A running HTTPS-intercepting proxy; `env` points uv (or pip) at it."""

    state: GitHubState
    proxy_url: str

    @property
    def env(self) -> dict[str, str]:
        # The proxy's certificate is self-signed: uv is told to skip verification for
        # github.com only (`--allow-insecure-host`); every other host is refused.
        return {"HTTPS_PROXY": self.proxy_url, "UV_INSECURE_HOST": "github.com"}


ARCHIVE_HOSTS = ("github.com", "codeload.github.com")


class _ArchiveHandler(BaseHTTPRequestHandler):
    """Serves archive URLs on the TLS side of a CONNECT tunnel."""

    def __init__(self, request, client_address, server, host: str) -> None:  # type: ignore[no-untyped-def]
        self.host = host
        super().__init__(request, client_address, server)

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        state: GitHubState = self.server.state  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        state.requests.append(
            RecordedRequest("GET", f"https://{self.host}{path}", dict(self.headers.items()))
        )
        # Faults match the full URL here: `github\.com/.*/archive/`.
        status = state.injected_status(f"https://{self.host}{path}")
        if status:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.host == "github.com":
            m = re.fullmatch(r"/([^/]+)/([^/]+)/archive/(.+)\.tar\.gz", path)
        else:
            m = re.fullmatch(r"/([^/]+)/([^/]+)/tar\.gz/(.+)", path)
        repo = state.repos.get(f"{m[1]}/{m[2]}".lower()) if m else None
        commit = repo.resolve(m[3]) if repo and m else None
        if repo is None or commit is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = build_tarball(repo, commit, top=f"{repo.name}-{commit.sha}")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-gzip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: GitHubState, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.state = state
        self.context = context


class _ProxyHandler(socketserver.StreamRequestHandler):
    server: _ProxyServer

    def handle(self) -> None:
        request = self.rfile.readline().decode("latin-1").split()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        host = request[1].rsplit(":", 1)[0] if len(request) == 3 else ""
        if request[:1] != ["CONNECT"] or host not in ARCHIVE_HOSTS:
            # Nothing else is served: an index or any other host fails fast, locally.
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        try:
            tls = self.server.context.wrap_socket(self.connection, server_side=True)
            _ArchiveHandler(tls, self.client_address, self.server, host)
        except (ssl.SSLError, OSError):
            pass  # the client gave up on the tunnel


@contextmanager
def serve_github_archives(state: GitHubState) -> Iterator[ArchiveHost]:
    """Serve the state's archives through an HTTPS proxy on 127.0.0.1 for the block."""
    with tempfile.TemporaryDirectory(prefix="github-archives-") as tmp:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*self_signed(tmp, ARCHIVE_HOSTS))
        with _serving(_ProxyServer(state, context), "github-archives") as url:
            yield ArchiveHost(state, url)
