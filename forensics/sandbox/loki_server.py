"""A loopback Loki-API server for tests, benchmarks and `demo`: query_range with Loki's semantics.

It speaks the parts of Loki's HTTP API the tool uses (checked against grafana/loki
`pkg/loghttp/params.go`, `pkg/loghttp/query.go`, `pkg/util/server/error.go`,
`pkg/querier/queryrange/limits.go`, `pkg/logqlmodel/error.go`): GET and POST (form) on
`/loki/api/v1/query_range`, `/loki/api/v1/series`, `/loki/api/v1/labels`,
`/loki/api/v1/index/stats`, `/ready` and `/loki/api/v1/status/buildinfo`; LogQL stream selectors with line filters only; Loki's error
texts and status codes; optional tenant and gateway auth; and injected faults.

Lines live per stream in time-sorted arrays (bisect on time, filters applied lazily, stream labels
stored once), so a million lines stay quick to query. Regexes run on Python's `re`, translated from
RE2 where the two differ (`\\z`, `(?<name>`); RE2-only Unicode classes are refused, and Perl features
RE2 rejects (lookaround, backreferences) are rejected as Loki would.

Parameter syntax lives in `loki_params.py`, the LogQL subset in `loki_logql.py`, streams and the
query evaluation in `loki_store.py`; the API semantics and the HTTP handler here share one
server's state (faults, auth, the stop event, the request log).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from forensics.model import Window, to_ns
from forensics.sandbox.loki_logql import parse_log_query, parse_selector_only
from forensics.sandbox.loki_params import (
    NS,
    BadRequest,
    Params,
    atoi,
    form_pairs,
    go_duration,
    parse_prom_duration,
    parse_seconds_or_duration,
    parse_timestamp,
    prom_duration,
)
from forensics.sandbox.loki_queue import QueueFull, TenantQueue
from forensics.sandbox.loki_store import Store, discovered, ibytes, select, stats
from forensics.sandbox.scenario import SandboxLogLine

SANDBOX_VERSION = "3.4.2"  # the Loki release whose texts this server reproduces

ERR_END_BEFORE_START = "end timestamp must not be before or equal to start time"
ERR_LIMIT = "limit must be a positive value"
ERR_STEP = "zero or negative query resolution step widths are not accepted. Try a positive integer"
ERR_RESOLUTION = (
    "exceeded maximum resolution of 11,000 points per time series. "
    "Try increasing the value of the step parameter"
)
# The 400 for a limit over the tenant's max_entries_limit_per_query, in both wordings Loki uses:
# v3's query frontend (pkg/util/validation/validate.go ErrMaxEntriesLimit) and its querier /
# older releases (pkg/querier/http.go validateMaxEntriesLimits).
ERR_MAX_ENTRIES = (
    "max entries limit per query exceeded, limit > max_entries_limit_per_query ({} > {})"
)
ERR_MAX_ENTRIES_QUERIER = (
    "max entries limit per query exceeded, limit > max_entries_limit ({} > {})"
)
ENTRY_LIMIT_WORDINGS = {"frontend": ERR_MAX_ENTRIES, "querier": ERR_MAX_ENTRIES_QUERIER}
ERR_QUERY_TOO_LONG = "the query time range exceeds the limit (query length: {}, limit: {})"
ERR_DEADLINE = (
    "request timed out, decrease the duration of the request or add more label matchers "
    "(prefer exact match over regex match) to reduce the amount of data processed"
)
# pkg/querier/queryrange/limits.go limErrQueryTooManyBytesTmpl (max_query_bytes_read); sizes in
# go-humanize IBytes form.
ERR_TOO_MANY_BYTES = (
    "the query would read too many bytes (query: {}, limit: {}); consider adding more specific "
    "stream selectors or reduce the time range of the query"
)
ERR_TOO_MANY_REQUESTS = "too many outstanding requests"  # pkg/queue/queue.go ErrTooManyRequests
ERR_TOO_MANY_ORG_IDS = "multiple org IDs present"  # dskit user/id.go ErrTooManyOrgIDs
# pkg/querier/queryrange/codec.go MergeResponse: the frontend splits a series request on
# millisecond bounds; a range inside one millisecond leaves no sub-request to merge.
ERR_MERGE_NONE = "merging responses requires at least one response"
SHARDING_LOOKBACK_NS = 30 * NS  # pkg/logql/engine.go max_look_back_period default
FAULT_BODIES = {
    429: "too many outstanding requests",
    500: "rpc error: code = Internal desc = injected fault",
    502: "502 Bad Gateway",
    503: "503 Service Unavailable",
    504: ERR_DEADLINE,
}
FAULT_KINDS = frozenset([*FAULT_BODIES, "truncated", "nonjson", "reset", "timeout"])


class Refusal(Exception):
    """An answer other than 200 or 400: `status` and Loki's text (the exception's message)."""

    status = 500


class ServerError(Refusal):
    """An internal error Loki answers with HTTP 500 and its text."""


class TooManyRequests(Refusal):
    """The tenant's query queue is full: HTTP 429 `too many outstanding requests`."""

    status = 429

    def __init__(self) -> None:
        super().__init__(ERR_TOO_MANY_REQUESTS)


class QueryTimeout(Refusal):
    """A query Loki gave up on at its query_timeout: HTTP 504 with ERR_DEADLINE
    (pkg/util/server/error.go maps context.DeadlineExceeded to it)."""

    status = 504

    def __init__(self) -> None:
        super().__init__(ERR_DEADLINE)


