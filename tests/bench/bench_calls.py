"""Benchmark: the CPU one client call costs the scan's own interpreter, per source.

Run: `.venv/bin/python tests/bench/bench_calls.py [--executions 2000] [--workers 8]`

The scale benchmark (`bench_scan.py`) is CPU-bound on a small machine; this one says where the
CLI's share goes. The sandbox Admin and S3 servers run in a child process with no injected
latency, so the CPU measured here (`time.process_time` of this process) is the clients' alone:

  outputs.pb   `ObjectStore.outputs_check` (boto3 HeadObject) on every attempt's output dir
  walk         the same checks answered by walking the bucket's listing (`callplan.walk`, boto3
               ListObjectsV2 pages; the scan's way where the bucket's keys are dense)
  attempts     `AdminClient.list_attempts` (ListNodeExecutions + ListTaskExecutions, through
               flytekit's client; GetTask once per task, warmed up first) on every execution

each from one thread and from `--workers` threads. A scan spends one HEAD and two Admin calls per
candidate attempt, so "per call" times those three is the CLI's floor per candidate.

  round trips  the same Admin listing from `--workers` threads against a second sandbox Admin
               that adds `--latency-ms` to every call (as `bench_scan.py` does): the calls a
               second that `--workers` calls in flight reach on this machine with nothing else
               in the client, against the `workers / latency` the scan benchmark's bound
               assumes. Both ends are Python gRPC: what each call costs beyond its latency (the
               client's and the servicer's CPU, each interpreter's lock passed between threads)
               is the floor of any scan's Admin sweep here.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from flytekit.configuration import PlatformConfig
from rich.console import Console
from rich.table import Table

from forensics.config import FlyteSettings
from forensics.model import ExecutionRef
from forensics.sandbox.admin_server import AdminFaults, AdminServer
from forensics.sandbox.s3_server import S3Server
from forensics.sandbox.stack import sandbox_env
from forensics.scan import callplan
from forensics.sources.admin import AdminClient
from forensics.sources.storage import ObjectStore

# Run as a script (`python tests/bench/...`): tests/ on sys.path for the test-only `support`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.synthetic import synthetic_month


def _serve(executions: int, latency: float, conn: Connection) -> None:
    """Child process: Admin and S3 seeded with a synthetic month, and a second Admin that adds
    `latency` seconds to every call, until told to stop."""
    month = synthetic_month(
        attempts=executions,
        signalled=executions // 10,
        affected=executions * 3 // 200,
        noise_lines=0,
    )
    sc = month.scenario
    admin, s3 = AdminServer(sc), S3Server(sc)
    slow = AdminServer(sc, AdminFaults(latency=latency))
    refs = [(ex.project, ex.domain, ex.name) for ex in sc.executions]
    dirs = [
        sc.output_dir(ex, node, a.attempt)
        for ex in sc.executions
        for node in ex.nodes
        for a in node.attempts
    ]
    conn.send((admin.start(), s3.start(), slow.start(), refs, dirs))
    conn.recv()
    admin.stop()
    slow.stop()
    s3.stop()


def _cpu_per_call(
    fn: Callable[[object], object], items: Sequence[object], threads: int, calls: Callable[[], int]
) -> tuple[float, float, int]:
    """(CPU ms per call, wall s, calls) of running `fn` over `items` from `threads` threads."""
    before, cpu0, wall0 = calls(), time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass
    cpu, wall, n = time.process_time() - cpu0, time.perf_counter() - wall0, calls() - before
    return cpu / max(n, 1) * 1000, wall, n


def _round_trips(
    address: str, executions: Sequence[ExecutionRef], workers: int, latency: float
) -> Table:
    """Admin calls a second from `workers` threads against a server adding `latency` a call."""
    with AdminClient(PlatformConfig(endpoint=address, insecure=True)) as admin:
        for ref in executions[:50]:
            admin.list_attempts(ref)
        _, wall, n = _cpu_per_call(
            admin.list_attempts, executions, workers, lambda: admin.calls_total
        )
    table = Table(title=f"Admin round trips, {latency * 1000:g} ms latency a call")
    for col in ("threads", "calls", "wall s", "calls / s", "workers / latency", "ms a call"):
        table.add_column(col, justify="right")
    table.add_row(
        str(workers),
        f"{n:,}",
        f"{wall:.1f}",
        f"{n / wall:,.0f}",
        f"{workers / latency:,.0f}",
        f"{workers * wall / n * 1000:.2f}",
    )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=5.0, help="the round-trip row's")
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    latency = args.latency_ms / 1000
    child = ctx.Process(target=_serve, args=(args.executions, latency, there), daemon=True)
    child.start()
    address, s3_url, slow_address, refs, dirs = here.recv()
    try:
        home = Path(tempfile.mkdtemp(prefix="bench-calls-"))
        os.environ.update(sandbox_env("http://127.0.0.1:9", address, s3_url, home))
        store = ObjectStore.default(workers=args.workers)
        executions = [ExecutionRef(*r) for r in refs]
        table = Table(title="client CPU per call (sandbox in a child process, no latency)")
        for col in ("client", "threads", "calls", "CPU ms / call", "wall s"):
            table.add_column(col, justify="left" if col == "client" else "right")
        with AdminClient.from_settings(FlyteSettings()) as admin:
            for ref in executions[:50]:  # warm up: connections, and GetTask once per task
                admin.list_attempts(ref)
            store.outputs_check(dirs[0])
            for threads in (1, args.workers):
                ms, wall, n = _cpu_per_call(
                    store.outputs_check, dirs, threads, lambda: store.call_count
                )
                table.add_row(
                    "outputs.pb HEAD (boto3)", str(threads), f"{n:,}", f"{ms:.2f}", f"{wall:.1f}"
                )
                ms, wall, n = _cpu_per_call(
                    admin.list_attempts, executions, threads, lambda: admin.calls_total
                )
                table.add_row(
                    "Admin list calls (flytekit)",
                    str(threads),
                    f"{n:,}",
                    f"{ms:.2f}",
                    f"{wall:.1f}",
                )
            before, cpu0, wall0 = store.call_count, time.process_time(), time.perf_counter()
            _, runs = callplan.plan(dirs, str, lambda d: None, 1)
            answered = sum(1 for run in runs for _ in callplan.walk(run, store.list_from))
            ms = (time.process_time() - cpu0) / max(answered, 1) * 1000
            table.add_row(
                f"outputs.pb by listing walk ({store.call_count - before} pages)",
                "1",
                f"{answered:,}",
                f"{ms:.2f}",
                f"{time.perf_counter() - wall0:.1f}",
            )
        Console().print(table)
        Console().print(_round_trips(slow_address, executions, args.workers, latency))
    finally:
        here.send("stop")
        child.join(30)


if __name__ == "__main__":
    main()
