"""What a test injects into the sandbox Loki (latency and failing answers) and what it reads
back: every request as the server saw and answered it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from forensics.model import Window, to_ns
from forensics.sandbox.loki_errors import ERR_DEADLINE

FAULT_BODIES = {
    429: "too many outstanding requests",
    500: "rpc error: code = Internal desc = injected fault",
    502: "502 Bad Gateway",
    503: "503 Service Unavailable",
    504: ERR_DEADLINE,
}
FAULT_KINDS = frozenset([*FAULT_BODIES, "truncated", "nonjson", "reset", "timeout"])


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
