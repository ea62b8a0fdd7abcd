"""A synthetic month of a busy cluster for the scale benchmark: thousands of elastic attempts.

`synthetic_month(...)` builds, through `ScenarioBuilder`, a 30-day window of elastic task
attempts (single-node Elastic `python-task` v1 and multi-node `pytorch` PyTorchJobs) of which a
given number were signalled and a given number of those are `affected`; the rest of the
signalled ones end the other ways the reference scenario shows (outputs written after the signal,
failed and retried, failed for good), plus elastic successes without any log evidence
(`suspected`), signalled pods that are no Flyte task pods, and hashed pod names. Unrelated log
lines ("noise") come from `SyntheticMonth.noise()`, a generator: lines are fed to the sandbox Loki
with `LokiServer.add_lines` and never held in a list, and their texts are drawn from a small pool
of shared strings, so ten million lines cost the Loki store about 16 bytes each instead of a
Python object per line. Loki still evaluates its line filter on every one of them.

Everything is deterministic for a given `seed`; `expected` says what a correct scan concludes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from forensics.evidence.flyte_names import generated_name
from forensics.model import UTC, Window, to_ns
from forensics.sandbox.incident import GPU_NODE_4, GPU_NODE_8, ScenarioBuilder, flytekit_json
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLogLine,
    SandboxNode,
    SandboxTask,
    Scenario,
)

MONTH_START = datetime(2026, 8, 1, tzinfo=UTC)
MONTH_DAYS = 30
DOMAINS = ("production", "development")
NOISE_POOL = 4096  # distinct noise texts, shared by every noise line
# Flyte's raw output data (intra-task checkpoints) in a bucket of its own, as deployments
# usually have it; the metadata bucket holds outputs.pb.
RAW_BUCKET = "flyte-raw-data"

# Shares of the signalled attempts that are not affected (the rest of the signalled ones).
_OUTPUTS_WRITTEN, _RETRIED, _FAILED = 0.5, 0.3, 0.2


@dataclass
class SyntheticMonth:
    """A generated month: the scenario to seed, its window, and what a correct scan concludes."""

    scenario: Scenario
    window: Window
    attempts: int  # elastic task attempts seeded in Admin
    signalled: int  # of them, attempts whose pods logged a death signal in the window
    expected: dict[tuple[str, str, str, str, int], str]  # finding key -> verdict
    noise_lines: int
    pods: list[tuple[dict[str, str], int, int]] = field(default_factory=list, repr=False)
    # (stream labels, first ns, last ns) of every task pod: where the noise goes

    def noise(self) -> Iterator[SandboxLogLine]:
        """`noise_lines` unrelated lines, spread evenly over the task pods' lifetimes.

        Each pod's lines come out in time order (its stream stays sorted); texts are shared
        objects from a pool of NOISE_POOL strings, none of which a death-signal filter matches.
        """
        pool = noise_texts()
        pods = self.pods
        if not pods or self.noise_lines <= 0:
            return
        per_pod, extra = divmod(self.noise_lines, len(pods))
        k = 0
        for i, (labels, first, last) in enumerate(pods):
            n = per_pod + (1 if i < extra else 0)
            if n == 0:
                continue
            step = max(1, (last - first) // (n + 1))
            ts = first
            for _ in range(n):
                ts += step
                yield SandboxLogLine(ts, labels, pool[k % NOISE_POOL])
                k += 7919  # a prime: neighbouring lines differ


_NOISE_KINDS: tuple[Callable[[int, datetime, random.Random], str], ...] = (
    lambda i, at, r: (
        f"[rank{i % 8}]: step {i * 25} loss={r.uniform(0.5, 3.0):.4f} "
        f"lr={r.choice(['5e-5', '1e-4', '3e-4'])} tokens/s={r.randint(9000, 40000)}"
    ),
    lambda i, at, r: (
        f"I{at:%m%d} {at:%H:%M:%S.%f} 107 torch/distributed/elastic/agent/server/api.py:"
        f"{r.randint(600, 900)}] [default] worker group successfully finished. "
        "Waiting 300 seconds for other agents to finish."
    ),
    lambda i, at, r: flytekit_json(at, "INFO", f"Saving checkpoint step-{i * 1000:07d}"),
    lambda i, at, r: (
        f"{r.choice(['gpu-a100', 'gpu-h100'])}-{r.randint(0, 999):03d}:107:{200 + i % 50} "
        f"[{i % 8}] NCCL INFO Channel {i % 32:02d}/0 : {i % 8}[{i % 8}] -> "
        f"{(i + 1) % 8}[{(i + 1) % 8}] via P2P/IPC/read"
    ),
    lambda i, at, r: (
        f"{at:%Y-%m-%dT%H:%M:%S.%f}000Z stderr F WARNING: received signal handler "
        f"registration request {i}; nothing to do"
    ),
    lambda i, at, r: (
        f"dataloader worker {i % 16}: prefetched shard {r.randint(0, 99999):05d} "
        f"({r.randint(100, 999)} MiB) in {r.uniform(0.1, 9.9):.2f}s"
    ),
    lambda i, at, r: flytekit_json(
        at, "WARNING", f"Elastic agent heartbeat: {r.randint(1, 64)} workers healthy"
    ),
    lambda i, at, r: (
        f"eval/accuracy={r.uniform(0.1, 0.99):.4f} eval/ppl={r.uniform(3, 40):.3f} "
        f"epoch={i % 10} global_step={i * 400}"
    ),
)


def noise_texts() -> list[str]:
    """Lines a training pod and its sidecars print all day; none is a death-signal line."""
    rng = random.Random(1)
    kinds = _NOISE_KINDS
    return [
        kinds[i % len(kinds)](i, MONTH_START + timedelta(seconds=i * 37), rng)
        for i in range(NOISE_POOL)
    ]


def synthetic_month(
    *,
    attempts: int = 20_000,
    signalled: int = 2_000,
    affected: int = 300,
    noise_lines: int = 1_000_000,
    projects: int = 6,
    suspected: int | None = None,
    seed: int = 7,
    plain_nodes: int = 0,
) -> SyntheticMonth:
    """A 30-day month of `attempts` elastic attempts, `signalled` of them signalled.

    Each execution runs its elastic task in node `n0`; `plain_nodes` more nodes (`n1`, ...) run a
    plain task (task_type_version 0) that succeeds with its outputs.pb, before it.

    `affected` of the signalled attempts ended SUCCEEDED without outputs.pb; `suspected`
    (default 1/400 of the attempts) elastic successes without outputs.pb have no log lines.
    A third of the affected ones run as two-pod PyTorchJobs (both pods signalled, one finding),
    a few have hashed pod names. Signalled attempts that failed and were retried bring their
    successful retry, which counts among `attempts`.
    """
    if not 0 <= affected <= signalled <= attempts:
        raise ValueError("need 0 <= affected <= signalled <= attempts")
    suspected = attempts // 400 if suspected is None else suspected
    rest = signalled - affected
    n_written = int(rest * _OUTPUTS_WRITTEN)
    n_retried = int(rest * _RETRIED)
    n_failed = rest - n_written - n_retried
    n_healthy = attempts - signalled - n_retried - suspected
    if n_healthy < 0:
        raise ValueError("too many signalled and suspected attempts for that many attempts")

    month = _MonthBuilder(random.Random(seed), projects, plain_nodes)
    kinds = (
        ["affected"] * affected
        + ["written"] * n_written
        + ["retried"] * n_retried
        + ["failed"] * n_failed
        + ["suspected"] * suspected
        + ["healthy"] * n_healthy
    )
    order = list(range(len(kinds)))
    month.rng.shuffle(order)
    for i in order:
        month.execution(kinds[i], i)
    assert month.count == attempts, (month.count, attempts)
    month.notebooks(max(1, signalled // 100))
    return SyntheticMonth(
        scenario=month.b.build(),
        window=month.window,
        attempts=attempts,
        signalled=signalled,
        expected=month.expected,
        noise_lines=noise_lines,
        pods=month.pods,
    )


@dataclass
class _Placed:
    """Where and when one execution runs, and its attempt's pods."""

    project: str
    domain: str
    name: str
    multi: bool  # a two-pod PyTorchJob
    created: datetime
    started: datetime
    ended: datetime
    task: SandboxTask
    pods: list[str]

    @property
    def ns(self) -> str:
        return f"{self.project}-{self.domain}"


