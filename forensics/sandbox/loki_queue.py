"""The sandbox Loki's per-tenant query queue: Loki's query frontend, scheduler and queriers.

A query's sub-queries (one per `split_queries_by_interval`) are admitted all or none: over
`max_outstanding_requests_per_tenant` waiting, the query is refused (`QueueFull`, Loki's 429).
Admitted, they wait until one of `queriers` workers takes them (each takes `subquery_seconds`),
and the query answers when all of them have run. Only what waits counts, not what runs.
Upstream: docs/upstream.md, "The sandbox servers".
"""

from __future__ import annotations

import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import timedelta


class QueueFull(Exception):
    """The tenant's queue cannot take a query's sub-queries: Loki's 429."""


class TenantQueue:
    """Per-tenant queues drained by a shared pool of queriers."""

    def __init__(
        self,
        max_outstanding: int,
        split: timedelta | None,
        *,
        queriers: int = 4,
        subquery_seconds: float = 0.01,
        stopping: threading.Event | None = None,
    ) -> None:
        if max_outstanding < 1 or queriers < 1:
            raise ValueError("max_outstanding and queriers must be at least 1")
        self.max_outstanding = max_outstanding
        self.split_ns = split // timedelta(microseconds=1) * 1000 if split else None
        self.subquery_seconds = subquery_seconds
        self.refused = 0
        self.admitted = 0
        self.peak = 0  # the most sub-queries any tenant had waiting at once
        self._stopping = stopping or threading.Event()
        self._lock = threading.Lock()
        self._queued: dict[str, int] = defaultdict(int)
        self._pool = ThreadPoolExecutor(queriers, thread_name_prefix="sandbox-querier")

    def subqueries(self, length_ns: int) -> int:
        """How many sub-queries the frontend splits a range of `length_ns` into."""
        if not self.split_ns:
            return 1
        return max(1, -(-length_ns // self.split_ns))

    def serve(self, tenant: str | None, length_ns: int) -> None:
        """Enqueue a query's sub-queries and wait until the queriers have run them all;
        `QueueFull` when the tenant's queue cannot hold them (nothing is enqueued then)."""
        n = self.subqueries(length_ns)
        key = tenant or ""
        with self._lock:
            if self._queued[key] + n > self.max_outstanding:
                self.refused += 1
                raise QueueFull()
            self._queued[key] += n
            self.admitted += 1
            self.peak = max(self.peak, self._queued[key])
        wait([self._pool.submit(self._run, key) for _ in range(n)])

    def _run(self, key: str) -> None:
        with self._lock:
            self._queued[key] -= 1  # taken off the queue by a querier
        self._stopping.wait(self.subquery_seconds)
