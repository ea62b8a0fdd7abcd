"""Benchmark: the CPU one client call costs the scan's own interpreter, per source.

Run: `.venv/bin/python tests/bench/bench_calls.py [--executions 2000] [--workers 8]`

The scale benchmark (`bench_scan.py`) is CPU-bound on a small machine; this one says where the
CLI's share goes. The sandbox Admin and S3 servers run in a child process with no injected
latency, so the CPU measured here (`time.process_time` of this process) is the clients' alone:

  outputs.pb   `ObjectStore.outputs_check` (boto3 HeadObject) on every attempt's output dir
  walk         the same checks answered by walking the bucket's listing (`callplan.walk`, boto3
               ListObjectsV2 pages; the scan's way where the bucket's keys are dense)
  attempts     `AdminClient.list_attempts` (ListNodeExecutions + ListTaskExecutions, the
               scan's client; GetTask once per task, warmed up first) on every execution

each from one thread and from `--workers` threads. A scan spends about one Admin call
(ListTaskExecutions, where the closure names an all-elastic workflow's nodes) and one walked
outputs.pb check per candidate attempt (docs/performance.md), so those two "per call" figures
are the client's floor per candidate.

  round trips  the same Admin listing with `--workers` calls in flight against servers that add
               `--latency-ms` to every call (as `bench_scan.py` does): the calls a second this
               machine reaches with nothing else in the client, against the `workers / latency`
               the scan benchmark's bound assumes. Servers: the sandbox Admin (a thread per
               call), and a servicer that only waits and replays one prepared answer ("canned"),
               threaded and on grpc.aio. Clients: the scan's `AdminClient` (flytekit's channel,
               its reads on the plain channel beneath flytekit's layers),
               flyteidl's bare stub on a plain channel (no flytekit interceptors), the same
               stub on flytekit's composed channel (its default-metadata and OAuth2 layers:
               what they cost a call, which the scan's reads no longer pay), and grpc.aio's
               stub (coroutines on one event loop, no thread per call). And a control with no
               gRPC in it ("socket"): the same requests and answers, parsed and serialized by
               protobuf at both ends, sent length-prefixed over one TCP connection per client
               thread to a thread per connection that sleeps the same latency. What the control
               reaches and the gRPC rows do not is what gRPC's work per call costs at two ends
               that each run one interpreter at a time (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
from flyteidl.admin import node_execution_pb2, task_execution_pb2
from flyteidl.service import admin_pb2_grpc
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
from forensics.sources.admin_channel import AdminChannel
from forensics.sources.storage import ObjectStore

# Run as a script (`python tests/bench/...`): tests/ on sys.path for the test-only `support`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.synthetic import synthetic_month


def _serve(executions: int, latency: float, workers: int, conn: Connection) -> None:
    """Child process: Admin and S3 seeded with a synthetic month, and a second Admin that adds
    `latency` seconds to every call, until told to stop (the threaded servers with a thread for
    each of the client's `workers` calls in flight)."""
    month = synthetic_month(
        attempts=executions,
        signalled=executions // 10,
        affected=executions * 3 // 200,
        noise_lines=0,
    )
    sc = month.scenario
    admin, s3 = AdminServer(sc, workers=workers), S3Server(sc)
    slow = AdminServer(sc, AdminFaults(latency=latency), workers=workers)
    refs = [(ex.project, ex.domain, ex.name) for ex in sc.executions]
    dirs = [
        sc.output_dir(ex, node, a.attempt)
        for ex in sc.executions
        for node in ex.nodes
        for a in node.attempts
    ]
    address = admin.start()
    canned = _Canned(address, refs[0], latency)
    threaded = grpc.server(ThreadPoolExecutor(max_workers=workers))
    admin_pb2_grpc.add_AdminServiceServicer_to_server(canned, threaded)
    threaded_port = threaded.add_insecure_port("127.0.0.1:0")
    threaded.start()
    aio_server, aio_port = _start_aio(asyncio.new_event_loop(), _CannedAio(canned))
    sockets = _SocketServer(canned)
    threading.Thread(target=sockets.serve_forever, daemon=True).start()
    conn.send(
        (
            address,
            s3.start(),
            {
                "sandbox (threads)": slow.start(),
                "canned (threads)": f"127.0.0.1:{threaded_port}",
                "canned (asyncio)": f"127.0.0.1:{aio_port}",
            },
            refs,
            dirs,
            f"127.0.0.1:{sockets.server_address[1]}",
        )
    )
    conn.recv()
    sockets.shutdown()
    admin.stop()
    slow.stop()
    s3.stop()
    threaded.stop(None)
    del aio_server  # held until here: a collected grpc.aio server stops


class _Canned(admin_pb2_grpc.AdminServiceServicer):
    """Answers every ListNodeExecutions and ListTaskExecutions with the sandbox Admin's answer
    for one execution, after `latency`: a servicer whose own work per call is next to nothing.
    GetTask (once per task: the client caches it) is passed on to the sandbox."""

    def __init__(self, address: str, execution: tuple[str, str, str], latency: float) -> None:
        self.latency = latency
        self.real = admin_pb2_grpc.AdminServiceStub(grpc.insecure_channel(address))
        self.nodes = self.real.ListNodeExecutions(_node_request(ExecutionRef(*execution)))
        self.tasks = self.real.ListTaskExecutions(_task_requests(self.nodes)[0])

    def ListNodeExecutions(self, request: object, context: object) -> object:
        time.sleep(self.latency)
        return self.nodes

    def ListTaskExecutions(self, request: object, context: object) -> object:
        time.sleep(self.latency)
        return self.tasks

    def GetTask(self, request: object, context: object) -> object:
        return self.real.GetTask(request)


class _CannedAio(admin_pb2_grpc.AdminServiceServicer):
    """`_Canned` on grpc.aio: no thread per call in flight, the latency an `asyncio.sleep`."""

    def __init__(self, canned: _Canned) -> None:
        self.canned = canned

    async def ListNodeExecutions(self, request: object, context: object) -> object:
        await asyncio.sleep(self.canned.latency)
        return self.canned.nodes

    async def ListTaskExecutions(self, request: object, context: object) -> object:
        await asyncio.sleep(self.canned.latency)
        return self.canned.tasks

    async def GetTask(self, request: object, context: object) -> object:
        return self.canned.real.GetTask(request)


def _start_aio(
    loop: asyncio.AbstractEventLoop, servicer: _CannedAio
) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server for `servicer` on `loop`, run by a daemon thread, and its port (the
    caller keeps the server: one that is collected stops)."""

    async def serve() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        admin_pb2_grpc.add_AdminServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    threading.Thread(target=loop.run_forever, daemon=True).start()
    return asyncio.run_coroutine_threadsafe(serve(), loop).result()


_FRAME = struct.Struct("!BI")  # a request's kind (0 nodes, 1 tasks) and length; an answer's length


def _read(rfile: Any, n: int) -> bytes:
    """`n` bytes from a buffered socket file; ConnectionError when it closes first."""
    data = rfile.read(n)
    if len(data) < n:
        raise ConnectionError("closed")
    return data


class _SocketServer(socketserver.ThreadingTCPServer):
    """The control: `_Canned`'s answers with no gRPC, a thread per connection (one per client
    thread) that parses each request, sleeps the latency and sends the serialized answer."""

    daemon_threads = True

    def __init__(self, canned: _Canned) -> None:
        self.canned = canned
        super().__init__(("127.0.0.1", 0), _SocketHandler)


class _SocketHandler(socketserver.StreamRequestHandler):
    disable_nagle_algorithm = True

    def handle(self) -> None:
        canned = self.server.canned  # type: ignore[attr-defined]
        kinds = (
            (node_execution_pb2.NodeExecutionListRequest, canned.nodes),
            (task_execution_pb2.TaskExecutionListRequest, canned.tasks),
        )
        while True:
            try:
                kind, n = _FRAME.unpack(_read(self.rfile, _FRAME.size))
                request_type, answer = kinds[kind]
                request_type.FromString(_read(self.rfile, n))
            except ConnectionError:
                return
            time.sleep(canned.latency)
            body = answer.SerializeToString()
            self.wfile.write(_FRAME.pack(kind, len(body)) + body)


class _SocketStub:
    """The two listing calls of flyteidl's stub over `_SocketServer`: a connection per thread,
    the same protobuf work, no gRPC."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self._address = (host, int(port))
        self._local = threading.local()

    def _call(self, kind: int, request: Any, answer_type: Any) -> Any:
        if not hasattr(self._local, "sock"):
            sock = socket.create_connection(self._address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.sock, self._local.rfile = sock, sock.makefile("rb")
        body = request.SerializeToString()
        self._local.sock.sendall(_FRAME.pack(kind, len(body)) + body)
        _, n = _FRAME.unpack(_read(self._local.rfile, _FRAME.size))
        return answer_type.FromString(_read(self._local.rfile, n))

    def ListNodeExecutions(self, request: Any, timeout: float) -> Any:
        return self._call(0, request, node_execution_pb2.NodeExecutionList)

    def ListTaskExecutions(self, request: Any, timeout: float) -> Any:
        return self._call(1, request, task_execution_pb2.TaskExecutionList)


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


Lister = Callable[[str, Sequence[ExecutionRef], int], tuple[float, float, int]]


def _flytekit(
    address: str, executions: Sequence[ExecutionRef], workers: int
) -> tuple[float, float, int]:
    """`AdminClient.list_attempts` on every execution (the scan's client, flytekit's channel)."""
    with AdminClient(PlatformConfig(endpoint=address, insecure=True)) as admin:
        for ref in executions[:50]:
            admin.list_attempts(ref)
        return _cpu_per_call(
            admin.list_attempts, executions, workers, lambda: sum(admin.calls.values())
        )


def _node_request(ref: ExecutionRef) -> node_execution_pb2.NodeExecutionListRequest:
    return node_execution_pb2.NodeExecutionListRequest(
        workflow_execution_id=ref.as_dict(), limit=100
    )


def _task_requests(
    nodes: node_execution_pb2.NodeExecutionList,
) -> list[task_execution_pb2.TaskExecutionListRequest]:
    """One ListTaskExecutions per task node, as `list_attempts` makes them."""
    return [
        task_execution_pb2.TaskExecutionListRequest(node_execution_id=n.id, limit=100)
        for n in nodes.node_executions
        if n.id.node_id not in ("start-node", "end-node")
    ]


def _bare_stub(
    address: str, executions: Sequence[ExecutionRef], workers: int
) -> tuple[float, float, int]:
    """The same calls through flyteidl's generated stub on a plain channel: no flytekit
    interceptors, no conversion, no retry policy — what Python gRPC's blocking client reaches."""
    return _stub_calls(
        admin_pb2_grpc.AdminServiceStub(grpc.insecure_channel(address)), executions, workers
    )


def _layered_stub(
    address: str, executions: Sequence[ExecutionRef], workers: int
) -> tuple[float, float, int]:
    """The bare stub's calls on flytekit's composed channel (`AdminChannel.composed`: its
    default-metadata and OAuth2 layers), where the scan's reads went before they went plain:
    against the bare stub's row, what those two layers cost a call."""
    channel = AdminChannel(PlatformConfig(endpoint=address, insecure=True))
    try:
        return _stub_calls(admin_pb2_grpc.AdminServiceStub(channel.composed), executions, workers)
    finally:
        channel.close()


def _socket_client(
    address: str, executions: Sequence[ExecutionRef], workers: int
) -> tuple[float, float, int]:
    """The bare stub's calls over `_SocketServer`: the control with no gRPC."""
    return _stub_calls(_SocketStub(address), executions, workers)


def _stub_calls(
    stub: Any, executions: Sequence[ExecutionRef], workers: int
) -> tuple[float, float, int]:
    """ListNodeExecutions, then ListTaskExecutions per task node, through `stub` on every
    execution from `workers` threads (after 50 to warm up)."""
    calls = [0]
    lock = threading.Lock()

    def both(ref: ExecutionRef) -> None:
        tasks = _task_requests(stub.ListNodeExecutions(_node_request(ref), timeout=30))
        for req in tasks:
            stub.ListTaskExecutions(req, timeout=30)
        with lock:
            calls[0] += 1 + len(tasks)

    for ref in executions[:50]:
        both(ref)
    return _cpu_per_call(both, executions, workers, lambda: calls[0])


def _aio_stub(
    address: str, executions: Sequence[ExecutionRef], workers: int
) -> tuple[float, float, int]:
    """The same calls through grpc.aio: `workers` coroutines on one event loop, no thread per
    call in flight."""

    async def run() -> tuple[float, float, int]:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = admin_pb2_grpc.AdminServiceStub(channel)
            calls = 0

            async def both(ref: ExecutionRef) -> None:
                nonlocal calls
                tasks = _task_requests(
                    await stub.ListNodeExecutions(_node_request(ref), timeout=30)
                )
                for req in tasks:
                    await stub.ListTaskExecutions(req, timeout=30)
                calls += 1 + len(tasks)

            async def worker(todo: list[ExecutionRef]) -> None:
                while todo:
                    await both(todo.pop())

            await worker(list(executions[:50]))
            todo = list(reversed(executions))
            before, cpu0, wall0 = calls, time.process_time(), time.perf_counter()
            await asyncio.gather(*(worker(todo) for _ in range(workers)))
            cpu, wall, n = time.process_time() - cpu0, time.perf_counter() - wall0, calls - before
            return cpu / max(n, 1) * 1000, wall, n

    return asyncio.run(run())


def _round_trips(
    servers: dict[str, str],
    control: str,
    executions: Sequence[ExecutionRef],
    workers: int,
    latency: float,
) -> Table:
    """Admin calls a second from `workers` threads against servers adding `latency` a call."""
    table = Table(title=f"Admin round trips, {latency * 1000:g} ms latency a call")
    for col in ("server, client", "in flight", "calls", "wall s", "calls / s", "workers / latency"):
        table.add_column(col, justify="left" if col == "server, client" else "right")
    for col in ("ms a call", "client CPU ms / call"):
        table.add_column(col, justify="right")
    rows: list[tuple[str, str, Lister]] = [
        (f"{name}, the scan's AdminClient", address, _flytekit) for name, address in servers.items()
    ]
    rows.append(("canned (threads), bare stub", servers["canned (threads)"], _bare_stub))
    rows.append(
        ("canned (threads), stub on flytekit's layers", servers["canned (threads)"], _layered_stub)
    )
    rows.append(("canned (asyncio), grpc.aio stub", servers["canned (asyncio)"], _aio_stub))
    rows.append(("canned (threads), socket: no gRPC", control, _socket_client))
    for name, address, client in rows:
        ms, wall, n = client(address, executions, workers)
        table.add_row(
            name,
            str(workers),
            f"{n:,}",
            f"{wall:.1f}",
            f"{n / wall:,.0f}",
            f"{workers / latency:,.0f}",
            f"{workers * wall / n * 1000:.2f}",
            f"{ms:.2f}",
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
    child = ctx.Process(
        target=_serve, args=(args.executions, latency, args.workers, there), daemon=True
    )
    child.start()
    address, s3_url, slow, refs, dirs, control = here.recv()
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
                    store.outputs_check, dirs, threads, lambda: sum(store.calls.values())
                )
                table.add_row(
                    "outputs.pb HEAD (boto3)", str(threads), f"{n:,}", f"{ms:.2f}", f"{wall:.1f}"
                )
                ms, wall, n = _cpu_per_call(
                    admin.list_attempts, executions, threads, lambda: sum(admin.calls.values())
                )
                table.add_row(
                    "Admin list calls (AdminClient)",
                    str(threads),
                    f"{n:,}",
                    f"{ms:.2f}",
                    f"{wall:.1f}",
                )
            before, cpu0, wall0 = (
                sum(store.calls.values()),
                time.process_time(),
                time.perf_counter(),
            )
            _, runs = callplan.plan(dirs, str, lambda d: None, 1)
            answered = sum(1 for run in runs for _ in callplan.walk(run, store.list_from))
            ms = (time.process_time() - cpu0) / max(answered, 1) * 1000
            table.add_row(
                f"outputs.pb by listing walk ({sum(store.calls.values()) - before} pages)",
                "1",
                f"{answered:,}",
                f"{ms:.2f}",
                f"{time.perf_counter() - wall0:.1f}",
            )
        Console().print(table)
        Console(width=150).print(_round_trips(slow, control, executions, args.workers, latency))
    finally:
        here.send("stop")
        child.join(30)


if __name__ == "__main__":
    main()
