"""A loopback Loki-API server for tests, benchmarks and `demo`: query_range with Loki's semantics.

It answers GET and POST (form) on `/loki/api/v1/query_range`, `/loki/api/v1/series`,
`/loki/api/v1/labels`, `/loki/api/v1/index/stats`, `/ready` and `/loki/api/v1/status/buildinfo`:
LogQL stream selectors with line and label filters, Loki's limits, error texts and status codes,
optional tenant and gateway auth, and injected faults (`LokiFaults`). Regexes are RE2's as far
as Python's `re` can follow; what RE2 refuses is refused as Loki would.

The parts, by role: `loki_params` (parameter syntax), `loki_logql` (the LogQL subset),
`loki_store` (streams and query evaluation), `loki_queue` (the per-tenant query queue),
`loki_errors` (Loki's texts), `loki_faults` (faults and the request log), `loki_http` (the
HTTP handler); here, the API's semantics over one server's state. Where each behaviour comes
from upstream: docs/upstream.md, "The sandbox servers".
"""

from __future__ import annotations

import base64
import binascii
import hmac
import math
import threading
import time
from collections.abc import Iterable
from datetime import timedelta
from http.server import ThreadingHTTPServer
from typing import Any

from forensics.sandbox.loki_errors import (
    ENTRY_LIMIT_WORDINGS,
    ERR_END_BEFORE_START,
    ERR_LIMIT,
    ERR_MERGE_NONE,
    ERR_QUERY_TOO_LONG,
    ERR_RESOLUTION,
    ERR_STEP,
    ERR_TOO_MANY_BYTES,
    QueryTimeout,
    ServerError,
    TooManyRequests,
)
from forensics.sandbox.loki_faults import FaultRule, LokiFaults, RecordedRequest, RequestLog
from forensics.sandbox.loki_http import Route, listen
from forensics.sandbox.loki_logql import parse_log_query, parse_selector_only
from forensics.sandbox.loki_params import (
    NS,
    BadRequest,
    Params,
    atoi,
    bounds,
    go_duration,
    parse_seconds_or_duration,
    prom_duration,
)
from forensics.sandbox.loki_queue import QueueFull, TenantQueue
from forensics.sandbox.loki_store import Store, discovered, ibytes, select, stats
from forensics.sandbox.scenario import SandboxLogLine

__all__ = ["FaultRule", "LokiFaults", "LokiServer", "RecordedRequest", "RequestLog"]

SHARDING_LOOKBACK_NS = 30 * NS  # the query frontend's sharding lookback (max_look_back_period)