# ---------------------------------------------------------------------------------------------
# Faults and the request record
# ---------------------------------------------------------------------------------------------


@dataclass
class FaultRule:
    """One injected failure on the data endpoints (query_range, series).

    `status`: 429, 500, 502, 503, 504 (with Loki-like bodies), "truncated" (a 200 cut off
    mid-body), "nonjson" (a 200 that is an HTML page), "reset" (TCP reset, no response),
    "timeout" (stall `sleep` seconds, then answer normally). `count`: how many matching requests
    fail, or "always". `window`: only queries whose [start, end) overlaps it.
    """

    status: int | str
    count: int | str = 1
    window: Window | None = None
    retry_after: str | None = None
    sleep: float = 0.0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.status not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault {self.status!r}; one of {sorted(map(str, FAULT_KINDS))}"
            )
        if self.count != "always" and not (isinstance(self.count, int) and self.count >= 0):
            raise ValueError("count must be a non-negative number or 'always'")
        if self.status == "timeout" and self.sleep <= 0:
            raise ValueError("a timeout fault needs sleep > 0 (longer than the client's timeout)")

    def applies(self, start: int | None, end: int | None) -> bool:
        if self.count != "always" and self.fired >= int(self.count):
            return False
        if self.window is None:
            return True
        if start is None or end is None:
            return False
        return to_ns(self.window.start) < max(end, start + 1) and start < to_ns(self.window.end)


@dataclass
class LokiFaults:
    """Fault injection for a LokiServer: latency on every data request and failure rules."""

    latency: float = 0.0
    rules: list[FaultRule] = field(default_factory=list)
    # Seconds more per log line a query_range's selected streams hold in its [start, end): a real
    # Loki reads every chunk of those streams in the range to apply the line filters, so its
    # answer takes time in proportion to the lines scanned, not to the lines returned.
    latency_per_line: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw and answered it (the Authorization header left out)."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    status: int
    bytes: int
    fault: str | None
    at: float  # time.monotonic() when it arrived


class RequestLog:
    """A thread-safe, append-only list of RecordedRequest."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []

    def append(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(self.snapshot())

    def __getitem__(self, i: int) -> RecordedRequest:
        with self._lock:
            return self._items[i]


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


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
        handler = type("_BoundHandler", (_Handler,), {"loki": self})
        self._httpd = _HTTPServer(("127.0.0.1", 0), handler)
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

    # -- request handling (called from handler threads) -------------------------------------------

    def _pick_fault(self, start: int | None, end: int | None) -> FaultRule | None:
        with self._faults_lock:
            for rule in self.faults.rules:
                if rule.applies(start, end):
                    rule.fired += 1
                    return rule
        return None

    def _check_auth(self, headers: Any) -> str | None:
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

    def _bounds(self, params: Params) -> tuple[int, int]:
        now = time.time_ns()
        since = 3600 * NS
        if params.get("since"):
            try:
                since = parse_prom_duration(params.get("since"))
            except ValueError as e:
                raise BadRequest(f"could not parse 'since' parameter: {e}") from None
        try:
            end = parse_timestamp(params.get("end")) if params.get("end") else now
        except ValueError as e:
            raise BadRequest(f"could not parse 'end' parameter: {e}") from None
        try:
            start = parse_timestamp(params.get("start")) if params.get("start") else None
        except ValueError as e:
            raise BadRequest(f"could not parse 'start' parameter: {e}") from None
        if start is None:
            start = min(end, now) - since
        return start, end

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
        """start, end, limit and whether forward, refused in the order Loki checks them
        (grafana/loki `pkg/loghttp/params.go`, `query.go::ParseRangeQuery`)."""
        start, end = self._bounds(params)
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
        start, end = self._bounds(params)
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
        start, end = self._bounds(params)
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
        streams hold in [start, end), as a bare object (grafana/loki `pkg/logproto`
        IndexStatsResponse, written by `pkg/util/marshal/marshal.go` WriteIndexStatsResponseJSON;
        the query is matchers only, `pkg/querier/querier.go` IndexStats -> ParseMatchers)."""
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


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection; a listen backlog deep enough for many concurrent workers."""

    daemon_threads = True
    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    """Translates HTTP requests into LokiServer calls (no state of its own)."""

    loki: LokiServer
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
        denied = loki._check_auth(self.headers)
        if denied is not None:
            extra = {"WWW-Authenticate": 'Basic realm="loki"'} if loki.basic_auth else {}
            self._text(401, denied, extra)
            return
        routes: dict[str, Callable[[Params, Any], dict[str, Any]]] = {
            "/loki/api/v1/query_range": loki.query_range,
            "/loki/api/v1/series": loki.series,
            "/loki/api/v1/labels": loki.labels,
            "/loki/api/v1/label": loki.labels,
        }
        if loki.index_stats_enabled:
            routes["/loki/api/v1/index/stats"] = loki.index_stats
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
            loki._stopping.wait(loki.faults.latency)
        try:
            start, end = loki._bounds(params)
        except BadRequest:
            start = end = None
        rule = loki._pick_fault(start, end)
        if rule is None:
            return False
        self._fault = str(rule.status)
        if rule.status == "timeout":
            loki._stopping.wait(rule.sleep)
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
