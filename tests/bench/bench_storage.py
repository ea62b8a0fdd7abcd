"""Benchmark: S3 prefix listing and concurrent outputs.pb checks against the sandbox S3.

Run: `.venv/bin/python tests/bench/bench_storage.py [--objects 20000] [--checks 400]`.
The sandbox S3 runs in a child process so the client's memory peak is the client's alone.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

from forensics.sandbox.s3_server import S3Faults, S3Server
from forensics.sandbox.scenario import SandboxObject, Scenario
from forensics.sources.storage import ObjectStore

BASE = datetime(2026, 9, 1, tzinfo=timezone.utc)


def _serve(objects: int, checks: int, latency: float, ready: mp.Queue, done: mp.Event) -> None:
    scenario = Scenario(
        objects=[
            SandboxObject("exa-models", f"ck/{run}/{i:07d}.pt", b"", BASE + timedelta(seconds=i))
            for run, n in (("run", objects), ("tenth", objects // 10))
            for i in range(n)
        ]
        + [SandboxObject("flyte-metadata", f"m/{i}/outputs.pb", b"") for i in range(0, checks, 2)]
    )
    started = time.perf_counter()
    server = S3Server(scenario, S3Faults(latency=latency))
    url = server.start()
    ready.put((url, time.perf_counter() - started))
    done.wait()
    server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--checks", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per S3 request")
    args = parser.parse_args()

    ready: mp.Queue = mp.Queue()
    done = mp.Event()
    child = mp.Process(target=_serve, args=(args.objects, args.checks, 0.0, ready, done))
    child.start()
    url, seeded = ready.get(timeout=300)
    os.environ.update(
        AWS_ENDPOINT_URL_S3=url,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
    )
    print(f"seed {args.objects} objects + start: {seeded:.2f}s")
    try:
        store = ObjectStore.default()
        started = time.perf_counter()
        listing = store.list_prefix("s3://exa-models/ck/run")
        took = time.perf_counter() - started
        assert listing.objects == args.objects, listing
        print(
            f"list {listing.objects} objects: {took:.2f}s, "
            f"{store.calls['ListObjectsV2']} ListObjectsV2 calls"
        )
        # Flat memory: the client's peak while listing N objects is about that for N/10.
        for run in ("tenth", "run"):
            tracemalloc.start()
            listing = store.list_prefix(f"s3://exa-models/ck/{run}")
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(f"client peak listing {listing.objects} objects: {peak / 2**20:.1f} MiB")
    finally:
        done.set()
        child.join()

    # Concurrent checks: the S3 round trip dominates, so workers should divide the time.
    child = mp.Process(target=_serve, args=(0, args.checks, args.latency, ready, done))
    done.clear()
    child.start()
    url, _ = ready.get(timeout=300)
    os.environ["AWS_ENDPOINT_URL_S3"] = url
    try:
        uris = [f"s3://flyte-metadata/m/{i}/outputs.pb" for i in range(args.checks)]
        for workers in (1, 8, 16):
            store = ObjectStore.default(workers=workers)
            started = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                states = [c.state for c in pool.map(store.check_object, uris)]
            took = time.perf_counter() - started
            assert states.count("present") == len(range(0, args.checks, 2)), states
            print(
                f"{args.checks} outputs.pb checks at {args.latency * 1000:.0f} ms/request, "
                f"{workers:2d} workers: {took:.2f}s ({sum(store.calls.values())} calls)"
            )
    finally:
        done.set()
        child.join()


if __name__ == "__main__":
    main()
