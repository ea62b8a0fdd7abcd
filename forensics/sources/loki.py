"""Loki client: query_range over HTTP with time shards, boundary-safe paging and retries.

One client over one API: paging, shard splitting and error mapping share the same request
path. LogQL building lives in `logql.py`, the retry policy in `forensics/retry.py`.

Paging follows logcli's forward rules (grafana/loki `pkg/logcli/query/query.go::DoQuery`) with a safer de-duplication key: the next page
starts at the last timestamp seen (inclusive) and entries at that boundary are dropped when their
(timestamp, stream labels, line) was already yielded. When a whole page shares one nanosecond
(more than `page_limit` matches at one timestamp, where logcli gives up), the client lists the
streams that have entries in the millisecond of that nanosecond (`/loki/api/v1/series`) and
reads each stream on its own for that nanosecond; only if a single stream holds `page_limit` or more lines at one
nanosecond does the shard fail, loudly, naming the stream and the time.

Tenant limits are met at run time rather than configured exactly (grafana/loki
`pkg/validation/limits.go`): a page limit over the tenant's `max_entries_limit_per_query` is
answered with a 400 whose wording differs between Loki versions; its lower limit is adopted for
the rest of the run. A range over `max_query_length` is a 400 stating the limit: pieces 30 s
shorter are read from then on. A query that times out (Loki's 504 from its `query_timeout`, or no
answer within the client's timeout), reads too many bytes, or meets a full tenant queue (429)
through its retries is too heavy for one request: the piece is read again in two halves, down to
`SPLIT_FLOOR`, before that part becomes a gap. A full tenant queue is met first by sending fewer
requests at once (`loki_gate.py`: each 429 `too many outstanding requests` halves the requests in
flight, each answer grows them back slowly); once a piece the queue refused through its retries is
read in halves, no longer piece is sent for the rest of the run. The texts and their sources are in
`loki_limits.py`. `holds_any` probes whether Loki holds any line of a selector in a window (log
coverage, `forensics/scan/coverage.py`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from operator import attrgetter
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (
    ConnectTimeoutError,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from forensics import __version__
from forensics.concurrency import Emit, stream
from forensics.config import LokiSettings
from forensics.errors import (
    ConfigError,
    FailureKind,
    LokiQueryError,
    SourceError,
)
from forensics.failures import os_failure
from forensics.model import Gap, LogEntry, Window, from_ns, rfc3339, to_ns
from forensics.notices import retrying
from forensics.retry import (
    ONE_TRY,
    RETRY_AFTER_STATUSES,
    Again,
    RetryPolicy,
    call,
    retry_after,
)
from forensics.secrets import mask
from forensics.sources.logql import selector, split_query
from forensics.sources.loki_answers import (
    INDEX_STATS,
    LABELS,
    QUERY_RANGE,
    RETRY_STATUSES,
    SERIES,
    SOURCE,
    LokiAuthError,
    LokiEntryLimitError,
    LokiNoIndexStats,
    LokiTimeoutError,
    NotLoki,
    content_type,
    is_html,
    non_http,
    not_loki,
    refusal,
    snippet,
    summary,
)
from forensics.sources.loki_gate import Gate
from forensics.sources.loki_limits import (
    TOO_MANY_REQUESTS,
    LokiQueryTooLong,
    LokiTooHeavy,
    duration_text,
    learned_piece,
    reading_length,
)

log = logging.getLogger("elastic-audit")

_PORTS = {"http": 80, "https": 443}
MAX_PAGE_LIMIT = 5000  # Loki's default max_entries_limit_per_query
# A query_range that times out is split rather than sent again at the same size.
SPLIT_RETRY_STATUSES = RETRY_STATUSES - {504}
SPLIT_FLOOR = timedelta(minutes=1)  # the smallest piece a timed-out shard is split into
BUILDINFO = "/loki/api/v1/status/buildinfo"


class _PieceTimeout(Exception):
    """A piece of a shard timed out at `start` (entries before it were yielded, `boundary` the
    ones at `start` already seen)."""

    def __init__(self, start: int, boundary: set[Any], error: SourceError) -> None:
        super().__init__(error.cause)
        self.start, self.boundary, self.cause, self.kind = start, boundary, error.cause, error.kind


@dataclass(frozen=True)
class ShardOutcome:
    """How one time shard ended: read completely (`error` is None) or failed, with why."""

    window: Window
    error: str | None
    requests: int
    entries: int
    # The parts of `window` that could not be read, each with why and what that means (set when
    # a timed-out shard was split and only some pieces failed; else the whole window fails with
    # `error`, meaning `failure`).
    failed: tuple[tuple[Window, str, FailureKind], ...] = ()
    failure: FailureKind | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def failures(self) -> tuple[tuple[Window, str], ...]:
        """The unread parts of the shard, each with its error: the gaps it leaves."""
        return tuple((part, error) for part, error, _ in self._parts())

    def gaps(self, source: str = SOURCE) -> list[Gap]:
        """The gaps the shard leaves, each with its failure's meaning: the one conversion every
        reader of `scan` (the scan, `show`, Kubernetes events) uses."""
        return [
            Gap(source, p.start, p.end, error, failure=kind) for p, error, kind in self._parts()
        ]

    def _parts(self) -> tuple[tuple[Window, str, FailureKind | None], ...]:
        if self.failed:
            return self.failed
        return ((self.window, self.error, self.failure),) if self.error is not None else ()


class _PieceTooLong(Exception):
    """A piece of a shard is longer than the tenant's max_query_length (`error.limit`)."""

    def __init__(self, start: int, boundary: set[Any], error: LokiQueryTooLong) -> None:
        super().__init__(error.cause)
        self.start, self.boundary, self.error = start, boundary, error


