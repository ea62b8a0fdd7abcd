"""The one reader of death-signal lines from Loki, shared by the scan and by `examine`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta

from forensics.concurrency import Stopped
from forensics.config import LokiSettings
from forensics.evidence.logs import parse_signal
from forensics.model import Gap, LogEntry, ShardRead, SignalHit, UnparsedLine, Window, rfc3339
from forensics.scan.source_gaps import label_gaps
from forensics.sources.interfaces import LokiReader
from forensics.sources.loki import SOURCE
from forensics.sources.loki_labels import LOKI_ADDED_LABELS, LabelCensus
from forensics.sources.loki_limits import reading_length

log = logging.getLogger("elastic-audit")


class SignalLines:
    """Reads a death-signal query over a window: parsed hits are yielded, shard outcomes handed
    to `on_shard`, and lines the filter matched that the parser cannot read are counted (the
    earliest kept as an example): shown, never dropped silently (docs/report.md `summary`).
    Every matched line's labels go to a census of the configured label names: a name the
    matched streams lack is a gap (`label_gaps`), never a quiet drop to `suspected`."""

    def __init__(self, loki: LokiReader, labels: LokiSettings) -> None:
        self._loki = loki
        self._labels = labels
        self.unparsed = 0
        self._first_unparsed: LogEntry | None = None
        self.census = LabelCensus(
            {
                "namespace_label": labels.namespace_label,
                "pod_label": labels.pod_label,
                "container_label": labels.container_label,
            }
        )

    def read(
        self,
        query: str,
        window: Window,
        on_shard: Callable[[ShardRead], None],
        *,
        stop: threading.Event | None = None,
    ) -> Iterator[SignalHit]:
        """The parsed death-signal hits of `query` in `window` (`Stopped` once `stop` is set)."""
        labels = self._labels
        items = self._loki.read_shards(
            query, window, shard=labels.shard, max_query_length=labels.max_query_length
        )
        try:
            for item in items:
                if stop is not None and stop.is_set():
                    raise Stopped()
                if isinstance(item, ShardRead):
                    on_shard(item)
                    continue
                self.census.saw(item.labels)
                hit = parse_signal(
                    item,
                    namespace_label=labels.namespace_label,
                    pod_label=labels.pod_label,
                    container_label=labels.container_label,
                )
                if hit is None:
                    # Loki matched it as a death signal: an unreadable one is counted and shown.
                    self.unparsed += 1
                    first = self._first_unparsed
                    if first is None or item.ts_ns < first.ts_ns:
                        self._first_unparsed = item
                    continue
                yield hit
        finally:
            items.close()  # stops the shard workers when the reader stops early

    def label_gaps(self, window: Window) -> list[Gap]:
        """A gap over `window` per configured label name some matched streams lack (warned)."""
        return label_gaps(SOURCE, window, self.census.missing_texts())

    @property
    def unparsed_example(self) -> UnparsedLine | None:
        """The earliest unreadable line, cut to `UnparsedLine.MAX_CHARS`."""
        entry = self._first_unparsed
        if entry is None:
            return None
        line = entry.line
        if len(line) > UnparsedLine.MAX_CHARS:
            line = line[: UnparsedLine.MAX_CHARS] + "…"
        labels = tuple((k, v) for k, v in entry.labels if k not in LOKI_ADDED_LABELS)
        return UnparsedLine(entry.at, labels, line)


def earliest_per_pod(hits: Iterable[SignalHit], window: Window) -> dict[tuple[str, str], SignalHit]:
    """The earliest hit in `window` per (namespace, pod): only the earliest line of a pod counts
    (docs/verdicts.md); ties keep the first read."""
    out: dict[tuple[str, str], SignalHit] = {}
    for hit in hits:
        if (hit.loki_at or hit.at) in window:  # the window whose query read the line
            key = (hit.namespace, hit.pod)
            first = out.get(key)
            if first is None or hit.at < first.at:
                out[key] = hit
    return out


def log_window(window: Window, labels: LokiSettings, query: str) -> int:
    """Say (-v) how the window is read; the number of Loki shards."""
    shards = len(window.split(reading_length(labels.shard, labels.max_query_length)))
    log.info(
        "window %s → %s (end exclusive): %d Loki shard(s) of at most %s at %s; query %s",
        rfc3339(window.start),
        rfc3339(window.end),
        shards,
        _hours(labels.shard),
        labels.url,
        query,
    )
    return shards


def log_shard(item: ShardRead) -> None:
    """Say (-v) how one shard was read."""
    log.info(
        "Loki shard %s → %s: %s, %d line(s) in %d request(s)",
        rfc3339(item.window.start),
        rfc3339(item.window.end),
        "read" if not item.failed else f"FAILED ({item.error or 'in part'})",
        item.entries,
        item.requests,
    )


def log_unparsed(lines: SignalLines) -> None:
    """Warn about matched death-signal lines that could not be read, with the earliest."""
    example = lines.unparsed_example
    if example is not None:
        log.warning(
            "Loki matched %d death-signal line(s) that could not be read "
            "(summary.unparsed_lines); the earliest, %s %s: %s",
            lines.unparsed,
            rfc3339(example.at),
            ", ".join(f"{k}={v}" for k, v in example.labels) or "(no labels)",
            example.line,
        )


def _hours(d: timedelta) -> str:
    """A shard length as the config writes it: `24h`, `90m`."""
    seconds = int(d.total_seconds())
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{seconds // 60}m"
