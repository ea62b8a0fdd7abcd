"""The sandbox Loki's storage and query evaluation: streams of time-sorted lines, and the pick of
the first `limit` entries over them in direction order, as Loki's merge across streams does."""

from __future__ import annotations

import heapq
import math
import threading
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress, islice, repeat
from typing import Any

from forensics.sandbox.loki_logql import LogQuery
from forensics.sandbox.loki_params import NS
from forensics.sandbox.scenario import SandboxLogLine


class Stream:
    """One stream: labels (stored once) and its lines, kept sorted by time on demand."""

    __slots__ = ("_run", "in_order", "index_labels", "key", "labels", "lines", "ts")

    def __init__(
        self,
        labels: dict[str, str],
        key: tuple[tuple[str, str], ...],
        metadata: frozenset[str] = frozenset(),
    ) -> None:
        self.labels = labels  # as a query result shows them: structured metadata merged in
        self.index_labels = {k: v for k, v in labels.items() if k not in metadata}
        self.key = key
        self.ts = array("q")
        self.lines: list[str] = []
        self.in_order = True
        self._run: set[str] = set()  # lines at the last timestamp, to drop exact duplicates

    def add(self, ts: int, line: str) -> None:
        if self.in_order and self.ts:
            last = self.ts[-1]
            if ts < last:
                self.in_order = False
            elif ts == last:
                # Loki keeps one copy of an entry repeated with the same timestamp and line.
                if line in self._run:
                    return
                self._run.add(line)
            else:
                self._run = {line}
        elif self.in_order:
            self._run = {line}
        self.ts.append(ts)
        self.lines.append(line)

    def settle(self) -> None:
        if self.in_order:
            return
        order = sorted(range(len(self.ts)), key=self.ts.__getitem__)
        old_ts, old_lines = self.ts, self.lines
        self.ts, self.lines, self.in_order, self._run = array("q"), [], True, set()
        for i in order:
            self.add(old_ts[i], old_lines[i])

    def span(self, start: int, end: int) -> tuple[int, int]:
        return bisect_left(self.ts, start), bisect_left(self.ts, end)


HOUR_NS = 3_600 * NS