class _MonthBuilder:
    """The month while it is built: one random stream, so one seed gives one month."""

    def __init__(self, rng: random.Random, projects: int, plain_nodes: int = 0) -> None:
        self.rng = rng
        self.projects = projects
        self.plain_nodes = plain_nodes
        self.b = ScenarioBuilder()
        self.b.scenario.buckets.add(RAW_BUCKET)
        self.window = Window(MONTH_START, MONTH_START + timedelta(days=MONTH_DAYS))
        self.span = (self.window.end - self.window.start - timedelta(hours=12)).total_seconds()
        self.expected: dict[tuple[str, str, str, str, int], str] = {}
        self.pods: list[tuple[dict[str, str], int, int]] = []
        self.used: set[str] = set()
        self.count = 0  # attempts seeded

    def new_name(self, long: bool = False) -> str:
        while True:
            body = "".join(
                self.rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(19)
            )
            name = self.rng.choice("abcdefghijklmnopqrstuvwxyz") + body
            if long:
                name = f"nightly-{name}-retrain-from-latest-checkpoint-x"
            if name not in self.used:
                self.used.add(name)
                return name

    def pod_stream(
        self, ns: str, pod: str, container: str, first: datetime, last: datetime
    ) -> None:
        labels = {"namespace": ns, "pod": pod, "container": container}
        self.pods.append((labels, to_ns(first), to_ns(last)))

    def execution(self, kind: str, i: int) -> None:
        """Execution `i` of `kind`: its attempts in Admin, its pods' logs, its expected verdict."""
        at = self.place(kind, i)
        sig_at = at.ended - timedelta(seconds=7)
        if kind == "written":
            sig_at = at.ended - timedelta(seconds=2)
        elif kind == "retried":
            sig_at = at.started + (at.ended - at.started) / 2
        tries, checkpoint = self.attempts(kind, at, sig_at, i)
        phase = "FAILED" if kind == "failed" else "SUCCEEDED"
        ex = self.b.add(
            SandboxExecution(
                at.project,
                at.domain,
                at.name,
                phase,
                at.created,
                at.ended + timedelta(seconds=3),
                nodes=[
                    SandboxNode("n0", phase, tries, checkpoint_uri=checkpoint),
                    *self.plain(at),
                ],
            )
        )
        self.count += 1
        self.logs(kind, at, tries[0].ended_at or at.ended, sig_at, i)
        if phase == "SUCCEEDED":
            self.b.propeller(at.ended, ex, "n0", at.task.task_type)
        if kind in ("affected", "suspected"):
            self.expected[(at.project, at.domain, at.name, "n0", 0)] = kind

    def plain(self, at: _Placed) -> list[SandboxNode]:
        """The execution's plain nodes: each one attempt that succeeded and wrote outputs.pb."""
        task = self.b.task(at.project, at.domain, "prep.plain", version=0)
        step = (at.started - at.created) / (self.plain_nodes + 1)
        out = []
        for k in range(1, self.plain_nodes + 1):
            s, e = at.created + step * (k - 1), at.created + step * k
            attempt = SandboxAttempt(
                0, "SUCCEEDED", s, e, [f"{at.name}-n{k}-0"], task, write_outputs=True
            )
            out.append(SandboxNode(f"n{k}", "SUCCEEDED", [attempt]))
        return out

    def place(self, kind: str, i: int) -> _Placed:
        project = f"team{i % self.projects:02d}"
        domain = DOMAINS[(i // self.projects) % len(DOMAINS)]
        multi = kind == "affected" and i % 3 == 0
        hashed = kind == "affected" and not multi and i % 50 == 7
        name = self.new_name(long=hashed)
        created = self.window.start + timedelta(hours=1, seconds=self.rng.uniform(0, self.span))
        started = created + timedelta(seconds=30)
        ended = started + timedelta(seconds=self.rng.uniform(900, 6 * 3600))
        ended = min(ended, self.window.end - timedelta(minutes=5))
        if multi:
            task = self.b.task(project, domain, "train.multinode", task_type="pytorch",
                               requests=GPU_NODE_8, worker_replicas=2,
                               pod_template=True)  # fmt: skip
            pods = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
        else:
            task = self.b.task(project, domain, "train.elastic", requests=GPU_NODE_4)
            pods = [generated_name([name, "n0", 0])] if hashed else [f"{name}-n0-0"]
        return _Placed(project, domain, name, multi, created, started, ended, task, pods)

    def attempts(
        self, kind: str, at: _Placed, sig_at: datetime, i: int
    ) -> tuple[list[SandboxAttempt], str | None]:
        """The node's attempts and its checkpoint prefix (affected ones only)."""
        first = partial(SandboxAttempt, 0, started_at=at.started, pods=at.pods, task=at.task)
        if kind == "affected":
            checkpoint = f"s3://{RAW_BUCKET}/{at.name[:2]}/{at.name}-n0-0/_flytecheckpoints/"
            if i % 2:
                self.b.checkpoint_objects(checkpoint, [sig_at - timedelta(hours=1), sig_at])
            return [first(phase="SUCCEEDED", ended_at=at.ended)], checkpoint
        if kind == "retried":
            failed_at = sig_at + timedelta(seconds=30)
            retry_start = failed_at + timedelta(seconds=60)
            retry_pod = f"{at.name}-n0-1"
            self.pod_stream(at.ns, retry_pod, retry_pod, retry_start, at.ended)
            self.count += 1
            retry = SandboxAttempt(
                1, "SUCCEEDED", retry_start, at.ended, [retry_pod], at.task, write_outputs=True
            )
            return [
                first(phase="RETRYABLE_FAILED", ended_at=failed_at, write_error=True),
                retry,
            ], None
        if kind == "failed":
            failed = first(
                phase="FAILED",
                ended_at=sig_at + timedelta(seconds=20),
                write_error=True,
                reason="worker-0: CUDA error: an illegal memory access was encountered",
            )
            return [failed], None
        # written, healthy: outputs.pb; suspected: none, as affected
        outputs = kind != "suspected"
        return [first(phase="SUCCEEDED", ended_at=at.ended, write_outputs=outputs)], None

    def logs(self, kind: str, at: _Placed, first_end: datetime, sig_at: datetime, i: int) -> None:
        """The attempt's pod streams and death-signal lines (none for `suspected`: the logs
        expired or were never shipped)."""
        if kind == "suspected":
            return
        container = "pytorch" if at.multi else at.pods[0]
        for pod in at.pods:
            self.pod_stream(at.ns, pod, container, at.started, first_end)
        if kind == "healthy":
            return
        for j, pod in enumerate(at.pods if at.multi else at.pods[:1]):
            self.b.signal_pod(
                sig_at + timedelta(milliseconds=300 * j),
                at.ns,
                pod,
                container,
                wrap="cri" if at.multi else "raw",
                sig="Signals.SIGTERM" if i % 4 == 0 else "15",
                pid=100 + i % 900,
                plugin_lines=kind == "affected",
            )

    def notebooks(self, n: int) -> None:
        """Signalled pods that are no Flyte task pods (notebooks in a team namespace): cleared."""
        for i in range(n):
            at = self.window.start + timedelta(hours=2, seconds=self.rng.uniform(0, self.span))
            self.b.signal_pod(
                at, "research-notebooks", f"jupyter-user{i}-0", "notebook", plugin_lines=False
            )