class _Cancelled(Exception):
    """A scan was closed while this worker waited to retry."""


class _Retryable(Exception):
    """A failure worth another try (`why`, for the notice; `after`, the server's Retry-After);
    `error` is raised when none is left."""

    def __init__(
        self, error: SourceError, why: str, after: float | None = None, *, full: bool = False
    ) -> None:
        super().__init__(error.cause)
        self.error, self.why, self.after, self.full = error, why, after, full


def _again(e: Exception) -> Again | None:
    """The retry checker: only what `_get_once` marked retryable is tried again."""
    return Again(e.why, e.after) if isinstance(e, _Retryable) else None


def why_failed(e: BaseException) -> str:
    """A short reason for the retry notice, by the exception's type."""
    reason = e.args[0].reason if e.args and isinstance(e.args[0], MaxRetryError) else e
    if isinstance(e, requests.exceptions.ReadTimeout) or isinstance(reason, ReadTimeoutError):
        return "timed out"
    kind = _reason_kind(reason)
    if kind is FailureKind.TIMED_OUT:
        return "timed out"
    if kind is FailureKind.UNREACHABLE and isinstance(reason, NewConnectionError):
        return "refused"
    return "failed"


# One try per request at the transport; `_get` retries. Connection failures come back wrapped
# in MaxRetryError (the "gave up after retries" texts); query_range's read timeout is raised as
# one (read=False), to be split.
_ONE_TRY_SPLIT = ONE_TRY.new(read=False)


_cancel = threading.local()  # .event: set by scan() workers so backoff sleeps end on close


def _pause(seconds: float) -> None:
    """Sleep before a retry; a closed scan (see `_cancel`) ends the sleep with `_Cancelled`."""
    if seconds <= 0:
        return
    event: threading.Event | None = getattr(_cancel, "event", None)
    if event is None:
        time.sleep(seconds)
    elif event.wait(seconds):
        raise _Cancelled()


class _SecretAuth(requests.auth.AuthBase):
    """Sets Authorization from a Secret at send time; never shows the credential in a repr."""

    def __init__(self, header: Callable[[], str]) -> None:
        self._header = header

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = self._header()
        return r

    def __repr__(self) -> str:
        return "_SecretAuth(***)"


@dataclass
class _ShardCounts:
    requests: int = 0
    entries: int = 0
    answered: int = 0  # query_range calls Loki answered (a timed-out shard resets on progress)


def _reason_kind(reason: object) -> FailureKind:
    """What urllib3's reason for giving up a connection means, by its type (urllib3's
    NewConnectionError is a ConnectTimeoutError too: it is read first)."""
    if isinstance(reason, NameResolutionError):
        return FailureKind.NAME_UNRESOLVED
    found = os_failure(reason) if isinstance(reason, BaseException) else None
    if isinstance(reason, NewConnectionError):
        return found or FailureKind.UNREACHABLE
    if isinstance(reason, (ReadTimeoutError, ConnectTimeoutError)):
        return FailureKind.TIMED_OUT
    if found is not None:
        return found
    if isinstance(reason, ProtocolError):
        return FailureKind.UNREACHABLE
    return FailureKind.FAILED


def _key(e: LogEntry) -> tuple[int, tuple[tuple[str, str], ...], str]:
    return (e.ts_ns, e.labels, e.line)


