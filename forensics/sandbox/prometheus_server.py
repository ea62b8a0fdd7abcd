"""A loopback Prometheus HTTP API for the sandbox: `/api/v1/query_range` over the one series
family the tool reads, kube-state-metrics' `kube_pod_status_disruption_reason`.

Modelled on prometheus/prometheus web/api/v1/api.go (`queryRange`: `start`/`end` as Unix seconds
or RFC 3339, `step` as seconds or a duration, the 11,000-points limit, `bad_data` errors as 400,
the `{"status", "data": {"resultType": "matrix", "result"}}` envelope) and promql's evaluation (an
instant sample at `t` is the newest raw sample in the 5-minute lookback before it). Only the
metric, alone or under `max by (...)`, is understood: anything else is a 400, as a query the real
server cannot parse.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

METRIC = "kube_pod_status_disruption_reason"
LOOKBACK = timedelta(minutes=5)
SCRAPE = timedelta(seconds=30)
_QUERY = re.compile(
    rf"^\s*(?:max\s+by\s*\(\s*[\w\s,]*\)\s*\(\s*{METRIC}\s*\)|{METRIC}(?:\{{\s*\}})?)\s*$"
)


@dataclass(frozen=True)
class SandboxCondition:
    """A pod's DisruptionTarget condition as kube-state-metrics exports it: from `since` (the
    condition set; first scraped within SCRAPE after) until the pod is gone (`until`)."""

    namespace: str
    pod: str
    reason: str
    since: datetime
    until: datetime


@dataclass
class PrometheusServer:
    """`with PrometheusServer(conditions) as url:` serves them until the block ends;
    `status` set to e.g. 503 makes every query fail that way, `answer` replaces every body."""

    conditions: list[SandboxCondition] = field(default_factory=list)
    status: int | None = None
    answer: dict[str, Any] | None = None  # a 200 body served instead (a proxy's, a broken one)
    requests: int = 0
    authorizations: list[str | None] = field(default_factory=list)  # each request's header

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def query_range(self, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for one query_range call."""
        self.requests += 1
        if self.status is not None:
            return self.status, _error("unavailable", "sandbox fault")
        if self.answer is not None:
            return 200, self.answer
        try:
            start, end = _time(params, "start"), _time(params, "end")
            step = _step(params.get("step", ""))
        except ValueError as e:
            return 400, _error("bad_data", str(e))
        if end < start:
            return 400, _error("bad_data", "end timestamp must not be before start time")
        if (end - start) / step > 11000:
            return 400, _error(
                "bad_data",
                "exceeded maximum resolution of 11,000 points per timeseries. "
                "Try decreasing the query resolution (?step=XX)",
            )
        if not _QUERY.match(params.get("query", "")):
            return 400, _error("bad_data", f'invalid parameter "query": {params.get("query")!r}')
        result = []
        for c in self.conditions:
            first = c.since.timestamp() + SCRAPE.total_seconds()
            last = c.until.timestamp() + LOOKBACK.total_seconds()
            values = []
            t = start
            while t <= end:
                if first <= t < last:
                    values.append([round(t, 3), "1"])
                t += step
            if values:
                labels = {"namespace": c.namespace, "pod": c.pod, "reason": c.reason}
                result.append({"metric": labels, "values": values})
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _error(kind: str, text: str) -> dict[str, Any]:
    return {"status": "error", "errorType": kind, "error": text}


def _time(params: dict[str, str], name: str) -> float:
    raw = params.get(name, "")
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(
            f'invalid parameter "{name}": cannot parse "{raw}" to a valid timestamp'
        ) from None


def _step(raw: str) -> float:
    try:
        step = float(raw)
    except ValueError:
        m = re.fullmatch(r"([0-9]+)([smh])", raw)
        if not m:
            raise ValueError(
                f'invalid parameter "step": cannot parse "{raw}" to a valid duration'
            ) from None
        step = int(m[1]) * {"s": 1, "m": 60, "h": 3600}[m[2]]
    if step <= 0:
        raise ValueError(
            "zero or negative query resolution step widths are not accepted. Try a positive integer"
        )
    return step


def _handler(server: PrometheusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # the base names it `format`
            pass

        def _answer(self, params: dict[str, str]) -> None:
            server.authorizations.append(self.headers.get("Authorization"))
            if urlsplit(self.path).path != "/api/v1/query_range":
                status, body = 404, _error("not_found", "not found")
            else:
                status, body = server.query_range(params)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer(dict(parse_qsl(urlsplit(self.path).query)))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._answer(dict(parse_qsl(self.rfile.read(length).decode())))

    return Handler
