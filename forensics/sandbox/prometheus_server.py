"""A loopback Prometheus HTTP API for the sandbox: `/api/v1/query_range` over the one series
family the tool reads, kube-state-metrics' `kube_pod_status_disruption_reason`, scraped as a real
Prometheus scrapes it.

- Series: `{namespace, pod, uid, reason}` = 1 while a pod carries a `DisruptionTarget`
  condition (`SandboxCondition`), whatever its status; a reason outside the exporter's five, or
  a stale condition reset without one, reads `Other`.
- Scrape: a sample every `SCRAPE`, a stale marker when a series goes; without `honor_labels`
  the labels that collide with the target's are `exported_namespace`, `exported_pod`.
- Query: the metric, alone or in `max_over_time(...[d])`, either under `max by (...)`, with
  Prometheus's lookback, stale markers and range bounds; anything else is a 400, as a query the
  real server cannot parse. `start`/`end`, `step`, the 11,000-points limit and the envelope as
  Prometheus's API has them.

Where each rule comes from (kube-state-metrics v2.20.0, Prometheus v2.42.0 and v3.9.0):
docs/upstream.md, "The sandbox servers".
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from forensics.sandbox.loki_params import parse_prom_duration

METRIC = "kube_pod_status_disruption_reason"
LOOKBACK = 300.0  # seconds: promql's default lookback delta (engine.go defaultLookbackDelta)
SCRAPE = 30.0  # seconds between two scrapes of kube-state-metrics
SCRAPE_OFFSET = 7.0  # where in each interval the target is scraped (scrape.go spreads targets)
# kube-state-metrics v2.20.0 internal/store/pod.go:43, podDisruptionConditionReasons
KNOWN_REASONS = frozenset(
    {
        "PreemptionByScheduler",
        "DeletionByTaintManager",
        "EvictionByEvictionAPI",
        "DeletionByPodGC",
        "TerminationByKubelet",
    }
)
# pkg/controller/disruption/disruption.go stalePodDisruptionTimeout
STALE_RESET = timedelta(minutes=2)
# The target's labels (a kubernetes_sd pod target of kube-state-metrics itself): without
# honor_labels its `namespace` and `pod` win and the exporter's are renamed `exported_*`.
TARGET = {
    "job": "kube-state-metrics",
    "instance": "10.0.3.14:8080",
    "namespace": "monitoring",
    "pod": "kube-state-metrics-5c8d9b7f4-x2x9q",
}
_BY = r"max\s+by\s*\(\s*([\w\s,]*)\)\s*\((.*)\)"
_INSTANT = re.compile(rf"^\s*{METRIC}(?:\{{\s*\}})?\s*$")
_RANGE = re.compile(rf"^\s*max_over_time\s*\(\s*{METRIC}\s*\[(\w+)\]\s*\)\s*$")


@dataclass(frozen=True)
class SandboxCondition:
    """A pod's DisruptionTarget condition as kube-state-metrics exports it: set at `since`, the
    pod gone at `until`. `stale`: the pod was never deleted, so the disruption controller reset the
    condition to False 2 minutes after `since` (reason `Other` from then until `until`)."""

    namespace: str
    pod: str
    reason: str
    since: datetime
    until: datetime
    stale: bool = False
    uid: str = ""

    def exposed(self) -> list[tuple[str, float, float]]:
        """(the `reason` label, from, to) for each series the exporter exposes, in Unix seconds."""
        reason = self.reason if self.reason in KNOWN_REASONS else "Other"
        start, end = self.since.timestamp(), self.until.timestamp()
        if not self.stale:
            return [(reason, start, end)]
        reset = min(start + STALE_RESET.total_seconds(), end)
        return [(reason, start, reset), ("Other", reset, end)]


@dataclass
class PrometheusServer:
    """`with PrometheusServer(conditions) as url:` serves them until the block ends;
    `status` set to e.g. 503 makes every query fail that way, `answer` replaces every body;
    `honor_labels=False` plays a scrape config without `honor_labels: true`."""

    conditions: list[SandboxCondition] = field(default_factory=list)
    status: int | None = None
    answer: dict[str, Any] | None = None  # a 200 body served instead (a proxy's, a broken one)
    honor_labels: bool = True
    # kube-state-metrics >= v2.20.0 writes the family's HELP/TYPE whenever it watches any pod
    # (pkg/metrics_store/metrics_writer.go:83-105): the metadata API lists it (api.go
    # metricMetadata, from the active targets' last scrape). False: an older one, or a denylist.
    exposes_family: bool = True
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
        query = _parse(params.get("query", ""))
        if query is None:
            return 400, _error("bad_data", f'invalid parameter "query": {params.get("query")!r}')
        by, window = query
        groups: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
        for labels, samples in self._series():
            kept = tuple(sorted((k, v) for k, v in labels.items() if by is None or k in by))
            values = groups.setdefault(kept, {})
            for t in _steps(start, end, step, samples, window):
                values[t] = 1.0
        result = [
            {
                "metric": dict(labels),
                "values": [[_num(t), "1"] for t in sorted(values)],
            }
            for labels, values in groups.items()
            if values
        ]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}

    def metadata(self, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for one /api/v1/metadata call: the family, if exposed."""
        self.requests += 1
        if self.status is not None:
            return self.status, _error("unavailable", "sandbox fault")
        data: dict[str, Any] = {}
        if self.exposes_family and params.get("metric", METRIC) == METRIC:
            help_text = "The pod disruption condition reason"
            data[METRIC] = [{"type": "gauge", "help": help_text, "unit": ""}]
        return 200, {"status": "success", "data": data}

    def _series(self) -> Iterator[tuple[dict[str, str], list[tuple[float, bool]]]]:
        """Each stored series: its labels and its samples (time, stale marker?), oldest first."""
        for c in self.conditions:
            for reason, since, until in c.exposed():
                own = {"namespace": c.namespace, "pod": c.pod, "uid": c.uid, "reason": reason}
                yield _scraped(own, self.honor_labels), _samples(since, until)


