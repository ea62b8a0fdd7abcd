"""The one reader of death-signal lines from Loki, shared by the scan and by `examine`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from forensics.concurrency import Stopped
from forensics.config import LokiSettings
from forensics.evidence import parse_signal
from forensics.model import LogEntry, SignalHit, UnparsedLine, Window
from forensics.sources.loki import LokiClient, ShardOutcome


class SignalLines:
    """Reads a death-signal query over a window: parsed hits are yielded, shard outcomes handed
    to `on_shard`, and lines the filter matched that the parser cannot read are counted (the
    earliest kept as an example): shown, never dropped silently (docs/report.md `summary`)."""

    def __init__(self, loki: LokiClient, labels: LokiSettings) -> None:
        self._loki = loki
        self._labels = labels
        self.unparsed = 0
        self._first_unparsed: LogEntry | None = None

    def read(
        self,
        query: str,
        window: Window,
        on_shard: Callable[[ShardOutcome], None],
        *,
        stop: threading.Event | None = None,
    ) -> Iterator[SignalHit]:
        """The parsed death-signal hits of `query` in `window` (`Stopped` once `stop` is set)."""
        labels = self._labels
        items = self._loki.scan(
            query, window, shard=labels.shard, max_query_length=labels.max_query_length
        )
        try:
            for item in items:
                if stop is not None and stop.is_set():
                    raise Stopped()
                if isinstance(item, ShardOutcome):
                    on_shard(item)
                    continue
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

    @property
    def unparsed_example(self) -> UnparsedLine | None:
        """The earliest unreadable line, cut to `UnparsedLine.MAX_CHARS`."""
        entry = self._first_unparsed
        if entry is None:
            return None
        line = entry.line
        if len(line) > UnparsedLine.MAX_CHARS:
            line = line[: UnparsedLine.MAX_CHARS] + "…"
        return UnparsedLine(entry.at, entry.labels, line)
