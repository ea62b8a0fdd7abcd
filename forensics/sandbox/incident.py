"""The reference incident and its neighbours: one execution per verdict and not-finding class.

Each neighbour is built the way the real systems would record it: the elastic agent's log lines in
the task pod's stream (in the variants docs/verdicts.md "Log lines" lists), flytekit's JSON lines,
propeller's success line, Admin's closures and the objects in S3. `reference_scenario()` is what
`demo` and the end-to-end tests scan; what a correct scan of it concludes is the tests' own
(tests/support/expected.py). The incident and its neighbours are one story whose times and lines
refer to each other, read top to bottom.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from forensics.evidence.flyte_names import generated_name
from forensics.model import UTC, to_ns
from forensics.sandbox.k8s_events import (
    event_line,
    karpenter_disrupted,
    kubelet_killing,
    node_spot_interrupted,
    routine_events,
)
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLaunchPlan,
    SandboxLogLine,
    SandboxNode,
    SandboxObject,
    SandboxTask,
    Scenario,
)
from forensics.sandbox.shippers import ship

WINDOW_START = datetime(2026, 9, 4, tzinfo=UTC)
WINDOW_END = datetime(2026, 9, 11, tzinfo=UTC)
MODELS_BUCKET = "exa-models"
REFERENCE = ("gs1", "production", "azvg5f9v9974m78fvlf7")
REFERENCE_CHECKPOINT = "s3://exa-models/checkpoints/gs1-distill/bigmodel-c42-nem1b-a2-lr5em5-v1/"
# Proved by an event alone (neighbour 15): seen only with `[k8s_events]` on, as `demo` runs.
EVENT_ONLY = ("gs1", "production", "x7p1a5s9d3f7g1h5j9k3")


@dataclass(frozen=True)
class LabelNames:
    """The stream label names a collector uses (promtail's defaults, or otel's `k8s_*`)."""

    namespace: str = "namespace"
    pod: str = "pod"
    container: str = "container"


OTEL_LABELS = LabelNames("k8s_namespace_name", "k8s_pod_name", "k8s_container_name")


def _t(day: int, hh: int, mm: int, ss: int, us: int = 0) -> datetime:
    return datetime(2026, 9, day, hh, mm, ss, us, tzinfo=UTC)


def glog_agent_line(at: datetime, pid: int, sig: str = "15") -> str:
    """torch ≥ 2.x agent warning in glog format (Python ≥ 3.11 renders SIGTERM as `15`)."""
    return (
        f"W{at:%m%d} {at:%H:%M:%S.%f} {pid} torch/distributed/elastic/agent/server/api.py:753] "
        f"Received {sig} death signal, shutting down workers"
    )


def glog_closing_line(at: datetime, pid: int, child: int, sig: str = "SIGTERM") -> str:
    return (
        f"W{at:%m%d} {at:%H:%M:%S.%f} {pid} torch/distributed/elastic/multiprocessing/api.py:871] "
        f"Closing process {child} via signal {sig}"
    )


def flytekit_json(at: datetime, level: str, message: str, exc: str | None = None) -> str:
    doc: dict[str, str] = {
        "asctime": f"{at:%Y-%m-%d %H:%M:%S},{at.microsecond // 1000:03d}",
        "name": "flytekit",
        "levelname": level,
        "message": message,
    }
    if exc:
        doc["exc_info"] = exc
    return json.dumps(doc)


def propeller_success(
    at: datetime, exec_id: str, ns: str, node: str, tasktype: str, wf: str
) -> str:
    plugin = "pytorch" if tasktype == "pytorch" else "container"
    return json.dumps(
        {
            "json": {
                "exec_id": exec_id,
                "node": node,
                "ns": ns,
                "routine": "worker-3",
                "src": "plugin_manager.go:327",
                "tasktype": tasktype,
                "wf": wf,
            },
            "level": "info",
            "msg": f"Plugin [{plugin}] returned no outputReader, assuming file based outputs",
            "ts": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        separators=(",", ":"),
    )


def cri(at: datetime, msg: str, stream: str = "stderr") -> str:
    return f"{at:%Y-%m-%dT%H:%M:%S.%f}000Z {stream} F {msg}"


def docker_json(at: datetime, msg: str, stream: str = "stderr") -> str:
    return json.dumps({"log": msg + "\n", "stream": stream, "time": f"{at:%Y-%m-%dT%H:%M:%S.%f}Z"})


class ScenarioBuilder:
    """Accumulates executions, their log lines and S3 objects into a Scenario."""

    def __init__(self, labels: LabelNames = LabelNames(), shipper: str | None = None) -> None:
        self.labels = labels
        self.shipper = shipper  # None: lines as the runtime wrote them; else shippers.SHIPPERS
        self.scenario = Scenario(buckets={MODELS_BUCKET, "flyte-metadata"})
        self._tasks: dict[tuple[str, str, str, str], SandboxTask] = {}

    def task(
        self,
        project: str,
        domain: str,
        name: str,
        task_type: str = "python-task",
        version: int = 1,
        *,
        has_outputs: bool = False,
        **resources: Any,  # SandboxTask's requests, limits, accelerator, worker_replicas
    ) -> SandboxTask:
        key = (project, domain, name, "v1")
        if key not in self._tasks:
            t = SandboxTask(project, domain, name, "v1", task_type, version, has_outputs,
                            **resources)  # fmt: skip
            self._tasks[key] = t
            self.scenario.tasks.append(t)
        return self._tasks[key]

    def log(
        self,
        at: datetime,
        ns: str,
        pod: str,
        container: str,
        line: str,
        stream: str = "stderr",
        *,
        stamped: datetime | None = None,
    ) -> None:
        """One line written at `at`; Loki keeps `stamped` (default `at`): a shipper without a
        time-parsing stage pushes the time it read the line, later (docs/upstream.md)."""
        labels = {self.labels.namespace: ns, self.labels.pod: pod, self.labels.container: container}
        if self.shipper is not None:
            line = ship(self.shipper, at, line, stream=stream, ns=ns, pod=pod, container=container)
        self.scenario.log_lines.append(SandboxLogLine(to_ns(stamped or at), labels, line))

    def routine_logs(
        self, start: datetime, end: datetime, every: timedelta = timedelta(hours=1)
    ) -> None:
        """A pod that keeps logging in every namespace the scenario's executions use, from
        `start` to `end`: a cluster's other pods whose logs survived. Without them Loki would
        hold no task log at all on the days where only the scenario's silent attempts ran, which
        the scan rightly reports as a `logs_absent` gap (docs/upstream.md, "Log coverage")."""
        namespaces = sorted({f"{ex.project}-{ex.domain}" for ex in self.scenario.executions})
        for ns in namespaces:
            at = start + timedelta(minutes=7)
            while at < end:
                self.log(at, ns, "feature-store-0", "feature-store", "served 120 feature requests")
                at += every

    def propeller(self, at: datetime, ex: SandboxExecution, node: str, tasktype: str) -> None:
        ns = f"{ex.project}-{ex.domain}"
        wf = f"{ex.project}:{ex.domain}:wf.train"
        self.log(
            at,
            "flyte",
            "flytepropeller-6d9c7b7d8-x2k9q",
            "flytepropeller",
            propeller_success(at, ex.name, ns, node, tasktype, wf),
        )

    def signal_pod(
        self,
        at: datetime,
        ns: str,
        pod: str,
        container: str,
        *,
        wrap: str = "raw",
        sig: str = "15",
        pid: int = 107,
        plugin_lines: bool = True,
        stamp_lag: timedelta = timedelta(0),
    ) -> None:
        """The lines a preempted elastic pod logs: agent warning, worker teardown, flytekit;
        Loki stamps each `stamp_lag` after it was written (a shipper's read time)."""

        def emit(t: datetime, msg: str) -> None:
            # A shipper reads the runtime's files and pushes its own envelope (or line) instead.
            if self.shipper is not None:
                pass
            elif wrap == "cri":
                msg = cri(t, msg)
            elif wrap == "docker":
                msg = docker_json(t, msg)
            self.log(t, ns, pod, container, msg, stamped=t + stamp_lag)

        emit(at, glog_agent_line(at, pid, sig))
        emit(at + timedelta(milliseconds=2), glog_closing_line(at, pid, pid + 43))
        if plugin_lines:
            signum = {"15": 15, "Signals.SIGTERM": 15, "2": 2, "Signals.SIGINT": 2}.get(sig, 15)
            emit(
                at + timedelta(seconds=1),
                flytekit_json(
                    at + timedelta(seconds=1),
                    "ERROR",
                    f"Elastic launch agent process terminating: Process {pid} got signal: {signum}",
                    "Traceback (most recent call last):\n ... SignalException: "
                    f"Process {pid} got signal: {signum}",
                ),
            )
            emit(
                at + timedelta(seconds=1, milliseconds=1),
                flytekit_json(
                    at + timedelta(seconds=1, milliseconds=1),
                    "WARNING",
                    "User-scoped IgnoreOutputs received! Outputs.pb will not be uploaded. "
                    "reason USER:RuntimeError: error=, cause=!!",
                ),
            )

    def operator_success(
        self,
        preempted_at: datetime,
        ns: str,
        workers: list[str],
        preempted: int,
        *,
        lost: bool = False,
    ) -> datetime:
        """A PyTorchJob ended by one preempted worker, in the order the systems act; returns the
        attempt's end as Admin records it.

        The preempted worker's agent logs its signal (unless its logs were `lost`) and the pod
        exits 0 two seconds later (the bug); the operator marks the job Succeeded and deletes the
        other pods; propeller stamps the end when it next observes the job; the deleted
        siblings' agents log their signals after that success (docs/upstream.md, "The reference
        incident").
        """
        end = preempted_at + timedelta(seconds=2, milliseconds=370)
        for i, pod in enumerate(workers):
            if i == preempted:
                if not lost:
                    self.signal_pod(preempted_at, ns, pod, "pytorch", pid=80 + i)
            else:
                at = end + timedelta(milliseconds=500 + 100 * i)
                self.signal_pod(at, ns, pod, "pytorch", pid=80 + i, plugin_lines=False)
        return end

    def add(self, ex: SandboxExecution) -> SandboxExecution:
        self.scenario.executions.append(ex)
        return ex

    def one_node(
        self,
        project: str,
        domain: str,
        name: str,
        phase: str,
        created: datetime,
        updated: datetime,
        *attempts: SandboxAttempt,
        is_array: bool = False,
        checkpoint_uri: str | None = None,
        **execution: Any,
    ) -> SandboxExecution:
        """The common shape: an execution whose one node `n0` (in the same phase) ran `attempts`."""
        node = SandboxNode(
            "n0", phase, list(attempts), is_array=is_array, checkpoint_uri=checkpoint_uri
        )
        return self.add(
            SandboxExecution(
                project, domain, name, phase, created, updated, nodes=[node], **execution
            )
        )

    def checkpoint_objects(self, prefix: str, times: list[datetime]) -> None:
        bucket, _, key = prefix.removeprefix("s3://").partition("/")
        self.scenario.buckets.add(bucket)
        for i, t in enumerate(times):
            self.scenario.objects.append(
                SandboxObject(bucket, f"{key}step-{(i + 1) * 1000:07d}/model.pt", b"ckpt", t)
            )

    def build(self) -> Scenario:
        return self.scenario


def _try(
    name: str,
    n: int,
    phase: str,
    start: datetime,
    end: datetime | None,
    task: SandboxTask,
    *,
    node: str = "n0",
    pods: list[str] | None = None,
    **kw: Any,
) -> SandboxAttempt:
    """Attempt `n` of `node`, its pod named as Flyte names short ones: `<exec>-<node>-<n>`."""
    return SandboxAttempt(n, phase, start, end, pods or [f"{name}-{node}-{n}"], task, **kw)


# The scenario reads as a table: one execution per block, one attempt per call.
GPU_NODE_4 = (("cpu", "8"), ("gpu", "4"), ("memory", "64Gi"))
GPU_NODE_8 = (("cpu", "16"), ("gpu", "8"), ("memory", "320Gi"))


# fmt: off
def reference_scenario(labels: LabelNames = LabelNames(), shipper: str | None = None) -> Scenario:
    """The reference incident and one neighbour for every verdict and not-finding class.

    `shipper` (one of `shippers.SHIPPERS`) ships every log line through that collector's
    envelope instead, as a cluster running Fluent Bit, the OpenTelemetry collector, Vector or
    Alloy would store it (the OTel collector's labels are `OTEL_LABELS`).
    """
    b = ScenarioBuilder(labels, shipper)
    gs1, dev = ("gs1", "production"), ("gs1", "development")
    ns = "gs1-production"
    # `@task(task_config=Elastic(nproc_per_node=4), resources=Resources(cpu="8", gpu="4",
    # mem="64Gi"), accelerator=A100)`; the multi-node one `Elastic(nnodes=2, nproc_per_node=8)`.
    task = b.task(*gs1, "bigmodel.train", requests=GPU_NODE_4, accelerator="nvidia-tesla-a100")
    pt = b.task(*gs1, "bigmodel.train_multinode", task_type="pytorch", requests=GPU_NODE_8,
                accelerator="nvidia-tesla-a100", worker_replicas=2)

    # 1. The reference incident (docs/verdicts.md): single-node Elastic, SIGTERM, success 7 s later,
    #    no outputs.pb, empty checkpoint prefix given as the `checkpoint_dir` input.
    name = REFERENCE[2]
    sig_at, ok_at = _t(10, 19, 45, 22), _t(10, 19, 45, 29)
    ex = b.one_node(*gs1, name, "SUCCEEDED", _t(10, 11, 2, 5), ok_at + timedelta(seconds=3),
                    _try(name, 0, "SUCCEEDED", _t(10, 11, 2, 30), ok_at, task),
                    inputs={"checkpoint_dir": REFERENCE_CHECKPOINT, "model": "bigmodel-c42-nem1b"},
                    labels={"team": "distill"})
    b.signal_pod(sig_at, ns, f"{name}-n0-0", f"{name}-n0-0")
    b.propeller(ok_at, ex, "n0", "python-task")

    # 2. Multi-node Elastic (PyTorchJob): both workers signalled (Python 3.10 rendering,
    #    CRI-wrapped) → ONE finding; Flyte's own checkpoint holds steps written before the signal.
    name = "bq7k2m9x4c8d1f6h3j5n"
    sig_at, ok_at = _t(9, 3, 12, 40), _t(9, 3, 12, 51)
    ck = f"s3://flyte-metadata/raw/ab/{name}-n0-0/_flytecheckpoints/"
    workers = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
    b.one_node(*gs1, name, "SUCCEEDED", _t(8, 22, 0, 0), ok_at + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(8, 22, 0, 30), ok_at, pt, pods=workers),
               checkpoint_uri=ck)
    b.signal_pod(sig_at + timedelta(milliseconds=400), ns, workers[1], "pytorch", wrap="cri",
                 sig="Signals.SIGTERM", pid=88)
    b.signal_pod(sig_at, ns, workers[0], "pytorch", wrap="cri", sig="Signals.SIGTERM", pid=87)
    b.checkpoint_objects(ck, [_t(9, 1, 0, 0), _t(9, 2, 0, 0), _t(9, 3, 0, 0)])

    # 3. SIGINT, docker-json wrapped, in the development domain; no checkpoint location is
    #    known → unknown. A later relaunch of it exists already → relaunched_as.
    name = "c3p8r2w6y1t5u9e4o7i0"
    sig_at, ok_at = _t(6, 8, 30, 0), _t(6, 8, 30, 4)
    small = b.task(*dev, "small.train")  # no resources: the platform's defaults, cost unknown
    b.one_node(*dev, name, "SUCCEEDED", _t(6, 7, 0, 0), ok_at + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(6, 7, 0, 20), ok_at, small))
    b.signal_pod(sig_at, "gs1-development", f"{name}-n0-0", f"{name}-n0-0", wrap="docker", sig="2")
    relaunch = "d5a1s9d3f7g2h6j0k4l8"
    b.one_node(*dev, relaunch, "RUNNING", _t(7, 9, 0, 0), _t(7, 9, 5, 0),
               _try(relaunch, 0, "RUNNING", _t(7, 9, 0, 30), None, small),
               mode="RELAUNCH", reference_execution=(*dev, name))

    # 4. Hashed pod name: a user-named execution so long that the pod name is `f` + base32.
    name = "nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"
    pod = generated_name([name, "n0", 0])
    sig_at, ok_at = _t(5, 2, 10, 0), _t(5, 2, 10, 9)
    b.one_node(*gs1, name, "SUCCEEDED", _t(4, 20, 0, 0), ok_at + timedelta(seconds=1),
               _try(name, 0, "SUCCEEDED", _t(4, 20, 1, 0), ok_at, task, pods=[pod]),
               inputs={"checkpoint_dir": "s3://exa-models/checkpoints/gs1-distill/nightly/"})
    b.signal_pod(sig_at, ns, pod, pod)
    b.checkpoint_objects("s3://exa-models/checkpoints/gs1-distill/nightly/",
                         [_t(5, 1, 0, 0), _t(5, 2, 10, 5)])

    # 5. Nested (dynamic) node: the elastic task runs as n0-0-dn1 under a dynamic parent.
    name = "e8r4t2y6u0i3o7p1a5s9"
    sig_at, ok_at = _t(7, 14, 0, 0), _t(7, 14, 0, 6)
    plan = b.task(*gs1, "sweep.plan", version=0)
    b.add(SandboxExecution(*gs1, name, "SUCCEEDED", _t(7, 12, 0, 0), ok_at + timedelta(seconds=5), nodes=[
        SandboxNode("n0", "SUCCEEDED", is_parent=True, is_dynamic=True, attempts=[
            _try(name, 0, "SUCCEEDED", _t(7, 12, 0, 10), _t(7, 12, 0, 40), plan, write_outputs=True),
        ]),
        SandboxNode("n0-0-dn1", "SUCCEEDED", spec_node_id="dn1", parent_unique_id="n0", attempts=[
            _try(name, 0, "SUCCEEDED", _t(7, 12, 1, 0), ok_at, task, node="n0-0-dn1"),
        ]),
    ]))
    b.signal_pod(sig_at, ns, f"{name}-n0-0-dn1-0", f"{name}-n0-0-dn1-0")

    # 6. Not a finding: signalled, but rank 0 had finished and outputs.pb was written.
    name = "f1g5h9j3k7l2z6x0c4v8"
    b.one_node(*gs1, name, "SUCCEEDED", _t(8, 9, 0, 0), _t(8, 10, 0, 9),
               _try(name, 0, "SUCCEEDED", _t(8, 9, 0, 5), _t(8, 10, 0, 7), task, write_outputs=True))
    b.signal_pod(_t(8, 10, 0, 0), ns, f"{name}-n0-0", f"{name}-n0-0", plugin_lines=False)

    # 7. Not a finding: signalled attempt failed (exit 143) and was retried successfully.
    name = "g2h6j0k4l8q3w7e1r5t9"
    sig_at = _t(8, 16, 0, 0)
    b.one_node(*gs1, name, "SUCCEEDED", _t(8, 15, 0, 0), _t(8, 18, 0, 5),
               _try(name, 0, "RETRYABLE_FAILED", _t(8, 15, 0, 5), sig_at + timedelta(seconds=30),
                    task, write_error=True),
               _try(name, 1, "SUCCEEDED", _t(8, 16, 1, 0), _t(8, 18, 0, 0), task, write_outputs=True))
    b.signal_pod(sig_at, ns, f"{name}-n0-0", f"{name}-n0-0", plugin_lines=False)

    # 8. Not a finding: the operator SIGTERMed worker-1 after worker-0's genuine failure;
    #    the attempt and the execution failed.
    name = "h3j7k1l5z9x4c8v2b6n0"
    workers = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
    b.one_node(*gs1, name, "FAILED", _t(9, 19, 0, 0), _t(9, 20, 0, 30),
               _try(name, 0, "FAILED", _t(9, 19, 0, 5), _t(9, 20, 0, 20), pt, pods=workers,
                    write_error=True, reason="worker-0: CUDA error"))
    b.signal_pod(_t(9, 20, 0, 10), ns, workers[1], "pytorch")

    # 9. Not a finding: a pod that is no Flyte task pod (a notebook in a team namespace).
    b.signal_pod(_t(7, 4, 0, 0), "research-notebooks", "jupyter-alice-0", "notebook",
                 plugin_lines=False)

    # 10. Suspected: elastic success with no outputs.pb and no log lines at all (logs expired).
    name = "j4k8l2z6x0c3v7b1n5m9"
    b.one_node(*gs1, name, "SUCCEEDED", _t(5, 10, 0, 0), _t(5, 12, 0, 2),
               _try(name, 0, "SUCCEEDED", _t(5, 10, 0, 5), _t(5, 12, 0, 0), task))

    # 11. Healthy elastic success with outputs; 12. a plain python task (not elastic) without
    #     outputs; 13. a map task (array node, python-task v1) without outputs: not findings.
    healthy = "k5l9z3x7c1v5b9n3m7q1"
    b.one_node(*gs1, healthy, "SUCCEEDED", _t(6, 10, 0, 0), _t(6, 11, 0, 2),
               _try(healthy, 0, "SUCCEEDED", _t(6, 10, 0, 5), _t(6, 11, 0, 0), task,
                    write_outputs=True))
    name = "l6z0x4c8v2b6n0m4q8w2"
    b.one_node(*gs1, name, "SUCCEEDED", _t(6, 12, 0, 0), _t(6, 12, 5, 0),
               _try(name, 0, "SUCCEEDED", _t(6, 12, 0, 5), _t(6, 12, 4, 0),
                    b.task(*gs1, "etl.load", version=0)))
    name = "m7x1c5v9b3n7m1q5w9e3"
    b.one_node(*gs1, name, "SUCCEEDED", _t(6, 13, 0, 0), _t(6, 13, 5, 0),
               _try(name, 0, "SUCCEEDED", _t(6, 13, 0, 5), _t(6, 13, 4, 0),
                    b.task(*gs1, "etl.map_shards")),
               is_array=True)

    # 14. Outside the window: a preemption on 2026-09-02 must not be reported for [09-04, 09-11).
    name = "n8c2v6b0n4m8q2w6e0r4"
    b.one_node(*gs1, name, "SUCCEEDED", _t(2, 1, 0, 0), _t(2, 2, 0, 9),
               _try(name, 0, "SUCCEEDED", _t(2, 1, 0, 5), _t(2, 2, 0, 7), task))
    b.signal_pod(_t(2, 2, 0, 0), ns, f"{name}-n0-0", f"{name}-n0-0")

    # 15. Proved by an event alone: a plain (non-elastic) task whose SIGTERM handler exited 0 when
    #     its spot node was interrupted. No log line says so; Alloy shipped (logfmt) what
    #     Karpenter really writes: SpotInterrupted on the Node and NodeClaim only
    #     (aws/karpenter-provider-aws pkg/controllers/interruption/events/events.go:24-42), the
    #     NodeClaim's termination time set to the two-minute notice (interruption/utils.go:174),
    #     so the pod, whose grace period outlasts it, gets `Disrupted` "Deleting the pod to
    #     accommodate the terminationTime ..." (kubernetes-sigs/karpenter .../terminator/
    #     eviction.go needsForceDelete, events.go:43-51), and the kubelet's `Killing`. Not
    #     examined without `[k8s_events]` (a plain task is looked at only where evidence
    #     points); with it, affected (cause exit-0-after-signal).
    name = EVENT_ONLY[2]
    ok = _t(8, 4, 0, 31)
    b.one_node(*gs1, name, "SUCCEEDED", _t(8, 3, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(8, 3, 0, 5), ok, b.task(*gs1, "eval.score", version=0)))
    spot_node = "ip-10-0-6-17.ec2.internal"
    for ev in [*node_spot_interrupted(spot_node, "spot-4xl-7hq2d", _t(8, 3, 59, 58)),
               karpenter_disrupted(ns, f"{name}-n0-0", _t(8, 4, 0, 0), _t(8, 4, 2, 0)),
               kubelet_killing(ns, f"{name}-n0-0", f"{name}-n0-0", _t(8, 4, 0, 0), spot_node)]:
        b.scenario.log_lines.append(event_line(ev, "alloy-logfmt"))

    relaunch_neighbours(b)

    # Unrelated noise in the task namespaces: ordinary training logs that Loki filters out.
    pod = f"{healthy}-n0-0"
    for i in range(200):
        b.log(WINDOW_START + timedelta(minutes=47 * i), ns, pod, pod,
              f"step {i * 100} loss={1.0 / (i + 1):.4f} lr=5e-5", stream="stdout")
    # The namespaces' other pods keep logging through the window and the relaunch's life: Loki
    # holds their logs, as a cluster's does (docs/upstream.md, "Log coverage").
    b.routine_logs(datetime(2026, 9, 3, tzinfo=UTC), datetime(2026, 9, 12, tzinfo=UTC))
    # ... and the cluster's events stream is never silent either (sandbox/k8s_events.py)
    b.scenario.log_lines += routine_events(
        sorted({f"{ex.project}-{ex.domain}" for ex in b.scenario.executions}),
        datetime(2026, 9, 3, tzinfo=UTC), datetime(2026, 9, 12, tzinfo=UTC),
        every=timedelta(minutes=10))
    return b.build()
