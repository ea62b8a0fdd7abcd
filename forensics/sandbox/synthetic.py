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

from forensics.evidence.flyte_names import generated_name
from forensics.model import UTC, Window, to_ns
from forensics.sandbox.incident import ScenarioBuilder, flytekit_json
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLogLine,
    SandboxNode,
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
) -> SyntheticMonth:
    """A 30-day month of `attempts` elastic attempts, `signalled` of them signalled.

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

    rng = random.Random(seed)
    b = ScenarioBuilder()
    b.scenario.buckets.add(RAW_BUCKET)
    window = Window(MONTH_START, MONTH_START + timedelta(days=MONTH_DAYS))
    span = (window.end - window.start - timedelta(hours=12)).total_seconds()
    expected: dict[tuple[str, str, str, str, int], str] = {}
    pods: list[tuple[dict[str, str], int, int]] = []
    used: set[str] = set()
    count = 0

    def new_name(long: bool = False) -> str:
        while True:
            body = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(19))
            name = rng.choice("abcdefghijklmnopqrstuvwxyz") + body
            if long:
                name = f"nightly-{name}-retrain-from-latest-checkpoint-x"
            if name not in used:
                used.add(name)
                return name

    def pod_stream(ns: str, pod: str, container: str, first: datetime, last: datetime) -> None:
        labels = {"namespace": ns, "pod": pod, "container": container}
        pods.append((labels, to_ns(first), to_ns(last)))

    def one(kind: str, i: int) -> None:
        nonlocal count
        project = f"team{i % projects:02d}"
        domain = DOMAINS[(i // projects) % len(DOMAINS)]
        ns = f"{project}-{domain}"
        multi = kind == "affected" and i % 3 == 0
        hashed = kind == "affected" and not multi and i % 50 == 7
        name = new_name(long=hashed)
        created = window.start + timedelta(hours=1, seconds=rng.uniform(0, span))
        started = created + timedelta(seconds=30)
        ended = started + timedelta(seconds=rng.uniform(900, 6 * 3600))
        ended = min(ended, window.end - timedelta(minutes=5))
        task = (
            b.task(project, domain, "train.multinode", task_type="pytorch")
            if multi
            else b.task(project, domain, "train.elastic")
        )
        if multi:
            attempt_pods = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
        elif hashed:
            attempt_pods = [generated_name([name, "n0", 0])]
        else:
            attempt_pods = [f"{name}-n0-0"]
        container = "pytorch" if multi else attempt_pods[0]
        sig_at = ended - timedelta(seconds=7)
        checkpoint = None
        ex_phase, node_phase = "SUCCEEDED", "SUCCEEDED"
        attempts_: list[SandboxAttempt] = []
        signalled_pods = attempt_pods if multi else attempt_pods[:1]
        if kind == "affected":
            checkpoint = f"s3://{RAW_BUCKET}/{name[:2]}/{name}-n0-0/_flytecheckpoints/"
            if i % 2:
                b.checkpoint_objects(checkpoint, [sig_at - timedelta(hours=1), sig_at])
            attempts_.append(SandboxAttempt(0, "SUCCEEDED", started, ended, attempt_pods, task))
        elif kind == "written":
            sig_at = ended - timedelta(seconds=2)
            attempts_.append(
                SandboxAttempt(
                    0, "SUCCEEDED", started, ended, attempt_pods, task, write_outputs=True
                )
            )
        elif kind == "retried":
            sig_at = started + (ended - started) / 2
            failed_at = sig_at + timedelta(seconds=30)
            retry_start = failed_at + timedelta(seconds=60)
            retry_pods = [f"{name}-n0-1"]
            attempts_ += [
                SandboxAttempt(
                    0, "RETRYABLE_FAILED", started, failed_at, attempt_pods, task, write_error=True
                ),
                SandboxAttempt(
                    1, "SUCCEEDED", retry_start, ended, retry_pods, task, write_outputs=True
                ),
            ]
            pod_stream(ns, retry_pods[0], retry_pods[0], retry_start, ended)
            count += 1
            ended_first = failed_at
        elif kind == "failed":
            ex_phase = node_phase = "FAILED"
            attempts_.append(
                SandboxAttempt(
                    0,
                    "FAILED",
                    started,
                    sig_at + timedelta(seconds=20),
                    attempt_pods,
                    task,
                    write_error=True,
                    reason="worker-0: CUDA error: an illegal memory access was encountered",
                )
            )
        elif kind == "suspected":
            attempts_.append(SandboxAttempt(0, "SUCCEEDED", started, ended, attempt_pods, task))
        else:  # healthy
            attempts_.append(
                SandboxAttempt(
                    0, "SUCCEEDED", started, ended, attempt_pods, task, write_outputs=True
                )
            )
        ex = b.add(
            SandboxExecution(
                project,
                domain,
                name,
                ex_phase,
                created,
                ended + timedelta(seconds=3),
                nodes=[SandboxNode("n0", node_phase, attempts_, checkpoint_uri=checkpoint)],
            )
        )
        count += 1
        if kind != "suspected":  # suspected: the logs expired or were never shipped
            first_end = ended_first if kind == "retried" else attempts_[0].ended_at or ended
            for pod in attempt_pods:
                pod_stream(ns, pod, container, started, first_end)
        if kind in ("affected", "written", "retried", "failed"):
            for j, pod in enumerate(signalled_pods):
                b.signal_pod(
                    sig_at + timedelta(milliseconds=300 * j),
                    ns,
                    pod,
                    container,
                    wrap="cri" if multi else "raw",
                    sig="Signals.SIGTERM" if i % 4 == 0 else "15",
                    pid=100 + i % 900,
                    plugin_lines=kind == "affected",
                )
        if ex_phase == "SUCCEEDED":
            b.propeller(ended, ex, "n0", task.task_type)
        key = (project, domain, name, "n0", 0)
        if kind == "affected":
            expected[key] = "affected"
        elif kind == "suspected":
            expected[key] = "suspected"

    kinds = (
        ["affected"] * affected
        + ["written"] * n_written
        + ["retried"] * n_retried
        + ["failed"] * n_failed
        + ["suspected"] * suspected
        + ["healthy"] * n_healthy
    )
    order = list(range(len(kinds)))
    rng.shuffle(order)
    for i in order:
        one(kinds[i], i)
    assert count == attempts, (count, attempts)

    # Signalled pods that are no Flyte task pods (notebooks in a team namespace): cleared.
    for i in range(max(1, signalled // 100)):
        at = window.start + timedelta(hours=2, seconds=rng.uniform(0, span))
        b.signal_pod(at, "research-notebooks", f"jupyter-user{i}-0", "notebook", plugin_lines=False)

    return SyntheticMonth(
        scenario=b.build(),
        window=window,
        attempts=attempts,
        signalled=signalled,
        expected=expected,
        noise_lines=noise_lines,
        pods=pods,
    )
