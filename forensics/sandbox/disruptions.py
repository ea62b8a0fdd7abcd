"""The disruption neighbours: executions whose only witness of the disruption is Kubernetes'
own record, an event each collector stores in Loki in its own format (`sandbox/k8s_events.py`).

Dated in October 2026, after every other scenario's window, so a scan of those never sees them;
`DISRUPTION_WINDOW` covers them all and `DISRUPTION_EXPECTED` says what a correct scan with
`[k8s_events]` on concludes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from forensics.model import UTC, to_ns
from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.k8s_events import (
    EXPORTER_LABELS,
    K8sEvent,
    event_line,
    karpenter_disrupted,
    karpenter_evicted,
    kubelet_killing,
    scheduler_preempted,
    spot_interrupted,
)
from forensics.sandbox.prometheus_server import SandboxCondition
from forensics.sandbox.scenario import SandboxLogLine, Scenario

DISRUPTION_WINDOW = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 10, 8, tzinfo=UTC))
# An elastic task preempted by Karpenter's consolidation; its pod's log lines are gone (the
# node's shipper died with it), the Disrupted event survived (Alloy, logfmt).
PREEMPTED = ("gs1", "production", "q1w5e9r3t7y1u5i9o3p7")
# A plain python task (not elastic) whose SIGTERM handler called sys.exit(0) when the scheduler
# preempted it (kubernetes-event-exporter's JSON): success without outputs.pb.
EXIT0 = ("gs1", "production", "r2t6y0u4i8o2p6a0s4d8")
# A healthy plain task (outputs.pb written) whose node Karpenter drained after it had finished.
DRAINED_AFTER = ("gs1", "production", "s3y7u1i5o9p3a7s1d5f9")
# A PyTorchJob whose worker-1 was on an interrupted spot node (Alloy, json).
SPOT_JOB = ("gs1", "production", "t4u8i2o6p0a4s8d2f6g0")
# A plain task the taint manager evicted (its node went NotReady): no event in Loki at all, only
# Admin's `closure.reasons` (propeller's send-object-events) kept it.
ADMIN_ONLY = ("gs1", "production", "v5i9o3p7a1s5d9f3g7h1")
# A plain task the scheduler preempted, seen only by kube-state-metrics' DisruptionTarget metric
# in Prometheus (`DISRUPTION_CONDITIONS`, served by sandbox/prometheus_server.py).
PROM_ONLY = ("gs1", "production", "w6o0p4a8s2d6f0g4h8j2")
# An elastic task that ended just after the window's start, disrupted just before it.
AT_THE_EDGE = ("gs1", "production", "y8a2s6d0f4g8h2j6k0l4")


def _t(day: int, hh: int, mm: int, ss: int) -> datetime:
    return datetime(2026, 10, day, hh, mm, ss, tzinfo=UTC)


# fmt: off
def disruption_neighbours(b: ScenarioBuilder) -> None:
    """Add the disruption neighbours and their events to `b`."""
    gs1, ns = ("gs1", "production"), "gs1-production"
    elastic = b.task(*gs1, "bigmodel.train")
    plain = b.task(*gs1, "etl.export", version=0)
    pt = b.task(*gs1, "bigmodel.train_multinode", task_type="pytorch")
    events: list[tuple[K8sEvent, str]] = []

    name = PREEMPTED[2]
    ok = _t(2, 3, 0, 9)
    b.one_node(*gs1, name, "SUCCEEDED", _t(2, 1, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(2, 1, 0, 5), ok, elastic))
    events.append((karpenter_disrupted(ns, f"{name}-n0-0", _t(2, 3, 0, 0), _t(2, 3, 2, 0)),
                   "alloy-logfmt"))

    name = EXIT0[2]
    ok = _t(3, 5, 0, 3)
    b.one_node(*gs1, name, "SUCCEEDED", _t(3, 4, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(3, 4, 0, 5), ok, plain))
    events.append((scheduler_preempted(ns, f"{name}-n0-0", _t(3, 5, 0, 0), "ip-10-0-7-21"),
                   "event-exporter"))

    name = DRAINED_AFTER[2]
    ok = _t(4, 7, 0, 0)
    b.one_node(*gs1, name, "SUCCEEDED", _t(4, 6, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(4, 6, 0, 5), ok, plain, write_outputs=True))
    events.append((karpenter_evicted(ns, f"{name}-n0-0", ok + timedelta(minutes=5)), "alloy-json"))

    name = SPOT_JOB[2]
    ok = _t(5, 9, 0, 40)
    workers = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
    b.one_node(*gs1, name, "SUCCEEDED", _t(5, 8, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(5, 8, 0, 5), ok, pt, pods=workers))
    events.append((spot_interrupted(ns, workers[1], _t(5, 9, 0, 0)), "alloy-json"))
    # The operator deleting worker-0 after the success: the kubelet's Killing, later.
    events.append((kubelet_killing(ns, workers[0], "pytorch", ok + timedelta(seconds=1),
                                   "ip-10-0-9-4"), "alloy-logfmt"))

    name = ADMIN_ONLY[2]
    ok = _t(6, 11, 0, 4)
    pod = f"{name}-n0-0"
    b.one_node(*gs1, name, "SUCCEEDED", _t(6, 10, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(6, 10, 0, 5), ok, plain, reasons=[
                   (_t(6, 10, 0, 6), "Successfully assigned gs1-production/" + pod + " to ip-10-0-5-8"),
                   (_t(6, 11, 0, 0), f"Marking for deletion Pod gs1-production/{pod}"),
                   (_t(6, 11, 0, 1), "Stopping container " + pod),
               ]))

    name = PROM_ONLY[2]
    ok = _t(7, 2, 2, 10)
    b.one_node(*gs1, name, "SUCCEEDED", _t(7, 1, 0, 0), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", _t(7, 1, 0, 5), ok, plain))

    name = AT_THE_EDGE[2]
    ok = DISRUPTION_WINDOW[0] + timedelta(seconds=30)
    b.one_node(*gs1, name, "SUCCEEDED", ok - timedelta(hours=3), ok + timedelta(seconds=2),
               _try(name, 0, "SUCCEEDED", ok - timedelta(hours=3), ok, elastic))
    events.append((karpenter_disrupted(ns, f"{name}-n0-0", ok - timedelta(seconds=40),
                                       ok + timedelta(minutes=1)), "alloy-logfmt"))

    # Noise the reader must ignore: a notebook pod (no Flyte task), the spot node itself.
    events.append((kubelet_killing("research-notebooks", "jupyter-alice-0", "notebook",
                                   _t(2, 12, 0, 0), "ip-10-0-3-3"), "alloy-logfmt"))
    events.append((K8sEvent("", "ip-10-0-7-21.ec2.internal", "SpotInterrupted",
                            "Spot interruption warning was triggered", _t(5, 9, 0, 0),
                            component="karpenter", kind="Node", type="Warning"), "alloy-json"))
    for ev, fmt in events:
        b.scenario.log_lines.append(event_line(ev, fmt))
    # An event exporter configured with a custom `layout` (pkg/sinks/tmpl.go): its own keys only,
    # no involvedObject; the tool cannot read it and says so.
    b.scenario.log_lines.append(SandboxLogLine(
        to_ns(_t(6, 12, 0, 0)), dict(EXPORTER_LABELS),
        '{"reason":"Evicted","pod":"gs1-production/some-pod","message":"Evicted pod"}'))
# fmt: on


def disruption_scenario() -> Scenario:
    """Only the disruption neighbours (what the end-to-end tests of the events seed)."""
    b = ScenarioBuilder()
    disruption_neighbours(b)
    b.routine_logs(*DISRUPTION_WINDOW)  # only the preempted pods' own lines are gone
    return b.build()


# kube-state-metrics' view: the preempted plain task, and a notebook pod no attempt owns.
DISRUPTION_CONDITIONS = [
    SandboxCondition(
        "gs1-production",
        f"{PROM_ONLY[2]}-n0-0",
        "PreemptionByScheduler",
        _t(7, 2, 0, 0),
        _t(7, 2, 2, 11),
    ),
    SandboxCondition(
        "research-notebooks",
        "jupyter-bob-0",
        "EvictionByEvictionAPI",
        _t(7, 3, 0, 0),
        _t(7, 3, 1, 0),
    ),
]

DISRUPTION_EXPECTED = {
    (*PREEMPTED, "n0", 0): ("affected", "Disrupted", "elastic-ignore-outputs"),
    (*EXIT0, "n0", 0): ("affected", "Preempted", "exit-0-after-signal"),
    (*SPOT_JOB, "n0", 0): ("affected", "SpotInterrupted", "elastic-ignore-outputs"),
    (*ADMIN_ONLY, "n0", 0): ("affected", "TaintManagerEviction", "exit-0-after-signal"),
    (*PROM_ONLY, "n0", 0): ("affected", "PreemptionByScheduler", "exit-0-after-signal"),
    (*AT_THE_EDGE, "n0", 0): ("affected", "Disrupted", "elastic-ignore-outputs"),
}
