"""A loopback S3 for the sandbox: moto's server, seeded from a Scenario, with injectable faults."""

from __future__ import annotations

import http.client
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from forensics.sandbox.blobs import attempt_files, split_uri
from forensics.sandbox.s3_listing import ListingIndex
from forensics.sandbox.scenario import SandboxExecution, Scenario

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

# Requests served at once (each holds a thread through its injected latency); idle keep-alive
# connections wait in cheroot's selector, not in a thread.
_SERVER_THREADS = 32


@dataclass
class S3Rule:
    """Which requests a fault hits: bucket, key prefix (a listing's `prefix`), method, how often.

    `times=None` hits every matching request; `times=N` only the first N, then the request
    reaches moto (the "503 twice, then success" shape of a throttled S3 prefix).
    """

    bucket: str | None = None
    prefix: str = ""
    method: str | None = None
    times: int | None = None
    # Bucket listings only (GET /bucket?list-type=2...), not the objects under the prefix: a role
    # with s3:GetObject but without s3:ListBucket.
    listings: bool = False

    def matches(self, method: str, bucket: str, target: str, listing: bool = False) -> bool:
        return (
            (self.bucket is None or self.bucket == bucket)
            and target.startswith(self.prefix)
            and (self.method is None or self.method == method)
            and (listing or not self.listings)
        )


@dataclass
class S3Faults:
    """Faults the sandbox S3 injects in front of moto (a bucket not seeded is NoSuchBucket)."""

    latency: float = 0.0  # seconds added to every request
    slow_down: list[S3Rule] = field(default_factory=list)  # 503 SlowDown
    access_denied: list[S3Rule] = field(default_factory=list)  # 403 AccessDenied


@dataclass(frozen=True)
class S3Request:
    """One request the sandbox S3 answered (faults included)."""

    method: str
    path: str
    query: str
    status: int

    @property
    def is_listing(self) -> bool:
        return self.method == "GET" and "list-type=2" in self.query


def _error_document(code: str, message: str, resource: str, request_id: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode()


class _FaultMiddleware:
    """The sandbox's front: latency, 503 SlowDown, 403 AccessDenied and a record of every
    request; plain ListObjectsV2 pages from the listing index; everything else to `app` (moto).

    Requests are path-style (`/bucket/key`): botocore uses path-style for an IP-address
    endpoint, and the sandbox always serves on 127.0.0.1.
    """

    def __init__(self, app: Callable[..., Any], server: S3Server) -> None:
        self._app = app
        self._server = server
        self._lock = threading.Lock()
        self._hits: dict[int, int] = {}  # id(rule) -> requests it has answered
        # S3 applies a conditional write (If-Match / If-None-Match) atomically: of two racing
        # writes on one key, one succeeds and the other gets 412 PreconditionFailed (or 409
        # ConditionalRequestConflict) — "Conditional requests" in the S3 User Guide. moto 5.2's
        # put_object checks the condition and then stores (moto/s3/responses.py put_object),
        # with no lock between, so racing conditional PUTs are serialised here (the forwarding
        # app answers only once moto has answered).
        self._conditional = threading.Lock()

    def _hit(
        self, rules: list[S3Rule], method: str, bucket: str, target: str, listing: bool
    ) -> bool:
        with self._lock:
            for rule in rules:
                if not rule.matches(method, bucket, target, listing):
                    continue
                used = self._hits.get(id(rule), 0)
                if rule.times is None or used < rule.times:
                    self._hits[id(rule)] = used + 1
                    return True
        return False

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        # WSGI hands PATH_INFO over as latin-1-decoded bytes; keys are UTF-8.
        path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")
        query = environ.get("QUERY_STRING", "")
        bucket, _, key = path.lstrip("/").partition("/")
        target = key or parse_qs(query).get("prefix", [""])[0]
        listing = method == "GET" and not key
        faults = self._server.faults

        def record(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            self._server.requests.append(S3Request(method, path, query, int(status.split()[0])))
            return start_response(status, headers, *args)

        if faults.latency > 0:
            time.sleep(faults.latency)
        if bucket and self._hit(faults.access_denied, method, bucket, target, listing):
            return self._error(record, method, 403, "AccessDenied", "Access Denied", path)
        if bucket and self._hit(faults.slow_down, method, bucket, target, listing):
            message = "Please reduce your request rate."
            return self._error(record, method, 503, "SlowDown", message, path)
        if listing:
            page = self._server.listings.page(bucket, query)
            if page is not None:
                return self._answer(record, page)
        if method in ("GET", "HEAD"):
            return self._app(environ, record)
        try:  # a write: listings read the bucket anew once moto has answered
            if method == "PUT" and ("HTTP_IF_MATCH" in environ or "HTTP_IF_NONE_MATCH" in environ):
                with self._conditional:
                    return self._app(environ, record)
            return self._app(environ, record)
        finally:
            self._server.listings.changed()

    @staticmethod
    def _answer(start_response: Callable[..., Any], body: bytes) -> list[bytes]:
        headers = [
            ("Content-Type", "application/xml"),
            ("Content-Length", str(len(body))),
            ("x-amz-request-id", uuid.uuid4().hex[:16].upper()),
        ]
        start_response("200 OK", headers)
        return [body]

    @staticmethod
    def _error(
        start_response: Callable[..., Any],
        method: str,
        status: int,
        code: str,
        message: str,
        resource: str,
    ) -> list[bytes]:
        request_id = uuid.uuid4().hex[:16].upper()
        # Like S3, a HEAD error has no body: clients see only the status.
        body = b"" if method == "HEAD" else _error_document(code, message, resource, request_id)
        reason = {403: "Forbidden", 503: "Service Unavailable"}[status]
        headers = [
            ("Content-Type", "application/xml"),
            ("Content-Length", str(len(body))),
            ("x-amz-request-id", request_id),
        ]
        start_response(f"{status} {reason}", headers)
        return [body]


# Hop-by-hop headers (RFC 9110 section 7.6.1) and those the forwarded request sets anew.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "expect"}
)


class _Forward:
    """WSGI app that sends each request on to moto's server and answers with moto's answer.

    moto's documented in-process server (`moto.server.ThreadedMotoServer`) takes no WSGI
    middleware, so the faults sit in front of it, in this process, on their own port.
    """

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port
        self._local = threading.local()  # one connection per server thread

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self._host, self._port, timeout=60)
        return conn

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        length = environ.get("CONTENT_LENGTH")
        stream = environ["wsgi.input"]
        body = stream.read(int(length)) if length else stream.read()
        headers = {
            name[5:].replace("_", "-").title(): value
            for name, value in environ.items()
            if name.startswith("HTTP_") and name[5:].replace("_", "-").lower() not in _HOP_BY_HOP
        }
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        if body or environ["REQUEST_METHOD"] in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        conn = self._connection()
        try:
            conn.request(environ["REQUEST_METHOD"], environ["REQUEST_URI"], body, headers)
            answer = conn.getresponse()
            data = answer.read()
        except BaseException:
            conn.close()
            raise
        kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP]
        start_response(f"{answer.status} {answer.reason}", kept)
        return [data]