class Selection:
    """The streams one stream selector chose, in the store's order, indexed by the hours their
    entries span: a query reads only the streams its [start, end) overlaps, as Loki's index
    finds the chunks of a time range, rather than bisecting every chosen stream (why:
    docs/performance.md, "The benchmark's own servers on the scan's core"). The answer is the
    same: the streams are those whose span is not empty, in the same order."""

    def __init__(self, streams: list[Stream]) -> None:
        self.streams = streams
        self._by_hour: dict[int, list[int]] = {}
        for i, s in enumerate(streams):
            if s.ts:
                for hour in range(s.ts[0] // HOUR_NS, s.ts[-1] // HOUR_NS + 1):
                    self._by_hour.setdefault(hour, []).append(i)

    def within(self, start: int, end: int) -> list[Stream]:
        """The chosen streams with an entry in [start, end), in the store's order."""
        if end <= start:
            return []
        first, last = start // HOUR_NS, (end - 1) // HOUR_NS
        if last - first >= len(self._by_hour):
            hours: Iterable[int] = [h for h in self._by_hour if first <= h <= last]
        else:
            hours = range(first, last + 1)
        ids: set[int] = set()
        for hour in hours:
            ids.update(self._by_hour.get(hour, ()))
        out = []
        for i in sorted(ids):
            s = self.streams[i]
            lo, hi = s.span(start, end)
            if lo < hi:
                out.append(s)
        return out


class Store:
    """All streams, keyed by their sorted label pairs.

    Labels named in `metadata` are kept as each entry's structured metadata, not stream labels
    (as Loki keeps the OTLP resource attributes it does not index): stream selectors do not see
    them, label filters and results do. Entries that differ only in them are stored apart here,
    which a query cannot tell from one stream with per-entry metadata.
    """

    def __init__(self, metadata: Iterable[str] = ()) -> None:
        self.metadata = frozenset(metadata)
        self.lock = threading.Lock()
        self.streams: dict[tuple[tuple[str, str], ...], Stream] = {}
        self._ordered: list[Stream] | None = None
        # Selections by their matchers, for the entries as they are: any add forgets them all.
        self._selections: dict[tuple[tuple[str, str, str], ...], Selection] = {}

    def add(self, lines: Iterable[SandboxLogLine]) -> int:
        n = 0
        last_labels: object = None
        stream: Stream | None = None
        with self.lock:
            self._selections.clear()
            for entry in lines:
                if entry.labels is not last_labels:
                    key = tuple(sorted(entry.labels.items()))
                    stream = self.streams.get(key)
                    if stream is None:
                        stream = self.streams[key] = Stream(dict(key), key, self.metadata)
                        self._ordered = None
                    last_labels = entry.labels
                assert stream is not None
                stream.add(int(entry.ts_ns), entry.line)
                n += 1
        return n

    def ordered(self) -> list[Stream]:
        with self.lock:
            return self._sorted()

    def _sorted(self) -> list[Stream]:
        """Every stream in key order (under `lock`)."""
        if self._ordered is None:
            self._ordered = sorted(self.streams.values(), key=lambda s: s.key)
        return self._ordered

    def matching(self, query: LogQuery) -> Selection:
        """The streams `query`'s selector chooses, their entries sorted by time; chosen once
        for each selector until entries are added."""
        key = tuple((m.name, m.op, m.value) for m in query.matchers)
        # Under the store's lock: a request beside this one waits for its choice, and no add
        # can come between the choice and its keeping.
        with self.lock:
            known = self._selections.get(key)
            if known is None:
                chosen = [s for s in self._sorted() if query.selects(s.index_labels)]
                for s in chosen:
                    s.settle()
                known = self._selections[key] = Selection(chosen)
            return known


def select(
    streams: list[Stream], query: LogQuery, start: int, end: int, limit: int, *, forward: bool
) -> tuple[list[dict[str, Any]], int, int, int]:
    """The first `limit` entries of `streams` in [start, end) that pass `query`'s filters, in
    direction order, grouped by stream: (result, returned, scanned, bytes)."""
    iters = []
    scanned = 0
    for idx, s in enumerate(streams):
        lo, hi = s.span(start, end)
        if lo >= hi:
            continue
        scanned += hi - lo
        # Positions, not islice: islice steps over the `lo` entries before the range one by
        # one, and a 24 h shard's range starts deep in a month-long stream.
        at: Sequence[int] = range(lo, hi)
        if query.filters:
            # The first filter runs at C speed over the span (a slice), and a stream none of
            # whose entries pass it (most, for a scan's filtered queries) goes no further.
            at = list(compress(at, query.filters[0].selectors(iter(s.lines[lo:hi]))))
            if not at:
                continue
        order = at if forward else at[::-1]
        items: Iterator[tuple[int, int, str]] = zip(
            map(s.ts.__getitem__, order), repeat(idx), map(s.lines.__getitem__, order), strict=False
        )
        for f in query.filters[1:]:
            items = filter(lambda it, f=f: f.keep(it[2]), items)
        iters.append(items)
    # (ts, stream index) orders entries, like Loki's merge across streams: limit applies to
    # the first `limit` entries in direction order over all streams.
    chosen = list(islice(heapq.merge(*iters, reverse=not forward), limit))
    grouped: dict[int, list[list[str]]] = {}
    nbytes = 0
    for ts, idx, line in chosen:
        grouped.setdefault(idx, []).append([str(ts), line])
        nbytes += len(line)
    result = [{"stream": dict(streams[i].labels), "values": grouped[i]} for i in sorted(grouped)]
    return result, len(chosen), scanned, nbytes


def stats(returned: int, scanned: int, nbytes: int, elapsed: float) -> dict[str, Any]:
    return {
        "summary": {
            "bytesProcessedPerSecond": int(nbytes / elapsed),
            "linesProcessedPerSecond": int(scanned / elapsed),
            "totalBytesProcessed": nbytes,
            "totalLinesProcessed": scanned,
            "execTime": elapsed,
            "queueTime": 0,
            "subqueries": 0,
            "totalEntriesReturned": returned,
            "splits": 0,
            "shards": 0,
            "totalPostFilterLines": returned,
            "totalStructuredMetadataBytesProcessed": 0,
        },
        "querier": {"store": {"totalChunksRef": 0, "totalChunksDownloaded": 0}},
        "ingester": {"totalReached": 1, "totalChunksMatched": 0, "totalBatches": 0},
        "cache": {},
    }


# pkg/validation/limits.go DiscoverServiceName, in order.
DISCOVER_SERVICE_NAME = (
    "service",
    "app",
    "application",
    "app_name",
    "name",
    "app_kubernetes_io_name",
    "container",
    "container_name",
    "k8s_container_name",
    "component",
    "workload",
    "job",
    "k8s_job_name",
)
_LEVELS = (("error", "error"), ("warn", "warn"), ("info", "info"), ("debug", "debug"))


def discovered(entry: SandboxLogLine) -> SandboxLogLine:
    """`entry` with the labels Loki's distributor adds: service_name and detected_level."""
    labels = dict(entry.labels)
    if "service_name" not in labels:
        found = next((labels[n] for n in DISCOVER_SERVICE_NAME if labels.get(n)), None)
        labels["service_name"] = found or "unknown_service"
    low = entry.line.lower()
    level = next((lv for word, lv in _LEVELS if word in low), "unknown")
    labels["detected_level"] = level
    return SandboxLogLine(entry.ts_ns, labels, entry.line)


def ibytes(n: int) -> str:
    """go-humanize IBytes: `512 B`, `2.0 MiB`, `13 MiB`."""
    if n < 1024:
        return f"{n} B"
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    e = min(int(math.log(n, 1024)), len(units))
    val = math.floor(n / 1024**e * 10 + 0.5) / 10
    return f"{val:.1f} {units[e - 1]}" if val < 10 else f"{val:.0f} {units[e - 1]}"
