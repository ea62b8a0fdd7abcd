"""Loki's HTTP transport: one GET under the retry policy, errors mapped to typed `SourceError`s,
the `calls` counter, and the tenant queue's gate.

A full tenant queue (429 `too many outstanding requests`) is met by sending fewer requests at
once (`loki_gate.py`: each such 429 halves the requests in flight, each answer grows them back
slowly): the client's own reaction to the server, like its retries. How many shards are read at
once is the caller's bound (`workers`, the scan's). `loki.py` reads shards and pages over it.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
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
from forensics.config import LokiSettings
from forensics.errors import ConfigError, FailureKind, SourceError
from forensics.failures import os_failure
from forensics.model import Window, from_ns
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
from forensics.sources.loki_answers import (
    INDEX_STATS,
    QUERY_RANGE,
    RETRY_STATUSES,
    SOURCE,
    LokiTimeoutError,
    NotLoki,
    content_type,
    is_html,
    non_http,
    not_loki,
    object_store_error,
    refusal,
    snippet,
    summary,
)
from forensics.sources.loki_gate import Gate
from forensics.sources.loki_limits import TOO_MANY_REQUESTS, LokiTooHeavy

log = logging.getLogger("elastic-audit")

C = TypeVar("C", bound="LokiHttp")

_PORTS = {"http": 80, "https": 443}
MAX_PAGE_LIMIT = 5000  # Loki's default max_entries_limit_per_query
# A query_range that times out is split rather than sent again at the same size.
SPLIT_RETRY_STATUSES = RETRY_STATUSES - {504}
BUILDINFO = "/loki/api/v1/status/buildinfo"


class Cancelled(Exception):
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


cancel = threading.local()  # .event: set by scan() workers so backoff sleeps end on close


def _pause(seconds: float) -> None:
    """Sleep before a retry; a closed scan (see `cancel`) ends the sleep with `Cancelled`."""
    if seconds <= 0:
        return
    event: threading.Event | None = getattr(cancel, "event", None)
    if event is None:
        time.sleep(seconds)
    elif event.wait(seconds):
        raise Cancelled()


class _SecretAuth(requests.auth.AuthBase):
    """Sets Authorization from a Secret at send time; never shows the credential in a repr."""

    def __init__(self, header: Callable[[], str]) -> None:
        self._header = header

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = self._header()
        return r

    def __repr__(self) -> str:
        return "_SecretAuth(***)"


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


def ts_param(ns: int) -> str:
    # Loki reads an integer of up to 10 digits as seconds; only instants before 1970-01-01T00:00:10Z
    # are that small, and for them RFC 3339 with nanoseconds is unambiguous.
    if ns > 10_000_000_000:
        return str(ns)
    secs, frac = divmod(ns, 1_000_000_000)
    return from_ns(secs * 1_000_000_000).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _basic(username: str, password: str) -> str:
    """An HTTP Basic Authorization value (RFC 7617; latin-1, as requests encodes it)."""
    raw = f"{username}:{password}".encode("latin1")
    return "Basic " + base64.b64encode(raw).decode("ascii")


class LokiHttp:
    """Loki's HTTP API: GETs with retries over one connection pool, answers as JSON data.

    Built from `LokiSettings` (logcli's conventions: URL, `X-Scope-OrgID`, bearer or basic auth,
    timeout); `workers` is how many shards the caller reads at once (the pool is sized for two
    readers of that many). `calls` counts the requests sent, by API path, retries included.
    Thread-safe.
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
        self.calls: Counter[str] = Counter()
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
            self._auth = _SecretAuth(lambda: _basic(user, password.value))

    # -- counters (for benchmarks and --verbose) ---------------------------------------------

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

    def __enter__(self: C) -> C:
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
        tries = [0]

        def once() -> Any:
            tries[0] += 1
            with self._lock:
                self.calls[path] += 1
            ticket = self.gate.enter(getattr(cancel, "event", None))
            if ticket is None:
                raise Cancelled()
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
        store = object_store_error(ctype, body) is not None  # S3's XML error: its 403s too
        if store or (foreign_body and status not in (401, 403, 407)):  # an auth proxy's page
            self._unless_loki(status, ctype, body)
        text = self._scrub(summary(ctype, body) if foreign_body or store else snippet(body))
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
        """An answer Loki never gives (an HTML page, JSON without Loki's envelope, an object
        store's XML error) came back: raise NotLoki, naming what answered, unless Loki's build
        info (asked once per client) shows Loki is there after all (then a proxy's page in front
        of it: retried as before)."""
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
        a 5xx, or a gateway's plain 404 for a path it does not route); False for an HTML page or
        an object store's XML error there too."""
        with self._lock:
            self.calls[BUILDINFO] += 1
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
            return False if is_html(ctype, body) or object_store_error(ctype, body) else None
        if (
            resp.status_code == 200
            and isinstance(doc, dict)
            and {"version", "revision"} <= set(doc)
        ):
            return True
        return False