def _naive_utc(t: datetime) -> datetime:
    # moto keeps LastModified as naive UTC (its utcnow()) and formats it with strftime.
    if t.tzinfo is None:
        raise ValueError("SandboxObject.last_modified must be timezone-aware")
    return t.astimezone(timezone.utc).replace(tzinfo=None)


class S3Server:
    """moto's S3 on a free loopback port, seeded from `scenario`, faults in front of it.

    moto keeps S3 state in process-wide backends, so one S3Server may run per process at a
    time; its state is reset when it starts and when it stops. Two servers in this process:
    moto's documented `ThreadedMotoServer` on a loopback port of its own, and in front of it,
    on the port clients use, the faults and the record served by cheroot, which keeps
    connections alive as S3 does (werkzeug's server, moto's, closes each after one answer).
    """

    _running: S3Server | None = None
    _running_lock = threading.Lock()

    def __init__(self, scenario: Scenario, faults: S3Faults | None = None) -> None:
        self.scenario = scenario
        self.faults = faults if faults is not None else S3Faults()
        self.requests: list[S3Request] = []
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None
        self._moto: Any = None  # moto.server.ThreadedMotoServer
        self.listings = ListingIndex(_moto_s3_backend)

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("S3Server is not started")
        return self._url

    def start(self) -> str:
        """Seed, start serving, and return the endpoint URL `http://127.0.0.1:<port>`."""
        if self._url is not None:
            return self._url
        try:
            from cheroot.wsgi import Server as WSGIServer
            from moto.server import ThreadedMotoServer
        except ImportError as e:  # `demo` checks for its extra before it gets here
            raise ImportError(
                f"the sandbox S3 needs moto's server: pip install 'moto[server,s3]' cheroot ({e})"
            ) from e

        class QuietServer(WSGIServer):  # type: ignore[misc, valid-type]
            def error_log(self, msg: str = "", level: int = 20, traceback: bool = False) -> None:
                # cheroot writes these to stderr; the demo's output is the scan's, not the server's
                log.log(level, "s3 sandbox: %s", msg, exc_info=traceback)

        with S3Server._running_lock:
            if S3Server._running is not None:
                raise RuntimeError(
                    "another S3Server is running in this process (moto state is global)"
                )
            S3Server._running = self
        try:
            _quiet_werkzeug()
            self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self._moto.start()
            host, port = self._moto.get_host_and_port()
            _reset_moto(host, port)
            self.seed()
            app = _FaultMiddleware(_Forward(host, port), self)
            self._server = QuietServer(
                ("127.0.0.1", 0), app, numthreads=_SERVER_THREADS, server_name="sandbox-s3"
            )
            self._server.prepare()  # binds the port
            self._thread = threading.Thread(
                target=self._server.serve, name="sandbox-s3", daemon=True
            )
            self._thread.start()
        except BaseException:
            self.stop()
            raise
        self._url = f"http://127.0.0.1:{self._server.bind_addr[1]}"
        return self._url

    def stop(self) -> None:
        """Stop serving, close the port, and drop the seeded state. Safe to call twice."""
        if self._server is not None:
            self._server.stop()  # closes the port; returns once serve() has ended
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = None
            self._thread = None
        with S3Server._running_lock:
            if S3Server._running is self:
                if self._moto is not None:
                    try:
                        _reset_moto(*self._moto.get_host_and_port())
                    finally:
                        self._moto.stop()
                        self._moto = None  # its listening socket closes with it
                        self.listings.changed()
                S3Server._running = None
        self._url = None

    def __enter__(self) -> S3Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def seed(self) -> None:
        """Put the scenario's buckets, objects and per-attempt files into moto's backend.

        Seeded in process rather than over HTTP: faults do not apply, tens of thousands of
        objects take seconds, and LastModified can be backdated (moto stamps it on PUT).
        """
        backend = _moto_s3_backend()
        scenario = self.scenario
        files = list(attempt_files(scenario))
        buckets = set(scenario.buckets)
        buckets.update(o.bucket for o in scenario.objects)
        buckets.update(bucket for bucket, _, _, _ in files)
        for bucket in sorted(buckets):
            if bucket not in backend.buckets:
                backend.create_bucket(bucket, region_name="us-east-1")
        objects = ((o.bucket, o.key, o.body, o.last_modified) for o in scenario.objects)
        for bucket, key, body, modified in (*objects, *files):
            stored = backend.put_object(bucket, key, body)
            if modified is not None:
                stored.last_modified = _naive_utc(modified)
        self.listings.changed()

    # The sandbox Admin's data store (`blobs.Blobs`): what flyteadmin and propeller read and write.
    def read(self, uri: str) -> bytes | None:
        """The object at `s3://bucket/key`, or None when it does not exist."""
        bucket, key = split_uri(uri)
        backend = _moto_s3_backend()
        if bucket not in backend.buckets:
            return None
        stored = backend.get_object(bucket, key)  # None when absent
        return None if stored is None else bytes(stored.value)

    def write(self, uri: str, body: bytes) -> None:
        """Create or replace the object at `s3://bucket/key` (its bucket too, if absent)."""
        bucket, key = split_uri(uri)
        backend = _moto_s3_backend()
        if bucket not in backend.buckets:
            backend.create_bucket(bucket, region_name="us-east-1")
        backend.put_object(bucket, key, body)
        self.listings.changed()

    def add_execution(self, execution: SandboxExecution) -> None:
        """The files propeller writes for an execution added while the sandbox runs (node
        inputs.pb, each attempt's outputs.pb / error.pb), as `seed` writes them for the rest."""
        backend = _moto_s3_backend()
        for bucket, key, body, modified in attempt_files(Scenario(executions=[execution])):
            if bucket not in backend.buckets:
                backend.create_bucket(bucket, region_name="us-east-1")
            stored = backend.put_object(bucket, key, body)
            if modified is not None:
                stored.last_modified = _naive_utc(modified)
        self.listings.changed()


def _moto_s3_backend() -> Any:
    """moto's S3 backend, the one its server answers from (`moto.s3.models.S3Backend`)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    # moto's server answers for MOTO_ACCOUNT_ID if set, else maps an access key it does not
    # know to DEFAULT_ACCOUNT_ID (moto.core.responses.get_current_account); S3 is global, one
    # backend per partition.
    account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
    return s3_backends[account]["aws"]


def _reset_moto(host: str, port: int) -> None:
    """moto's documented reset API: every backend's state dropped (docs/upstream.md)."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request("POST", "/moto-api/reset")
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"moto's reset API answered {answer.status}")
    finally:
        conn.close()


def _quiet_werkzeug() -> None:
    """moto's server (werkzeug) logs every request at INFO, to a stderr handler of its own when
    no handler takes them; the demo's output is the scan's, so only warnings pass, to the
    process's own handlers."""
    werkzeug = logging.getLogger("werkzeug")
    if werkzeug.level == logging.NOTSET or werkzeug.level < logging.WARNING:
        werkzeug.setLevel(logging.WARNING)
    if not werkzeug.handlers:
        werkzeug.addHandler(logging.NullHandler())
