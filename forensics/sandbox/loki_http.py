"""The sandbox Loki's HTTP side: requests in, answers out, each one recorded.

The handler parses the form (POST body, then the URL, as Go's `r.Form`), checks the gateway's
credentials and the tenant header, applies the injected faults, routes the request to the API
the server offers (`LokiAPI`) and writes its answer as Loki does: JSON for a result, plain text
with Loki's status code for a refusal.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

from forensics.sandbox.loki_errors import ERR_TOO_MANY_ORG_IDS, SANDBOX_VERSION, Refusal
from forensics.sandbox.loki_faults import (
    FAULT_BODIES,
    FaultRule,
    LokiFaults,
    RecordedRequest,
    RequestLog,
)
from forensics.sandbox.loki_params import BadRequest, Params, bounds, form_pairs

Route = Callable[[Params, Any], dict[str, Any]]


class LokiAPI(Protocol):
    """What the handler asks of the server it fronts (`LokiServer`)."""

    faults: LokiFaults
    requests: RequestLog
    basic_auth: tuple[str, str] | None
    tenant_required: str | None
    multi_tenant_queries_enabled: bool

    def routes(self) -> dict[str, Route]:
        """The data endpoints by path: each answers a JSON document or raises BadRequest or a
        Refusal."""
        ...

    def check_auth(self, headers: Any) -> str | None:
        """None when the gateway lets the request through, else the 401's text."""
        ...

    def pick_fault(self, start: int | None, end: int | None) -> FaultRule | None:
        """The first injected fault that applies to a query of [start, end) (counted as fired)."""
        ...

    def wait(self, seconds: float) -> None:
        """Sleep, cut short when the server stops."""
        ...


def listen(api: LokiAPI) -> ThreadingHTTPServer:
    """A server bound to a free loopback port that answers with `api` (not yet serving)."""
    handler = type("_BoundHandler", (_Handler,), {"loki": api})
    return _HTTPServer(("127.0.0.1", 0), handler)


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection; a listen backlog deep enough for many concurrent workers."""

    daemon_threads = True
    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    """Translates HTTP requests into calls of the server it fronts (no state of its own)."""

    loki: LokiAPI
    protocol_version = "HTTP/1.1"
    server_version = "Loki"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # the base signature names it `format`
        pass

    def do_GET(self) -> None:  # http.server's naming
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        arrived = time.monotonic()
        url = urlsplit(self.path)
        body_pairs: list[tuple[str, str]] = []
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if self.command == "POST" and ctype == "application/x-www-form-urlencoded":
            body_pairs = form_pairs(raw.decode("utf-8", errors="replace"))
        params = Params(body_pairs + form_pairs(url.query))
        self._record_base = (arrived, url.path, params)
        self._fault: str | None = None

        loki = self.loki
        denied = loki.check_auth(self.headers)
        if denied is not None:
            extra = {"WWW-Authenticate": 'Basic realm="loki"'} if loki.basic_auth else {}
            self._text(401, denied, extra)
            return
        routes = loki.routes()
        if url.path == "/ready":
            self._text(200, "ready\n")
            return
        if url.path == "/loki/api/v1/status/buildinfo":
            self._json(
                200,
                {
                    "version": SANDBOX_VERSION,
                    "revision": "sandbox",
                    "branch": "HEAD",
                    "buildUser": "elastic-audit-sandbox",
                    "buildDate": "",
                    "goVersion": "",
                },
            )
            return
        handler = routes.get(url.path)
        if handler is None:
            self._text(404, "404 page not found\n")
            return
        if loki.tenant_required is not None and not self.headers.get("X-Scope-OrgID"):
            self._text(401, "no org id\n")  # dskit AuthenticateUser: http.Error adds the newline
            return
        if self._several_tenants_refused():
            return
        if url.path in ("/loki/api/v1/query_range", "/loki/api/v1/series") and self._inject(params):
            return
        try:
            doc = handler(params, self.headers)
        except BadRequest as e:
            self._text(400, str(e))
            return
        except Refusal as e:
            self._text(e.status, str(e))
            return
        self._json(200, doc)

    def _several_tenants_refused(self) -> bool:
        """`A|B` on a Loki without multi-tenant queries: a 500; True when answered."""
        org = self.headers.get("X-Scope-OrgID") or ""
        if "|" not in org or self.loki.multi_tenant_queries_enabled:
            return False
        self._text(500, ERR_TOO_MANY_ORG_IDS + "\n")
        return True

    def _inject(self, params: Params) -> bool:
        """Apply latency and the first matching fault rule; True when the response is done."""
        loki = self.loki
        if loki.faults.latency > 0:
            loki.wait(loki.faults.latency)
        try:
            start, end = bounds(params)
        except BadRequest:
            start = end = None
        rule = loki.pick_fault(start, end)
        if rule is None:
            return False
        self._fault = str(rule.status)
        if rule.status == "timeout":
            loki.wait(rule.sleep)
            return False
        if rule.status == "reset":
            self._reset()
            return True
        if rule.status == "nonjson":
            page = "<html><head><title>Sign in</title></head><body>proxy login</body></html>\n"
            self._send(200, page.encode(), "text/html; charset=utf-8")
            return True
        if rule.status == "truncated":
            body = json.dumps(
                {"status": "success", "data": {"resultType": "streams", "result": []}}
            )
            self._send(200, body.encode(), "application/json; charset=UTF-8", cut=True)
            return True
        extra = {"Retry-After": rule.retry_after} if rule.retry_after is not None else {}
        self._text(int(rule.status), FAULT_BODIES[int(rule.status)], extra)
        return True

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send a TCP RST: the client sees "connection reset by peer".
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self._record(0, 0)
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def _text(self, status: int, text: str, extra: dict[str, str] | None = None) -> None:
        # Loki's WriteError: plain text, nosniff.
        headers = {"X-Content-Type-Options": "nosniff", **(extra or {})}
        self._send(status, text.encode(), "text/plain; charset=utf-8", headers=headers)

    def _json(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        self._send(
            status, body.encode("utf-8", errors="replace"), "application/json; charset=UTF-8"
        )

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        *,
        headers: dict[str, str] | None = None,
        cut: bool = False,
    ) -> None:
        sent = body[: len(body) // 2] if cut else body
        # Record before answering, so whoever got the answer also finds the record.
        self._record(status, len(sent))
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if cut:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(sent)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away (e.g. after its read timeout)
        if cut:
            self.close_connection = True

    def _record(self, status: int, nbytes: int) -> None:
        arrived, path, params = self._record_base
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        self.loki.requests.append(
            RecordedRequest(
                method=self.command,
                path=path,
                params=params.first_values(),
                headers=headers,
                status=status,
                bytes=nbytes,
                fault=self._fault,
                at=arrived,
            )
        )