# fmt: on


# Relaunch neighbours, dated after the reference window so no scan of it sees them.
PIPELINE = ("gs1", "production", "p1q5w9e3r7t1y5u9i3o7")  # a parent, RUNNING
CHILD = ("gs1", "production", "c2v6b0n4m8q2w6e0r4t8")  # its child: RUNNING, training lied
CHAINED = ("gs1", "production", "o3i7u1y5t9r3e7w1q5a9")  # relaunched once; the relaunch lied too
# The name `relaunch` gives every relaunch of CHAINED (forensics.relaunch.relaunch_name, which must
# never change: exactly-once rests on it); tests/sandbox/test_scenario.py checks the two agree.
CHAINED_RELAUNCH = "rh2rlj27cqxmhqbpzrcv"
RUNNING = ("gs1", "production", "s4d8f2g6h0j4k8l2z6x0")  # lied, still RUNNING its evaluation
TWO_NODES = ("gs1", "production", "t5y9u3i7o1p5a9s3d7f1")  # two elastic nodes lied
FRESH = ("gs1", "production", "u6i0o4p8a2s6d0f4g8h2")  # lied, ended, never relaunched
DISTILL_IMAGE = "ghcr.io/exa-labs/distill:2026.09.01"
FIXED_IMAGE = "ghcr.io/exa-labs/distill:2026.09.13-kfpytorch-fix"