def _ns(ns: int | None) -> str:
    return duration_text(timedelta(microseconds=(ns or 0) // 1000))


def _when(ns: int) -> str:
    return rfc3339(from_ns(ns)) or str(ns)


def _ts_param(ns: int) -> str:
    # Loki reads an integer of up to 10 digits as seconds; only instants before 1970-01-01T00:00:10Z
    # are that small, and for them RFC 3339 with nanoseconds is unambiguous.
    if ns > 10_000_000_000:
        return str(ns)
    secs, frac = divmod(ns, 1_000_000_000)
    return from_ns(secs * 1_000_000_000).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


# ---------------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------------


class LokiClient:
    """Reads log lines from Loki's query_range API: one shard at a time or a whole window in shards.

    Built from `LokiSettings` (logcli's conventions: URL, `X-Scope-OrgID`, bearer or basic auth,
    timeout). Thread-safe: `scan` runs up to `workers` shards at once over one connection pool.
    """

    def __init__(
        self,
        settings: LokiSettings,
        *,
        workers: int = 8,
        session: requests.Session | None = None,
        page_limit: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if page_limit is None:
            page_limit = settings.max_entries
        if settings.bearer_token and (settings.username or settings.password):
            raise ConfigError("Loki: configure a bearer token or basic auth, not both")
        if bool(settings.username) != bool(settings.password):
            raise ConfigError("Loki: basic auth needs both a username and a password")
        if not 1 <= page_limit <= MAX_PAGE_LIMIT:
            raise ConfigError(
                f"Loki page limit must be from 1 to {MAX_PAGE_LIMIT}, not {page_limit}"
            )
        if workers < 1:
            raise ConfigError(f"workers must be at least 1, not {workers}")
        self.settings = settings
        self.workers = workers
        self.page_limit = page_limit
        self.retry = retry or RetryPolicy(
            retries=settings.retries, backoff_factor=settings.retry_backoff
        )
        self._base = settings.url.rstrip("/")
        base = urlsplit(self._base)
        self._address = f"{base.scheme}://{base.hostname}:{base.port or _PORTS.get(base.scheme)}"
        self._timeout = (min(10.0, settings.timeout), settings.timeout)
        self._secrets = [
            s.value for s in (settings.bearer_token, settings.password) if s is not None and s.value
        ]
        self._lock = threading.Lock()
        self._requests = 0
        self._bytes = 0
        self._retries = 0

        self._limit_warned = False
        self._no_index_stats = False
        self._is_loki: bool | None = None  # what build info said, once an answer was not Loki's
        self.max_length: timedelta | None = None  # learned from a max_query_length 400
        # Requests in flight, adapted to the tenant's queue (loki_gate.py); at most the pool's.
        self.gate = Gate(max(10, 2 * workers))
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()
        for prefix, split in ((self._base + "/", False), (self._base + QUERY_RANGE, True)):
            # query_range gets its own adapter: a timeout there is raised as one, to be split
            # rather than retried as is (requests picks the longest mounted prefix). Retries are
            # `_get`'s (forensics/retry.py), never urllib3's.
            # Two readers may share this client at once, each with up to `workers` requests in
            # flight: the signals (then the coverage probe) and the Kubernetes events when
            # they live in the same Loki. A smaller pool opens connections it then drops, and
            # urllib3 warns of each ("Connection pool is full") at -v.
            adapter = HTTPAdapter(
                max_retries=_ONE_TRY_SPLIT if split else ONE_TRY,
                pool_connections=1,
                pool_maxsize=max(10, 2 * workers),
            )
            self._session.mount(prefix, adapter)
        self._headers = {"User-Agent": f"elastic-audit/{__version__}", "Accept": "application/json"}
        if settings.org_id:
            self._headers["X-Scope-OrgID"] = settings.org_id
        self._auth: requests.auth.AuthBase | None = None
        if settings.bearer_token:
            token = settings.bearer_token
            self._auth = _SecretAuth(lambda: f"Bearer {token.value}")
        elif settings.username and settings.password:
            user, password = settings.username, settings.password
            self._auth = _SecretAuth(lambda: requests.auth._basic_auth_str(user, password.value))

    # -- counters (for benchmarks and --verbose) ---------------------------------------------

    @property
    def requests(self) -> int:
        """HTTP calls made (retries of one call not included; see `retries`)."""
        return self._requests

    @property
    def bytes_received(self) -> int:
        """Response body bytes received over all calls."""
        return self._bytes

    @property
    def retries(self) -> int:
        """Retries performed by the retry policy over all calls (a timed-out piece read again in
        two halves counts as one)."""
        return self._retries

    def _count_retry(self) -> None:
        with self._lock:
            self._retries += 1

    def close(self) -> None:
        """Release pooled connections (only of a session this client created)."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> LokiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ------------------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return mask(text, self._secrets)

    def _describe(self, e: requests.RequestException) -> tuple[str, FailureKind]:
        """What a failed request says (text) and means (kind): requests' and urllib3's
        exceptions mapped by type, here and nowhere else."""
        read_timeout = self._timeout[1]
        if isinstance(e, requests.exceptions.ChunkedEncodingError):
            return (
                "Loki's response was cut off before its end (truncated body)",
                FailureKind.BAD_ANSWER,
            )
        if isinstance(e, requests.exceptions.ConnectTimeout):
            return f"could not connect to Loki at {self._base} (timed out)", FailureKind.TIMED_OUT
        if isinstance(e, requests.exceptions.ReadTimeout):
            return f"Loki did not answer within {read_timeout:g}s", FailureKind.TIMED_OUT
        reason: object = e
        if e.args and isinstance(e.args[0], MaxRetryError):
            reason = e.args[0].reason
            if isinstance(reason, ReadTimeoutError):
                return (
                    f"Loki did not answer within {read_timeout:g}s (gave up after retries)",
                    FailureKind.TIMED_OUT,
                )
            kind = _reason_kind(reason)
            if kind is FailureKind.UNREACHABLE and isinstance(reason, NewConnectionError):
                return (
                    f"cannot connect to Loki at {self._base}: connection refused (gave up after "
                    "retries)",
                    kind,
                )
            return (
                f"connection to Loki at {self._base} failed (gave up after retries): {reason}",
                kind,
            )
        return f"connection to Loki at {self._base} failed: {reason}", _reason_kind(e)

    def _get(self, path: str, params: dict[str, str], window: Window | None) -> Any:
        """One GET under the retry policy (forensics/retry.py): connection failures, read
        timeouts outside query_range, 429/5xx (a query_range 504 is split instead, see
        `_read_shard`) and a 200 whose body was cut off or is not JSON (a proxy or a dropped
        connection mid-body) are tried again; the last failure is raised as its SourceError."""
        with self._lock:
            self._requests += 1
        tries = [0]

        def once() -> Any:
            tries[0] += 1
            ticket = self.gate.enter(getattr(_cancel, "event", None))
            if ticket is None:
                raise _Cancelled()
            answered = full = False
            try:
                data = self._get_once(path, params, window, tries[0])
                answered = True
                return data
            except _Retryable as r:
                full = r.full
                if full and isinstance(r.error, LokiTooHeavy) and self.gate.too_big(params):
                    raise r.error from None  # longer than the queue takes: read in halves
                if full and r.after is None:
                    r.after = self.gate.pause()  # about one request's time: the queue drains
                raise
            finally:
                self.gate.leave(ticket, answered=answered, full=full)

        def notice(why: str, number: int, of: int) -> None:
            self._count_retry()
            retrying("Loki", self._address, why, number, of)

        try:
            return call(self.retry, once, _again, notice=notice, pause=_pause)
        except _Retryable as e:
            raise e.error from None

    def _get_once(
        self, path: str, params: dict[str, str], window: Window | None, attempt: int
    ) -> Any:
        where = (window.start, window.end) if window is not None else None
        try:
            resp = self._session.get(
                self._base + path,
                params=params,
                headers=self._headers,
                auth=self._auth,
                timeout=self._timeout,
            )
            body = resp.content
        except requests.RequestException as e:
            foreign = non_http(self._address, e)
            if foreign is not None:  # a gRPC port's HTTP/2 frames: no retry mends it
                raise foreign from None
            cls = SourceError
            if path == QUERY_RANGE and isinstance(e, requests.exceptions.ReadTimeout):
                cls = LokiTimeoutError
            text, kind = self._describe(e)
            error = cls(SOURCE, self._scrub(text), window=where, retryable=True, kind=kind)
            if cls is LokiTimeoutError:
                raise error from None  # split, not sent again at the same size
            raise _Retryable(error, why_failed(e)) from None
        with self._lock:
            self._bytes += len(body)
        status, ctype = resp.status_code, content_type(resp.headers)
        if status == 200:
            try:
                doc = resp.json()
                if path == INDEX_STATS and isinstance(doc, dict) and "status" not in doc:
                    return doc  # a bare IndexStatsResponse, no status/data envelope
            except ValueError:
                self._unless_loki(status, ctype, body)
                raise _Retryable(
                    SourceError(
                        SOURCE,
                        f"Loki answered 200 but the body is not JSON ({len(body)} bytes, {ctype}: "
                        f"{self._scrub(summary(ctype, body))}); truncated, or not Loki at "
                        f"{self._address}?",
                        window=where,
                        retryable=True,
                        kind=FailureKind.BAD_ANSWER,
                    ),
                    "answered 200 with a bad body",
                ) from None
            if not isinstance(doc, dict) or "status" not in doc:
                self._unless_loki(status, ctype, body)
            if not isinstance(doc, dict) or doc.get("status") != "success":
                got = doc.get("status") if isinstance(doc, dict) else type(doc).__name__
                raise SourceError(
                    SOURCE,
                    f"Loki answered status {got!r}, not 'success'",
                    window=where,
                    kind=FailureKind.BAD_ANSWER,
                )
            return doc.get("data")
        foreign_body = is_html(ctype, body) or ctype == "application/json"
        if foreign_body and status not in (401, 403, 407):  # an auth proxy's login page
            self._unless_loki(status, ctype, body)
        text = self._scrub(summary(ctype, body) if foreign_body else snippet(body))
        attempts = f" after {attempt} attempts" if attempt > 1 else ""
        error = refusal(status, path, text, attempts, where, self.settings.org_id)
        statuses = SPLIT_RETRY_STATUSES if path == QUERY_RANGE else RETRY_STATUSES
        after = retry_after(resp.headers.get("Retry-After"))
        if isinstance(error, SourceError) and (
            status in statuses or (after and status in RETRY_AFTER_STATUSES)
        ):
            full = status == 429 and TOO_MANY_REQUESTS in text  # the tenant's queue: see Gate
            raise _Retryable(error, f"answered {status}", after, full=full)
        raise error

    def _unless_loki(self, status: int, ctype: str, body: bytes) -> None:
        """An answer Loki never gives (an HTML page, JSON without Loki's envelope) came back:
        raise NotLoki, naming what answered, unless Loki's build info (asked once per client)
        shows Loki is there after all (then a proxy's page in front of it: retried as before)."""
        with self._lock:
            known = self._is_loki
        if known is None:
            known = self._buildinfo_is_loki()
            with self._lock:
                self._is_loki = known
        if known is False:
            raise NotLoki(self._scrub(str(not_loki(self._address, status, ctype, body))))

    def _buildinfo_is_loki(self) -> bool | None:
        """Whether `/loki/api/v1/status/buildinfo` answers as Loki does: a JSON object with
        `version` and `revision` (grafana/loki `pkg/loki/version_handler.go` versionHandler,
        v3.4.2 line 12; Prometheus' PrometheusVersion fields). None: it cannot tell (no answer,
        a 5xx, or a gateway's plain 404 for a path it does not route)."""
        try:
            resp = self._session.get(
                self._base + BUILDINFO,
                headers=self._headers,
                auth=self._auth,
                timeout=self._timeout,
            )
            body = resp.content
        except requests.RequestException as e:
            return False if non_http(self._address, e) is not None else None
        ctype = content_type(resp.headers)
        try:
            doc = resp.json()
        except ValueError:
            return False if is_html(ctype, body) else None
        if (
            resp.status_code == 200
            and isinstance(doc, dict)
            and {"version", "revision"} <= set(doc)
        ):
            return True
        return False

    # -- pages -----------------------------------------------------------------------------------

    def _adopt_limit(self, asked: int, e: LokiEntryLimitError) -> bool:
        """Take the tenant's lower entry limit from its 400 for the rest of the run; False when the
        400 gives nothing lower to try (then it stands as the error it is)."""
        lower = e.limit if e.limit is not None else asked // 2
        if not 1 <= lower < asked:
            return False
        with self._lock:
            if lower >= self.page_limit:
                return True  # another shard adopted it (or less) meanwhile
            self.page_limit = lower
            first, self._limit_warned = not self._limit_warned, True
        if first:
            log.warning(
                "Loki limits this tenant to %d entries per query (max_entries_limit_per_query; "
                "asked for %d): using %d for the rest of the run; set [loki] max_entries = %d "
                "to start there",
                lower,
                asked,
                lower,
                lower,
            )
        else:
            log.debug("Loki entry limit lowered again, to %d", lower)
        return True

    def _page(
        self, query: str, start: int, end: int, window: Window | None, counts: _ShardCounts
    ) -> tuple[list[LogEntry], int]:
        """One query_range call, flattened across streams and sorted by time (stable), and the
        page limit it was read with (lowered, and the call repeated, on the tenant's 400)."""
        while True:
            limit = self.page_limit
            counts.requests += 1
            params = {
                "query": query,
                "start": _ts_param(start),
                "end": _ts_param(end),
                "limit": str(limit),
                "direction": "forward",
            }
            try:
                data = self._get(QUERY_RANGE, params, window)
                break
            except LokiEntryLimitError as e:
                if not self._adopt_limit(limit, e):
                    raise
        counts.answered += 1
        where = (window.start, window.end) if window is not None else None
        if not isinstance(data, dict) or data.get("resultType") != "streams":
            got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise SourceError(
                SOURCE,
                f"expected a log query result (streams), got {got!r}",
                window=where,
                kind=FailureKind.BAD_ANSWER,
            )
        out: list[LogEntry] = []
        try:
            for stream in data.get("result") or ():
                labels = tuple(sorted((stream.get("stream") or {}).items()))
                for value in stream.get("values") or ():
                    # A third element (categorize-labels metadata) may follow; it is not needed.
                    ts = int(value[0])
                    if start <= ts < end:
                        out.append(LogEntry(ts, labels, value[1]))
        except (AttributeError, IndexError, TypeError, ValueError) as e:
            raise SourceError(
                SOURCE,
                f"unexpected query_range result shape: {e}",
                window=where,
                kind=FailureKind.BAD_ANSWER,
            ) from None
        # Loki orders entries within a stream only; merge across streams by time.
        out.sort(key=attrgetter("ts_ns"))
        return out, limit

    def _series(
        self,
        stream_selector: str,
        start: int,
        end: int,
        window: Window | None,
        counts: _ShardCounts,
    ) -> list[dict[str, str]]:
        counts.requests += 1
        params = {"match[]": stream_selector, "start": _ts_param(start), "end": _ts_param(end)}
        data = self._get(SERIES, params, window)
        if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
            where = (window.start, window.end) if window is not None else None
            raise SourceError(
                SOURCE, "unexpected series result shape", window=where, kind=FailureKind.BAD_ANSWER
            )
        return data

    def _pages(
        self,
        query: str,
        window: Window,
        counts: _ShardCounts,
        boundary: set[tuple[int, tuple[tuple[str, str], ...], str]] | None = None,
    ) -> Iterator[list[LogEntry]]:
        """The new entries of one shard, page by page, in time order; `boundary`: entries at
        `window.start` already yielded. A page that times out raises _PieceTimeout."""
        start, end = to_ns(window.start), to_ns(window.end)
        boundary = set() if boundary is None else boundary
        while start < end:
            try:
                entries, limit = self._page(query, start, end, window, counts)
            except LokiTooHeavy as e:
                raise _PieceTimeout(start, boundary, e) from None
            except LokiQueryTooLong as e:
                raise _PieceTooLong(start, boundary, e) from None
            fresh = [e for e in entries if _key(e) not in boundary]
            if fresh:
                counts.entries += len(fresh)
                yield fresh
            if len(entries) < limit:
                return
            last = entries[-1].ts_ns
            if entries[0].ts_ns == last:
                # `limit` or more entries share one nanosecond: paging from `last` again would
                # return the same page forever. Read that nanosecond stream by stream instead.
                seen = boundary | {_key(e) for e in entries}
                for page in self._one_nanosecond(query, last, seen, window, counts):
                    counts.entries += len(page)
                    yield page
                start, boundary = last + 1, set()
            else:
                start, boundary = last, {_key(e) for e in entries if e.ts_ns == last}

    def _one_nanosecond(
        self,
        query: str,
        ts: int,
        seen: set[tuple[int, tuple[tuple[str, str], ...], str]],
        window: Window,
        counts: _ShardCounts,
    ) -> Iterator[list[LogEntry]]:
        stream_selector, pipeline = split_query(query)
        # The streams with entries in the millisecond around `ts`: a real Loki's frontend splits a
        # series request on millisecond bounds and answers a range inside one millisecond with a
        # 500 (grafana/loki `pkg/querier/queryrange/codec.go` MergeResponse: "merging responses
        # requires at least one response"). The lines are then read at `ts` exactly.
        ms = ts - ts % 1_000_000
        for labels in self._series(stream_selector, ms, ms + 1_000_000, window, counts):
            exact = selector([(k, "=", v) for k, v in sorted(labels.items())])
            entries, limit = self._page(f"{exact} {pipeline}".strip(), ts, ts + 1, window, counts)
            if len(entries) >= limit:
                raise SourceError(
                    SOURCE,
                    f"{len(entries)} or more matching lines of stream {exact} share the timestamp "
                    f"{_when(ts)} ({ts} ns), as many as one page holds ({limit}); "
                    "Loki offers no way to page past them, so this shard cannot be read completely",
                    window=(window.start, window.end),
                )
            fresh = [e for e in entries if _key(e) not in seen]
            if fresh:
                yield fresh

    def _split_budget(self, window: Window) -> int:
        """Timeouts in a row after which a shard gives up: enough to halve it down to the floor,
        and at least the attempts one call gets (so a Loki that times out on everything costs
        about what it did before splitting existed)."""
        halvings = max(0, math.ceil(math.log2(max(1.0, (window.end - window.start) / SPLIT_FLOOR))))
        return max(self.retry.retries + 1, halvings + 1)

    def _read_shard(
        self,
        query: str,
        window: Window,
        counts: _ShardCounts,
        fail: Callable[[Window, str, FailureKind], None],
    ) -> Iterator[list[LogEntry]]:
        """The pages of one shard; a piece that times out is read again in two halves.

        Pieces are read in time order (a stack, earliest on top). A timed-out piece is halved from
        where it stopped; a piece of `SPLIT_FLOOR` or less that times out is handed to `fail` and
        the next piece is read. After `_split_budget` timeouts with no answer in between, the rest
        of the shard is handed to `fail` as one part.
        """
        end = to_ns(window.end)
        floor = to_ns(window.start + SPLIT_FLOOR) - to_ns(window.start)
        budget = self._split_budget(window)
        todo: list[tuple[int, int, set[Any] | None]] = [(to_ns(window.start), end, None)]
        in_a_row, answered, throttled = 0, counts.answered, 0
        while todo:
            lo, hi, boundary = todo.pop()
            if self._split_to_length(lo, hi, boundary, todo):
                continue
            piece = Window(from_ns(lo), from_ns(hi))
            try:
                yield from self._pages(query, piece, counts, boundary)
                if throttled > hi - lo and self.gate.learn(throttled, floor):  # halves fit
                    log.info("Loki's tenant queue: reading pieces of %s", _ns(self.gate.piece))
                continue
            except _PieceTooLong as t:
                self._learn_length(t.error, hi - t.start)
                todo.append((t.start, hi, t.boundary))  # split to the learned length when popped
                continue
            except _PieceTimeout as t:
                if t.kind is FailureKind.THROTTLED:  # the tenant's queue refused it: see Gate
                    throttled = hi - t.start
                if counts.answered != answered:
                    in_a_row = 0  # Loki answered since the last timeout: progress, not a dead Loki
                answered = counts.answered
                in_a_row += 1
                if in_a_row >= budget:
                    fail(
                        Window(from_ns(t.start), window.end),
                        f"{t.cause} (timed out {in_a_row} times in a row while splitting this "
                        f"shard; a smaller [loki] shard may read it)",
                        t.kind,
                    )
                    return
                if hi - t.start <= floor:
                    fail(
                        Window(from_ns(t.start), from_ns(hi)),
                        f"{t.cause} (not split below 1m)",
                        t.kind,
                    )
                    continue
                mid = t.start + (hi - t.start) // 2
                log.debug(
                    "Loki timed out on %s..%s; reading it in halves", _when(t.start), _when(hi)
                )
                self._count_retry()
                todo.append((mid, hi, None))
                todo.append((t.start, mid, t.boundary))

    def _split_to_length(
        self, lo: int, hi: int, boundary: set[Any] | None, todo: list[Any]
    ) -> bool:
        """Replace a piece longer than the learned max_query_length (or than the tenant's queue
        takes, `gate.piece`) by pieces that fit (pushed on `todo`, earliest on top); False when
        it fits."""
        steps = [p // timedelta(microseconds=1) * 1000 for p in (self.max_length,) if p]
        if self.gate.piece is not None:
            steps.append(self.gate.piece)
        if not steps:
            return False
        step = min(steps)
        if hi - lo <= step:
            return False
        starts = list(range(lo, hi, step))
        for a in reversed(starts):
            todo.append((a, min(a + step, hi), boundary if a == lo else None))
        return True

    def _learn_length(self, e: LokiQueryTooLong, asked_ns: int) -> None:
        """Take the tenant's max_query_length from its 400 for the rest of the run; the 400
        stands as the error it is when it states no limit shorter than what was asked."""
        limit = e.limit
        piece = learned_piece(limit) if limit is not None else None
        if (
            piece is None
            or piece <= timedelta(0)
            or piece // timedelta(microseconds=1) * 1000 >= asked_ns
        ):
            raise e
        with self._lock:
            if self.max_length is not None and self.max_length <= piece:
                return  # another shard learned it (or less) meanwhile
            first = self.max_length is None
            self.max_length = piece
        if first:
            log.warning(
                "Loki limits this tenant's queries to %s (max_query_length): reading pieces of %s "
                'for the rest of the run; set [loki] max_query_length = "%s" to start there',
                duration_text(limit),
                duration_text(piece),
                duration_text(piece),
            )

    # -- public reads ----------------------------------------------------------------------------

    def index_stats(self, stream_selector: str, window: Window) -> int:
        """How many log entries Loki holds for `stream_selector` in `window`, from its index alone
        (`/loki/api/v1/index/stats`: one request, no chunk read; grafana/loki
        `pkg/querier/querier.go` IndexStats). The same frontend limits apply as to query_range:
        what `max_query_lookback` (or retention) no longer serves counts as no entries
        (`pkg/querier/queryrange/limits.go`). Raises SourceError like every read; a Loki
        without the endpoint (404) raises LokiQueryError."""
        params = {
            "query": stream_selector,
            "start": _ts_param(to_ns(window.start)),
            "end": _ts_param(to_ns(window.end)),
        }
        where = (window.start, window.end)
        try:
            data = self._get(INDEX_STATS, params, window)
        except SourceError as e:
            if e.cause.startswith("HTTP 404"):
                raise LokiNoIndexStats(SOURCE, e.cause, window=where) from None
            raise
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, int):
            raise SourceError(
                SOURCE,
                "unexpected index/stats result shape",
                window=where,
                kind=FailureKind.BAD_ANSWER,
            )
        return entries

    def label_names(self, window: Window) -> list[str]:
        """The label names of the streams Loki holds in `window` (`/loki/api/v1/labels`)."""
        params = {"start": _ts_param(to_ns(window.start)), "end": _ts_param(to_ns(window.end))}
        data = self._get(LABELS, params, window)
        return sorted(str(n) for n in data) if isinstance(data, list) else []

    def holds_any(self, stream_selector: str, window: Window) -> bool:
        """Whether Loki serves at least one entry of `stream_selector` in `window` (asked in
        pieces of the learned max_query_length; see `_holds_any`)."""
        todo: list[tuple[int, int, set[Any] | None]] = []
        lo, hi = to_ns(window.start), to_ns(window.end)
        if not self._split_to_length(lo, hi, None, todo):
            todo = [(lo, hi, None)]
        for a, b, _ in reversed(todo):
            try:
                if self._holds_any(stream_selector, Window(from_ns(a), from_ns(b))):
                    return True
            except LokiQueryTooLong as e:
                self._learn_length(e, b - a)  # raises it when nothing shorter is learned
                return self.holds_any(stream_selector, window)
        return False

    def _holds_any(self, stream_selector: str, window: Window) -> bool:
        """Whether Loki serves at least one entry of `stream_selector` in `window`.

        Its index stats first (one request, no chunk read). They count only what the querier
        asks about: a real Loki leaves out ingesters for times older than the querier's
        `query_ingesters_within` (grafana/loki `pkg/storage/async_store.go` Stats,
        shouldQueryIngesters) although query_range reads them, so "none" is confirmed by one
        query_range of limit 1 (also the whole probe on a Loki or gateway without `index/stats`).
        """
        if not self._no_index_stats:
            try:
                if self.index_stats(stream_selector, window) > 0:
                    return True
            except LokiNoIndexStats:
                with self._lock:
                    first, self._no_index_stats = not self._no_index_stats, True
                if first:
                    log.info(
                        "Loki answers 404 on %s: log coverage is probed with query_range",
                        INDEX_STATS,
                    )
        start, end = to_ns(window.start), to_ns(window.end)
        params = {
            "query": stream_selector,
            "start": _ts_param(start),
            "end": _ts_param(end),
            "limit": "1",
            "direction": "forward",
        }
        data = self._get(QUERY_RANGE, params, window)
        result = data.get("result") if isinstance(data, dict) else None
        return any(s.get("values") for s in result or () if isinstance(s, dict))

    def query_range(self, query: str, window: Window) -> Iterator[LogEntry]:
        """Every entry matching `query` in `window` (one shard: `[start, end)`), in time order.

        Streams entries page by page (never more than one page in memory). A timed-out piece is
        read in halves (see `_read_shard`). Raises LokiQueryError on HTTP 400 (Loki's own text),
        LokiAuthError on 401/403, SourceError when Loki cannot be read after retries and splits or
        answers something that is not a Loki result.
        """
        counts = _ShardCounts()

        def fail(part: Window, cause: str, kind: FailureKind) -> None:
            raise SourceError(
                SOURCE, cause, window=(part.start, part.end), retryable=True, kind=kind
            )

        for page in self._read_shard(query, window, counts, fail):
            yield from page

    def scan(
        self,
        query: str,
        window: Window,
        *,
        shard: timedelta,
        max_query_length: timedelta,
    ) -> Iterator[LogEntry | ShardOutcome]:
        """Read `window` in shards of at most min(shard, max_query_length), `workers` at a time.

        Yields entries as pages arrive (time-ordered within a shard, interleaved across shards)
        and one ShardOutcome per shard when it ends, read or failed. A failing shard does not stop
        the others; a rejected query (400) or refused credentials (401/403) would fail every
        shard alike, so they stop the scan and are raised. Closing the generator stops the workers.
        """
        split_query(query)  # a malformed selector is a configuration mistake: say so up front
        shards = window.split(reading_length(shard, max_query_length))
        if not shards:
            return
        stop = threading.Event()

        def read(w: Window, emit: Emit) -> None:
            _cancel.event = stop  # a backoff sleep ends when the scan is closed
            counts = _ShardCounts()
            failed: list[tuple[Window, str, FailureKind]] = []
            try:
                pages = self._read_shard(
                    query,
                    w,
                    counts,
                    lambda part, cause, kind, f=failed: f.append((part, cause, kind)),
                )
                for page in pages:
                    if not emit(page):
                        return
            except _Cancelled:
                return
            except (LokiQueryError, LokiAuthError):
                raise  # every shard would fail alike: the scan stops
            except SourceError as e:
                failed = [(w, e.cause, e.kind)]  # the whole shard, whatever was read of it
            error, kind = (failed[0][1], failed[0][2]) if failed else (None, None)
            emit(
                ShardOutcome(
                    w, error, counts.requests, counts.entries, failed=tuple(failed), failure=kind
                )
            )

        items = stream(
            "loki-shard",
            [partial(read, w) for w in shards],
            self.workers,
            stop=stop,
            buffer=2 * self.workers,
        )
        try:
            for item in items:
                if isinstance(item, list):
                    yield from item
                else:
                    yield item
        finally:
            items.close()  # stops the workers when the caller stops early
