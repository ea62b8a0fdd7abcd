"""Shared by the guard tests: a loopback webhook receiver, a Pushgateway stand-in, and a new
incident added to the live sandbox."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from forensics.sandbox.incident import MODELS_BUCKET, ScenarioBuilder, _try
from forensics.sandbox.stack import Sandbox

# A webhook path as Slack issues them: the secret is the path.
SECRET_PATH = "/services/T0SECRET/B0SECRET/xoxsecrettoken"


class HTTPRecorder:
    """A loopback HTTP server recording each request (method, path, body); answers `status`."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.delay = 0.0  # seconds before answering (after recording)
        self.requests: list[tuple[str, str, bytes]] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with recorder._lock:
                    recorder.requests.append((self.command, self.path, body))
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


def add_incident(
    box: Sandbox, name: str, signal_at: datetime, *, project: str = "gs1", running: bool = False
) -> None:
    """A new silent green in the RUNNING sandbox: an elastic attempt signalled at `signal_at`,
    SUCCEEDED 7 s later without outputs.pb; its logs in Loki, its execution in Admin.
    `running`: the attempt has not finished yet (a pending attempt)."""
    b = ScenarioBuilder()
    domain = "production"
    task = b.task(project, domain, "bigmodel.train")
    ok_at = signal_at + timedelta(seconds=7)
    phase = "RUNNING" if running else "SUCCEEDED"
    ex = b.one_node(
        project,
        domain,
        name,
        phase,
        signal_at - timedelta(hours=2),
        signal_at if running else ok_at + timedelta(seconds=3),
        _try(name, 0, phase, signal_at - timedelta(hours=1), None if running else ok_at, task),
        inputs={"checkpoint_dir": f"s3://{MODELS_BUCKET}/checkpoints/{name}/"},
    )
    b.signal_pod(signal_at, f"{project}-{domain}", f"{name}-n0-0", f"{name}-n0-0")
    if not running:
        b.propeller(ok_at, ex, "n0", "python-task")
    box.admin.add_execution(ex, b.scenario.tasks)
    box.s3.add_execution(ex)  # the node's inputs.pb, as propeller writes it before the node runs
    box.loki.add_lines(b.scenario.log_lines)