# fmt: off
def relaunch_neighbours(b: ScenarioBuilder) -> None:
    """Executions `relaunch` must judge before acting, dated 2026-09-20/21 (after the reference
    window and the quiet day the scan tests read): a running child of a running parent, a relaunch that died silently green too, a running
    original, two lying nodes, and launch plan `wf.distill` v1 (vulnerable image, a cacheable
    preprocessing node) with a v2 on a fixed image."""
    gs1, ns = ("gs1", "production"), "gs1-production"
    prep = SandboxTask(*gs1, "distill.prep", "v1", "python-task", 0, True, DISTILL_IMAGE,
                       cacheable=True, cache_version="1.0")
    train = SandboxTask(*gs1, "distill.train", "v1", image=DISTILL_IMAGE, interruptible=True)
    evaluate = SandboxTask(*gs1, "distill.eval", "v1", "python-task", 0, True, DISTILL_IMAGE)
    fixed = [SandboxTask(*gs1, t.name, "v2", t.task_type, t.task_type_version, t.has_outputs,
                         FIXED_IMAGE, cacheable=t.cacheable, cache_version=t.cache_version,
                         interruptible=t.interruptible) for t in (prep, train, evaluate)]
    lp = ("", "", "wf.distill", "v1")
    b.scenario.launch_plans += [
        SandboxLaunchPlan(*gs1, "wf.distill", "v1", [("n0", prep), ("n1", train), ("n2", evaluate)],
                          created_at=_t(1, 0, 0, 0)),
        SandboxLaunchPlan(*gs1, "wf.distill", "v2", list(zip(("n0", "n1", "n2"), fixed, strict=True)),
                          created_at=_t(21, 0, 0, 0)),
        SandboxLaunchPlan(*gs1, "wf.pipeline", "v1", [], ["n0"], created_at=_t(1, 0, 0, 0)),
    ]
    b.scenario.tasks += [prep, train, evaluate, *fixed]

    def distill(name: str, phase: str, created: datetime, signal: datetime, ok: datetime,
                **kw: Any) -> SandboxExecution:
        """prep (cached) → train (signalled, SUCCEEDED, no outputs.pb) → eval (RUNNING or done)."""
        done = phase == "SUCCEEDED"
        ex = b.add(SandboxExecution(*gs1, name, phase, created,
                                    ok + timedelta(hours=1) if done else created, nodes=[
            SandboxNode("n0", "SUCCEEDED", [_try(name, 0, "SUCCEEDED", created + timedelta(
                minutes=1), created + timedelta(minutes=5), prep, node="n0", write_outputs=True)]),
            SandboxNode("n1", "SUCCEEDED", [_try(name, 0, "SUCCEEDED", created + timedelta(
                minutes=6), ok, train, node="n1")]),
            SandboxNode("n2", "SUCCEEDED" if done else "RUNNING", [_try(
                name, 0, "SUCCEEDED" if done else "RUNNING", ok + timedelta(minutes=1),
                ok + timedelta(minutes=50) if done else None, evaluate, node="n2",
                write_outputs=done)]),
        ], launch_plan=lp, inputs={"checkpoint_dir": f"s3://exa-models/checkpoints/{name}/"},
            **kw))
        b.signal_pod(signal, ns, f"{name}-n1-0", f"{name}-n1-0")
        return ex

    # The parent pipeline (its node n0 launched the child) and the child: flyteadmin moved the
    # child's updated_at only when it started RUNNING, hours before its training was preempted.
    b.add(SandboxExecution(*PIPELINE[:2], PIPELINE[2], "RUNNING", _t(20, 6, 0, 0),
                           _t(20, 6, 0, 10), launch_plan=("", "", "wf.pipeline", "v1")))
    distill(CHILD[2], "RUNNING", _t(20, 6, 0, 20), _t(20, 9, 30, 0), _t(20, 9, 30, 6),
            mode="CHILD_WORKFLOW", parent=(*PIPELINE, "n0"))
    # Relaunched once by this tool; the relaunch ran into the same storm and lied too.
    distill(CHAINED[2], "SUCCEEDED", _t(20, 1, 0, 0), _t(20, 2, 0, 0), _t(20, 2, 0, 8))
    distill(CHAINED_RELAUNCH, "SUCCEEDED", _t(20, 4, 0, 0), _t(20, 5, 0, 0), _t(20, 5, 0, 7),
            mode="RELAUNCH", reference_execution=CHAINED)
    distill(RUNNING[2], "RUNNING", _t(21, 1, 0, 0), _t(21, 3, 0, 0), _t(21, 3, 0, 5))
    distill(FRESH[2], "SUCCEEDED", _t(21, 2, 0, 0), _t(21, 4, 0, 0), _t(21, 4, 0, 9),
            labels={"team": "distill"}, annotations={"owner": "alice"},
            service_account="distill-runner", raw_output_prefix="s3://exa-models/raw/distill/")
    # Two elastic nodes, both signalled and silent (n0's outputs.pb unreadable in one test).
    name = TWO_NODES[2]
    b.add(SandboxExecution(*gs1, name, "SUCCEEDED", _t(21, 5, 0, 0), _t(21, 8, 0, 0), nodes=[
        SandboxNode(n, "SUCCEEDED", [_try(name, 0, "SUCCEEDED", _t(21, 5 + i, 1, 0),
                                          _t(21, 5 + i, 30, 5), train, node=n)])
        for i, n in enumerate(("n0", "n1"))
    ], launch_plan=lp))
    for i, n in enumerate(("n0", "n1")):
        b.signal_pod(_t(21, 5 + i, 30, 0), ns, f"{name}-{n}-0", f"{name}-{n}-0")
# fmt: on
