"""Loki client: query_range in time shards, boundary-safe paging, splitting what is too heavy.

Over the HTTP transport (`loki_http.py`: retries, errors, the tenant queue's gate); LogQL building
lives in `logql.py`. `read_shards` yields the entries and one `ShardRead` per shard (its failed
parts, if any): it builds no report gap, and a rejected query or refused credentials raise.

Paging follows logcli's forward rules with a safer de-duplication key: the next page starts at
the last timestamp seen (inclusive) and entries at that boundary are dropped when their
(timestamp, stream labels, line) was already yielded. When a whole page shares one nanosecond
the client lists the streams that have entries in that millisecond and reads each on its own for
that nanosecond; only if a single stream holds `page_limit` or more lines at one nanosecond does
the shard fail, naming the stream and the time.

Tenant limits are learned at run time: a lower `max_entries_limit_per_query` or a
`max_query_length` stated in a 400 is adopted for the rest of the run; a query that times out,
reads too many bytes or meets a full tenant queue through its retries is read again in two
halves, down to `SPLIT_FLOOR`, before that part fails. Upstream sources and the texts:
docs/upstream.md ("Loki") and `loki_limits.py`.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from operator import attrgetter
from typing import Any

from forensics.concurrency import Emit, stream
from forensics.errors import FailureKind, LokiQueryError, SourceError
from forensics.model import FailedPart, LogEntry, ShardRead, Window, from_ns, rfc3339, to_ns
from forensics.sources.logql import selector, split_query
from forensics.sources.loki_answers import (
    INDEX_STATS,
    LABELS,
    QUERY_RANGE,
    SERIES,
    SOURCE,
    LokiAuthError,
    LokiEntryLimitError,
    LokiNoIndexStats,
)
from forensics.sources.loki_http import MAX_PAGE_LIMIT, Cancelled, LokiHttp, cancel
from forensics.sources.loki_http import ts_param as _ts_param
from forensics.sources.loki_limits import (
    LokiQueryTooLong,
    LokiTooHeavy,
    duration_text,
    learned_piece,
    reading_length,
)

__all__ = ["MAX_PAGE_LIMIT", "SOURCE", "LokiClient"]

log = logging.getLogger("elastic-audit")

SPLIT_FLOOR = timedelta(minutes=1)  # the smallest piece a timed-out shard is split into


class _PieceTimeout(Exception):
    """A piece of a shard timed out at `start` (entries before it were yielded, `boundary` the
    ones at `start` already seen)."""

    def __init__(self, start: int, boundary: set[Any], error: SourceError) -> None:
        super().__init__(error.cause)
        self.start, self.boundary, self.cause, self.kind = start, boundary, error.cause, error.kind


class _PieceTooLong(Exception):
    """A piece of a shard is longer than the tenant's max_query_length (`error.limit`)."""

    def __init__(self, start: int, boundary: set[Any], error: LokiQueryTooLong) -> None:
        super().__init__(error.cause)
        self.start, self.boundary, self.error = start, boundary, error


@dataclass
class _ShardCounts:
    requests: int = 0
    entries: int = 0
    answered: int = 0  # query_range calls Loki answered (a timed-out shard resets on progress)


def _key(e: LogEntry) -> tuple[int, tuple[tuple[str, str], ...], str]:
    return (e.ts_ns, e.labels, e.line)


def _ns(ns: int | None) -> str:
    return duration_text(timedelta(microseconds=(ns or 0) // 1000))


def _when(ns: int) -> str:
    return rfc3339(from_ns(ns)) or str(ns)


class LokiClient(LokiHttp):
    """Reads log lines from Loki's query_range API: one shard at a time or a whole window in
    shards (`read_shards`, `workers` at a time). Thread-safe."""

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

    def read_shards(
        self,
        query: str,
        window: Window,
        *,
        shard: timedelta,
        max_query_length: timedelta,
    ) -> Iterator[LogEntry | ShardRead]:
        """Read `window` in shards of at most min(shard, max_query_length), `workers` at a time.

        Yields entries as pages arrive (time-ordered within a shard, interleaved across shards)
        and one ShardRead per shard when it ends, read or with its failed parts. A failing shard
        does not stop the others; a rejected query (400) or refused credentials (401/403) would
        fail every shard alike, so they stop the read and are raised. Closing the generator
        stops the workers.
        """
        split_query(query)  # a malformed selector is a configuration mistake: say so up front
        shards = window.split(reading_length(shard, max_query_length))
        if not shards:
            return
        stop = threading.Event()

        def read(w: Window, emit: Emit) -> None:
            cancel.event = stop  # a backoff sleep ends when the read is closed
            counts = _ShardCounts()
            failed: list[FailedPart] = []
            try:
                pages = self._read_shard(
                    query,
                    w,
                    counts,
                    lambda part, cause, kind, f=failed: f.append(
                        FailedPart(part.start, part.end, cause, kind)
                    ),
                )
                for page in pages:
                    if not emit(page):
                        return
            except Cancelled:
                return
            except (LokiQueryError, LokiAuthError):
                raise  # every shard would fail alike: the read stops
            except SourceError as e:
                failed = [FailedPart(w.start, w.end, e.cause, e.kind)]  # the whole shard
            emit(ShardRead(w, counts.requests, counts.entries, tuple(failed)))

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