def _scraped(own: dict[str, str], honor: bool) -> dict[str, str]:
    """The exporter's labels as the scrape stores them (scrape.go mutateSampleLabels)."""
    labels = {"__name__": METRIC, **own}
    for name, value in TARGET.items():
        if name in own and not honor:
            labels["exported_" + name] = own[name]
            labels[name] = value
        elif name not in own:
            labels[name] = value
    return {k: v for k, v in labels.items() if v}  # an empty label is no label


def _samples(since: float, until: float) -> list[tuple[float, bool]]:
    """The scrapes that saw a series exposed from `since` to `until`, then its stale marker."""
    first = math.ceil((since - SCRAPE_OFFSET) / SCRAPE) * SCRAPE + SCRAPE_OFFSET
    out = []
    t = first
    while t < until:
        out.append((t, False))
        t += SCRAPE
    if out:
        out.append((t, True))  # the next scrape no longer sees it: a stale marker
    return out


def _steps(
    start: float, end: float, step: float, samples: list[tuple[float, bool]], window: float | None
) -> Iterator[float]:
    """The evaluation steps at which the series has a value: an instant selector (`window`
    None) or `max_over_time` over `window` seconds."""
    if not samples:
        return
    reach = LOOKBACK if window is None else window
    first = max(start, samples[0][0])
    k = max(0, math.ceil((first - start) / step))
    t = start + k * step
    while t <= end and t <= samples[-1][0] + reach:
        if window is None:
            newest = [s for s in samples if t - LOOKBACK <= s[0] <= t]
            if newest and not newest[-1][1]:
                yield t
        elif any(t - window < s <= t and not stale for s, stale in samples):
            yield t
        k += 1
        t = start + k * step


def _parse(query: str) -> tuple[frozenset[str] | None, float | None] | None:
    """(the `by` labels or None, the range in seconds or None) of a query this server reads."""
    by: frozenset[str] | None = None
    m = re.fullmatch(rf"\s*{_BY}\s*", query, re.DOTALL)
    if m:
        by = frozenset(x.strip() for x in m[1].split(",") if x.strip())
        query = m[2]
    if _INSTANT.match(query):
        return by, None
    r = _RANGE.match(query)
    if r:
        try:
            window = parse_prom_duration(r[1]) / 1e9
        except ValueError:
            return None
        return (by, window) if window > 0 else None
    return None


def _num(t: float) -> float | int:
    return int(t) if t == int(t) else round(t, 3)


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
            path = urlsplit(self.path).path
            if path == "/api/v1/query_range":
                status, body = server.query_range(params)
            elif path == "/api/v1/metadata":
                status, body = server.metadata(params)
            else:
                status, body = 404, _error("not_found", "not found")
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
