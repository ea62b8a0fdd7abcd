"""Shared by the guard tests: a loopback webhook receiver, a Pushgateway stand-in, and a new
incident added to the live sandbox (forensics.sandbox.live, as `demo --add-incident` does)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from forensics.sandbox.live import add_incident

# A webhook path as Slack issues them: the secret is the path.
__all__ = ["SECRET_PATH", "HTTPRecorder", "add_incident"]

SECRET_PATH = "/services/T0SECRET/B0SECRET/xoxsecrettoken"


class HTTPRecorder:
    """A loopback HTTP server recording each request (method, path, body); answers `status`."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.delay = 0.0  # seconds before answering (after recording)
        self.requests: list[tuple[str, str, bytes]] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with recorder._lock:
                    recorder.requests.append((self.command, self.path, body))
                    recorder.authorizations.append(self.headers.get("Authorization"))
                    status = recorder.status
                time.sleep(recorder.delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_PUT = _handle

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return self.base + SECRET_PATH

    def posts(self) -> list[dict[str, Any]]:
        with self._lock:
            return [json.loads(b) for m, _, b in self.requests if m == "POST"]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