class LokiServer:
    """A Loki-API server on 127.0.0.1 (a free port) serving `lines`; see the module docstring.

    `tenant_required`: requests must send `X-Scope-OrgID` (else 401 `no org id`), and only that
    tenant sees the lines (others get empty results, as an empty tenant in Loki would).
    `bearer_token` / `basic_auth`: a gateway in front that requires one of them (401 otherwise).
    `tenant_max_entries`: per-tenant `max_entries_limit_per_query` overriding `max_entries` (0 is
    no limit; for `A|B` the smallest positive one applies, as in Loki), refused in the
    `entry_limit_wording` of a v3 query frontend (`"frontend"`) or of a querier / older release
    (`"querier"`).
    `query_timeout_lines`: a log query whose range holds more than this many lines in the streams
    it selects (what Loki must scan, before line filters) times out: 504, as Loki answers at its
    `query_timeout`, after `query_timeout_delay` seconds.
    `max_outstanding_requests_per_tenant`: the scheduler's per-tenant queue (`loki_queue.py`):
    a query's sub-queries (one per `split_queries_by_interval`) over it are refused with 429;
    `queriers` run `subquery_seconds` each.
    """

    def __init__(
        self,
        lines: Iterable[SandboxLogLine] = (),
        faults: LokiFaults | None = None,
        *,
        max_query_length: timedelta = timedelta(hours=721),
        max_entries: int = 5000,
        tenant_required: str | None = None,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        tenant_max_entries: dict[str, int] | None = None,
        entry_limit_wording: str = "frontend",
        query_timeout_lines: int | None = None,
        query_timeout_delay: float = 0.0,
        max_query_lookback: timedelta | None = None,
        index_stats_from_store_only: bool = False,
        structured_metadata: Iterable[str] = (),
        sharding_lookback: bool = False,
        max_query_bytes_read: int | None = None,
        split_queries_by_interval: timedelta | None = None,
        max_outstanding_requests_per_tenant: int | None = None,
        queriers: int = 4,
        subquery_seconds: float = 0.0,
        multi_tenant_queries_enabled: bool = True,
        discover_labels: bool = False,
        index_stats_enabled: bool = True,
    ) -> None:
        self.faults = faults or LokiFaults()
        self.max_query_length_ns = (max_query_length // timedelta(microseconds=1)) * 1000
        self.max_entries = max_entries
        self.tenant_max_entries = dict(tenant_max_entries or {})
        if entry_limit_wording not in ENTRY_LIMIT_WORDINGS:
            raise ValueError(f"entry_limit_wording: one of {sorted(ENTRY_LIMIT_WORDINGS)}")
        self.entry_limit_wording = entry_limit_wording
        self.query_timeout_lines = query_timeout_lines
        self.query_timeout_delay = query_timeout_delay
        self.max_query_lookback = max_query_lookback
        self.index_stats_from_store_only = index_stats_from_store_only
        self.sharding_lookback = sharding_lookback
        self.max_query_bytes_read = max_query_bytes_read
        self.split_queries_by_interval = split_queries_by_interval
        self.max_outstanding_requests_per_tenant = max_outstanding_requests_per_tenant
        self._stopping = threading.Event()
        self.queue = (  # loki_queue.py: the frontend's split, the scheduler's queue, queriers
            TenantQueue(
                max_outstanding_requests_per_tenant,
                split_queries_by_interval,
                queriers=queriers,
                subquery_seconds=subquery_seconds,
                stopping=self._stopping,
            )
            if max_outstanding_requests_per_tenant is not None
            else None
        )
        self.multi_tenant_queries_enabled = multi_tenant_queries_enabled
        self.tenant_required = tenant_required
        self.bearer_token = bearer_token
        self.basic_auth = basic_auth
        self.requests = RequestLog()
        self.discover_labels = discover_labels
        self.index_stats_enabled = index_stats_enabled
        meta = (*structured_metadata, *(("detected_level",) if discover_labels else ()))
        self._store = Store(meta)
        self.add_lines(lines)
        self._faults_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> str:
        """Listen on a free loopback port; return the base URL (`http://127.0.0.1:PORT`)."""
        if self._httpd is not None:
            return self.url
        self._httpd = listen(self)
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("LokiServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop listening; stalled (timeout-fault) handlers are released."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LokiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_lines(self, lines: Iterable[SandboxLogLine]) -> int:
        """Add lines (any order, any streams); returns how many were offered."""
        if self.discover_labels:
            lines = map(discovered, lines)
        return self._store.add(lines)

    # -- what the HTTP handler calls (from its threads) -------------------------------------------

    def routes(self) -> dict[str, Route]:
        """The data endpoints by path (index/stats only while `index_stats_enabled`)."""
        routes: dict[str, Route] = {
            "/loki/api/v1/query_range": self.query_range,
            "/loki/api/v1/series": self.series,
            "/loki/api/v1/labels": self.labels,
            "/loki/api/v1/label": self.labels,
        }
        if self.index_stats_enabled:
            routes["/loki/api/v1/index/stats"] = self.index_stats
        return routes

    def wait(self, seconds: float) -> None:
        """Sleep `seconds` (an injected latency or stall), cut short by stop()."""
        self._stopping.wait(seconds)

    def pick_fault(self, start: int | None, end: int | None) -> FaultRule | None:
        """The first fault rule that applies to a query of [start, end), counted as fired."""
        with self._faults_lock:
            for rule in self.faults.rules:
                if rule.applies(start, end):
                    rule.fired += 1
                    return rule
        return None

    def check_auth(self, headers: Any) -> str | None:
        """None when the gateway lets the request through, else the 401's text."""
        if not self.bearer_token and not self.basic_auth:
            return None
        given = headers.get("Authorization") or ""
        scheme, _, cred = given.partition(" ")
        if self.bearer_token and scheme.lower() == "bearer":
            if hmac.compare_digest(cred.strip().encode(), self.bearer_token.encode()):
                return None
        if self.basic_auth and scheme.lower() == "basic":
            try:
                user, _, pw = base64.b64decode(cred.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user, pw = "", ""
            ok_user = hmac.compare_digest(user.encode(), self.basic_auth[0].encode())
            if ok_user and hmac.compare_digest(pw.encode(), self.basic_auth[1].encode()):
                return None
        return "invalid or missing credentials\n"

    def _max_entries(self, org: str | None) -> int:
        """The entry limit for the tenants of a request: Loki's SmallestPositiveNonZeroIntPerTenant
        over `A|B`; a tenant without its own limit has the server's default."""
        limits = [self.tenant_max_entries.get(t, self.max_entries) for t in (org or "").split("|")]
        positive = [n for n in limits if n > 0]
        return min(positive) if positive else 0

    def _tenant_sees_data(self, org: str | None) -> bool:
        if self.tenant_required is None:
            return True
        return self.tenant_required in (org or "").split("|")

    def _served(self, start: int, end: int) -> tuple[int, int] | None:
        """[start, end) clamped to what the tenant's max_query_lookback still serves; None when
        none of it is (Loki answers an empty 200 then)."""
        if self.max_query_lookback is None:
            return start, end
        cutoff = time.time_ns() - self.max_query_lookback // timedelta(microseconds=1) * 1000
        if end < cutoff:
            return None
        return max(start, cutoff), end

    def query_range(self, params: Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/query_range`: validation in Loki's order, then the log query."""
        org = headers.get("X-Scope-OrgID")
        # With this flag Loki adds a third element (metadata) to each value; none is kept here.
        flags = headers.get("X-Loki-Response-Encoding-Flags") or ""
        categorize = "categorize-labels" in flags.split(",")
        start, end, limit, forward = self._range_params(params)
        query = parse_log_query(params.get("query"))
        self._check_limits(org, limit, start, end)
        self._check_query_range_limits(org, start, end)
        t0 = time.perf_counter()
        served = self._served(start, end)
        sees = self._tenant_sees_data(org) and served is not None
        start, end = served or (start, end)
        streams = self._store.matching(query).within(start, end) if sees else []
        if query.label_filters:
            streams = [s for s in streams if query.passes(s.labels)]
        latency = self.faults.latency_per_line
        if self.max_query_bytes_read is not None or self.query_timeout_lines is not None or latency:
            # Each stream's range once, for the byte limit, the timeout and the latency alike.
            spans = [(s, *s.span(start, end)) for s in streams]
            if self.max_query_bytes_read is not None:
                nbytes = sum(sum(map(len, s.lines[lo:hi])) for s, lo, hi in spans)
                if nbytes > self.max_query_bytes_read:
                    raise BadRequest(
                        ERR_TOO_MANY_BYTES.format(ibytes(nbytes), ibytes(self.max_query_bytes_read))
                    )
            scanned = sum(hi - lo for _, lo, hi in spans)
            if latency > 0:
                self._stopping.wait(latency * scanned)
            if self.query_timeout_lines is not None and scanned > self.query_timeout_lines:
                self._stopping.wait(self.query_timeout_delay)
                raise QueryTimeout()
        result, returned, scanned, nbytes = select(
            streams, query, start, end, limit, forward=forward
        )
        elapsed = max(time.perf_counter() - t0, 1e-9)
        data: dict[str, Any] = {
            "resultType": "streams",
            "result": result,
            "stats": stats(returned, scanned, nbytes, elapsed),
        }
        if categorize:
            for stream in result:
                for value in stream["values"]:
                    value.append({})
            data["encodingFlags"] = ["categorize-labels"]
        return {"status": "success", "data": data}

    def _range_params(self, params: Params) -> tuple[int, int, int, bool]:
        """start, end, limit and whether forward, refused in the order Loki checks them."""
        start, end = bounds(params)
        if end < start:
            raise BadRequest(ERR_END_BEFORE_START)
        limit = atoi(params.get("limit"), 100)
        if limit <= 0:
            raise BadRequest(ERR_LIMIT)
        direction = (params.get("direction") or "backward").upper()
        if direction not in ("FORWARD", "BACKWARD"):
            raise BadRequest(f"invalid direction '{params.get('direction')}'")
        step = (
            parse_seconds_or_duration(params.get("step"))
            if params.get("step")
            else max(math.floor((end - start) / NS / 250), 1) * NS
        )
        if step <= 0:
            raise BadRequest(ERR_STEP)
        if (end - start) // step > 11000:
            raise BadRequest(ERR_RESOLUTION)
        if params.get("interval"):
            if parse_seconds_or_duration(params.get("interval")) < 0:
                raise BadRequest("interval must be >= 0")
            raise BadRequest("the sandbox Loki does not implement the interval parameter")
        return start, end, limit, direction == "FORWARD"

    def _check_limits(self, org: str | None, limit: int, start: int, end: int) -> None:
        """The tenant's entry limit, then the query frontend's max query length."""
        max_entries = self._max_entries(org)
        if max_entries and limit > max_entries:
            wording = ENTRY_LIMIT_WORDINGS[self.entry_limit_wording]
            raise BadRequest(wording.format(limit, max_entries))
        # The frontend measures the range at millisecond precision (model.Time).
        length = (end // 1_000_000 - start // 1_000_000) * 1_000_000
        if self.max_query_length_ns and length > self.max_query_length_ns:
            raise BadRequest(
                ERR_QUERY_TOO_LONG.format(
                    go_duration(length), prom_duration(self.max_query_length_ns)
                )
            )

    def _check_query_range_limits(self, org: str | None, start: int, end: int) -> None:
        """The sharding lookup's extra 30 s against max query length, then the tenant's queue."""
        length = (end // 1_000_000 - start // 1_000_000) * 1_000_000
        if self.sharding_lookback and self.max_query_length_ns:
            if length + SHARDING_LOOKBACK_NS > self.max_query_length_ns:
                raise BadRequest(
                    ERR_QUERY_TOO_LONG.format(
                        go_duration(length + SHARDING_LOOKBACK_NS),
                        prom_duration(self.max_query_length_ns),
                    )
                )
        if self.queue is not None:  # waits while the queriers run the sub-queries
            try:
                self.queue.serve(org, length)
            except QueueFull:
                raise TooManyRequests() from None

    def series(self, params: Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/series`: label sets of streams with entries in [start, end)."""
        org = headers.get("X-Scope-OrgID")
        start, end = bounds(params)
        groups = params.all("match[]")
        if not groups:
            raise BadRequest("0 matcher groups supplied")
        if start // 1_000_000 == end // 1_000_000:
            raise ServerError(ERR_MERGE_NONE)
        selectors = [parse_selector_only(g) for g in groups]
        found = []
        served = self._served(start, end)
        start, end = served or (start, end)
        if self._tenant_sees_data(org) and served is not None:
            for s in self._store.ordered():
                labels = s.index_labels
                if any(all(m.matches(labels.get(m.name, "")) for m in ms) for ms in selectors):
                    with self._store.lock:
                        s.settle()
                    lo, hi = s.span(start, end)
                    if lo < hi and labels not in found:
                        found.append(dict(labels))
        return {"status": "success", "data": found}

    def labels(self, params: Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/labels`: label names of streams with entries in [start, end)."""
        org = headers.get("X-Scope-OrgID")
        start, end = bounds(params)
        names: set[str] = set()
        served = self._served(start, end)
        start, end = served or (start, end)
        if self._tenant_sees_data(org) and served is not None:
            for s in self._store.ordered():
                with self._store.lock:
                    s.settle()
                lo, hi = s.span(start, end)
                if lo < hi:
                    names.update(s.index_labels)
        return {"status": "success", "data": sorted(names)}

    def index_stats(self, params: Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/index/stats`: how many streams, chunks, bytes and entries the selector's
        streams hold in [start, end), as a bare object; the query is matchers only."""
        org = headers.get("X-Scope-OrgID")
        start, end, _, _ = self._range_params(params)
        matchers = parse_selector_only(params.get("query"))
        self._check_limits(org, 1, start, end)
        served = self._served(start, end)
        out = {"streams": 0, "chunks": 0, "bytes": 0, "entries": 0}
        if served is None or not self._tenant_sees_data(org) or self.index_stats_from_store_only:
            return out
        start, end = served
        for s in self._store.ordered():
            if not all(m.matches(s.index_labels.get(m.name, "")) for m in matchers):
                continue
            with self._store.lock:
                s.settle()
            lo, hi = s.span(start, end)
            if lo < hi:
                out["streams"] += 1
                out["chunks"] += 1
                out["entries"] += hi - lo
                out["bytes"] += sum(len(line) for line in s.lines[lo:hi])
        return out
