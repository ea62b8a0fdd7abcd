"""Benchmark: a scan's Loki reads against a small per-tenant queue, and at Loki's default.

Run: `.venv/bin/python tests/bench/bench_loki_queue.py [--days 30] [--queue 32] [--workers 8]`

The sandbox Loki plays Loki's frontend, scheduler and queriers (`forensics/sandbox/loki_queue.py`,
grafana/loki `pkg/queue/queue.go`): each query_range is split into one sub-query per
`--split` hour(s), the sub-queries wait in the tenant's queue for `--queriers` queriers taking
`--subquery-ms` each, and a query whose sub-queries would overflow
`max_outstanding_requests_per_tenant` is answered 429 `too many outstanding requests`. The
client reads `--days` of death-signal lines in 24 h shards, `--workers` at a time, as a scan does
(`LokiClient.scan`, the default retry policy). Printed per queue size: wall time, query_range
requests sent, requests refused with 429, the lowest concurrency the client came down to, and
whether every line was read.

Loki's default queue (32000) is the baseline; issue 43 (item 12) measured 2.9 s there and 196 s
with 473 refused requests against a small queue, before the client adapted its concurrency.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

from forensics.config import LokiSettings
from forensics.model import ShardRead, Window, to_ns
from forensics.sandbox.loki_server import LokiServer
from forensics.sandbox.scenario import SandboxLogLine
from forensics.sources.loki import LokiClient

START = datetime(2026, 9, 1, tzinfo=UTC)
LOKI_DEFAULT_QUEUE = 32000  # pkg/scheduler/scheduler.go: max_outstanding_requests_per_tenant


def lines(days: int) -> list[SandboxLogLine]:
    """A death-signal line every hour of every day, in a few pods."""
    return [
        SandboxLogLine(
            to_ns(START + timedelta(hours=h)) + 7,
            {"namespace": "ml-production", "pod": f"p{h % 5}", "container": "c"},
            f"W0901 00:00:00.000000 7 api.py:753] Received 15 death signal, shutting down #{h}",
        )
        for h in range(24 * days)
    ]


def run(args: argparse.Namespace, queue: int) -> dict[str, object]:
    window = Window(START, START + timedelta(days=args.days))
    with LokiServer(
        lines(args.days),
        split_queries_by_interval=timedelta(hours=args.split),
        max_outstanding_requests_per_tenant=queue,
        queriers=args.queriers,
        subquery_seconds=args.subquery_ms / 1000,
    ) as server:
        settings = LokiSettings(url=server.url, timeout=60.0)
        with LokiClient(settings, workers=args.workers) as client:
            t0 = time.perf_counter()
            read = failed = 0
            for item in client.read_shards(
                '{namespace=~".+"} |= "death signal"',
                window,
                shard=timedelta(hours=24),
                max_query_length=timedelta(hours=721),
            ):
                if isinstance(item, ShardRead):
                    failed += not item.ok
                else:
                    read += 1
            took = time.perf_counter() - t0
        sent = [r for r in server.requests if r.path.endswith("/query_range")]
        gate = getattr(client, "gate", None)
        return {
            "queue": queue,
            "seconds": round(took, 2),
            "requests": len(sent),
            "refused": sum(r.status == 429 for r in sent),
            "lowest": int(gate.lowest) if gate is not None else "-",
            "complete": read == 24 * args.days and not failed,
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--queue", type=int, nargs="+", default=[32])
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--split", type=int, default=1, help="split_queries_by_interval, hours")
    p.add_argument("--queriers", type=int, default=4)
    p.add_argument("--subquery-ms", type=float, default=10.0)
    args = p.parse_args()
    print("queue    seconds  requests  refused  lowest concurrency  complete")
    for queue in (LOKI_DEFAULT_QUEUE, *args.queue):
        r = run(args, queue)
        print(
            f"{r['queue']:<8} {r['seconds']:>7} {r['requests']:>9} {r['refused']:>8} "
            f"{r['lowest']!s:>19}  {r['complete']}"
        )


if __name__ == "__main__":
    main()
