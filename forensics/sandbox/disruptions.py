"""The disruption neighbours: executions whose only witness of the disruption is Kubernetes'
own record, an event each collector stores in Loki in its own format (`sandbox/k8s_events.py`).

Dated in October 2026, after every other scenario's window, so a scan of those never sees them;
`DISRUPTION_WINDOW` covers them all (what a correct scan with `[k8s_events]` on concludes is the
tests' own: tests/support/expected.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from forensics.model import UTC, to_ns
from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.k8s_events import (
    EXPORTER_LABELS,
    K8sEvent,
    autoscaler_scale_down,
    event_line,
    karpenter_disrupted,
    karpenter_evicted,
    kubelet_killing,
    kubelet_pressure_eviction,
    node_spot_interrupted,
    nth_spot_interruption,
    routine_events,
    scheduler_preempted,
    taint_eviction,
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
# A PyTorchJob whose worker-1 was on an interrupted spot node (Alloy, json): Karpenter's real
# shape, SpotInterrupted on the Node and NodeClaim only, then `Evicted` "Evicted pod: Forceful
# Termination" on the pod and the kubelet's `Killing`.
SPOT_JOB = ("gs1", "production", "t4u8i2o6p0a4s8d2f6g0")
# A plain task on a node AWS Node Termination Handler drained on a spot interruption: NTH records
# `SpotInterruption` on the Node only; the kubelet's `Killing` of the task's container on that
# node joins it to the pod (k8s-monitoring's labels, logfmt).
NTH_SPOT = ("gs1", "production", "a1n5t9h3s7p1o5t9i3n7")
# A plain task whose node Cluster Autoscaler scaled down: its own pod event `ScaleDown`
# (k8s-monitoring's labels).
SCALED_DOWN = ("gs1", "production", "b2c6a0s4d8o2w6n0x4z8")
# Healthy-looking plain tasks whose only events are no disruption: the kubelet's `Killing` of the
# task's container alone (C), a node announcement joined only through a sidecar's stop (D), a
# cancelled taint eviction (E). outputs.pb is missing on all three: any false disruption would
# make them findings.
KILLING_ONLY = ("gs1", "production", "c3k7i1l5l9i3n7g1o5n9")
SIDECAR_ONLY = ("gs1", "production", "d4s8i2d6e0c4a8r2o6n0")
TAINT_CANCELLED = ("gs1", "production", "e5t9a3i7n1t5c9a3n7c1")
# A single-pod task Flyte recorded SUCCEEDED with a kubelet node-pressure eviction of a pod of
# its name: the kubelet sets an evicted pod Failed, so the join is wrong.
PRESSURE_WRONG_JOIN = ("gs1", "production", "f6p0r4e8s2s6u0r4e8w2")
# A raw container with no outputs (no uploader, never an outputs.pb) that Karpenter disrupted.
RAW_CONTAINER = ("gs1", "production", "g7r1a5w9c3o7n1t5a9i3")
# A plain task preempted, the event shipped by eventrouter's stdout (CRI envelope), and one by
# the event exporter's stdout tailed in docker's json-file envelope.
EVENTROUTER = ("gs1", "production", "h8e2v6r0o4u8t2e6r0x4")
EXPORTER_STDOUT = ("gs1", "production", "i9x3s7t1d5o9u3t7s1y5")
# A plain task Karpenter evicted on consolidation, kept only in Admin's `closure.reasons` with
# Karpenter's v1.2+ message "Evicted pod: Underutilized".
ADMIN_EVICTED = ("gs1", "production", "k1e5v9i3c7t1e5d9u3n7")
# A healthy plain task (outputs.pb written) with an aggregated Alloy event (count 3) stamped after
# its end: the first occurrence is unknown, so no "disruption after success".
AGGREGATED = ("gs1", "production", "j0a4g8g2r6e0g4a8t2e6")
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
    spot_node = "ip-10-0-7-21.ec2.internal"
    events += [(ev, "alloy-json")
               for ev in node_spot_interrupted(spot_node, "gpu-spot-8xl-x2kfp", _t(5, 9, 0, 0))]
    events.append((karpenter_evicted(ns, workers[1], _t(5, 9, 0, 1)), "alloy-json"))
    events.append((kubelet_killing(ns, workers[1], "pytorch", _t(5, 9, 0, 1), spot_node),
                   "alloy-json"))
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

    second_witness_neighbours(b, events)

    # Noise the reader must ignore: a notebook pod (no Flyte task).
    events.append((kubelet_killing("research-notebooks", "jupyter-alice-0", "notebook",
                                   _t(2, 12, 0, 0), "ip-10-0-3-3"), "alloy-logfmt"))
    for ev, fmt in events:
        b.scenario.log_lines.append(event_line(ev, fmt))
    # An event exporter configured with a custom `layout` (pkg/sinks/tmpl.go): its own keys only,
    # no involvedObject; the tool cannot read it and says so.
    b.scenario.log_lines.append(SandboxLogLine(
        to_ns(_t(6, 12, 0, 0)), dict(EXPORTER_LABELS),
        '{"reason":"Evicted","pod":"gs1-production/some-pod","message":"Evicted pod"}'))
# fmt: on


def second_witness_neighbours(b: ScenarioBuilder, events: list[tuple[K8sEvent, str]]) -> None:
    """The shapes clusters really write (issue 42): node-only announcements, Cluster
    Autoscaler, events that are no disruption, a wrong join, a task without an outputs
    artefact, and the stdout shippers."""
    gs1, ns = ("gs1", "production"), "gs1-production"
    plain = b.task(*gs1, "etl.export", version=0)
    raw = b.task(*gs1, "tools.render", task_type="raw-container", version=0)

    def run(name: str, day: int, hh: int, task: object = plain, **kw: object) -> datetime:
        ok = _t(day, hh, 0, 30)
        b.one_node(
            *gs1,
            name,
            "SUCCEEDED",
            _t(day, hh - 1, 0, 0),
            ok + timedelta(seconds=2),
            _try(name, 0, "SUCCEEDED", _t(day, hh - 1, 0, 5), ok, task, **kw),
        )
        return ok

    name = NTH_SPOT[2]
    run(name, 2, 14)
    node = "ip-10-0-8-12.ec2.internal"
    events.append((nth_spot_interruption(node, _t(2, 14, 0, 0), _t(2, 14, 2, 0)), "k8s-monitoring"))
    events.append(
        (
            kubelet_killing(ns, f"{name}-n0-0", f"{name}-n0-0", _t(2, 14, 0, 3), node),
            "k8s-monitoring",
        )
    )

    name = SCALED_DOWN[2]
    run(name, 3, 14)
    events.append((autoscaler_scale_down(ns, f"{name}-n0-0", _t(3, 14, 0, 0)), "k8s-monitoring"))

    name = KILLING_ONLY[2]
    ok = run(name, 4, 14)
    events.append(
        (
            kubelet_killing(
                ns, f"{name}-n0-0", f"{name}-n0-0", ok - timedelta(seconds=5), "ip-10-0-9-9"
            ),
            "alloy-logfmt",
        )
    )

    name = SIDECAR_ONLY[2]
    ok = run(name, 4, 16)
    node = "ip-10-0-9-10"
    events.append(
        (
            K8sEvent(
                "",
                node,
                "ScaleDown",
                "marked the node as toBeDeleted/unschedulable",
                ok + timedelta(seconds=20),
                component="cluster-autoscaler",
                kind="Node",
            ),
            "alloy-logfmt",
        )
    )
    events.append(
        (
            kubelet_killing(ns, f"{name}-n0-0", "istio-proxy", ok + timedelta(seconds=25), node),
            "alloy-logfmt",
        )
    )

    name = TAINT_CANCELLED[2]
    ok = run(name, 4, 18)
    events.append(
        (
            taint_eviction(ns, f"{name}-n0-0", ok - timedelta(minutes=3), cancelled=True),
            "alloy-logfmt",
        )
    )

    name = PRESSURE_WRONG_JOIN[2]
    ok = run(name, 5, 14)
    events.append(
        (
            kubelet_pressure_eviction(
                ns, f"{name}-n0-0", ok - timedelta(seconds=10), "ip-10-0-4-4"
            ),
            "alloy-logfmt",
        )
    )

    name = RAW_CONTAINER[2]
    ok = run(name, 5, 16, raw)
    events.append(
        (
            karpenter_disrupted(
                ns, f"{name}-n0-0", ok - timedelta(seconds=20), ok + timedelta(minutes=2)
            ),
            "alloy-logfmt",
        )
    )

    name = EVENTROUTER[2]
    ok = run(name, 6, 14)
    events.append(
        (
            scheduler_preempted(ns, f"{name}-n0-0", ok - timedelta(seconds=4), "ip-10-0-7-22"),
            "eventrouter-cri",
        )
    )
    name = EXPORTER_STDOUT[2]
    ok = run(name, 6, 16)
    events.append(
        (
            karpenter_evicted(ns, f"{name}-n0-0", ok - timedelta(seconds=8), "Drifted"),
            "exporter-stdout-docker",
        )
    )

    name = ADMIN_EVICTED[2]
    at = _t(7, 14, 0, 10)
    run(
        name,
        7,
        14,
        reasons=[
            (at - timedelta(minutes=50), f"Successfully assigned {ns}/{name}-n0-0 to ip-10-0-5-9"),
            (at, "Evicted pod: Underutilized"),
        ],
    )

    name = AGGREGATED[2]
    ok = run(name, 6, 18, write_outputs=True)
    events.append(
        (
            K8sEvent(
                ns,
                f"{name}-n0-0",
                "Evicted",
                "Evicted pod: Underutilized",
                ok + timedelta(minutes=5),
                component="karpenter",
                count=3,
                first=ok - timedelta(minutes=1),
            ),
            "alloy-logfmt",
        )
    )


def disruption_scenario() -> Scenario:
    """Only the disruption neighbours (what the end-to-end tests of the events seed)."""
    b = ScenarioBuilder()
    disruption_neighbours(b)
    b.routine_logs(*DISRUPTION_WINDOW)  # only the preempted pods' own lines are gone
    # the cluster's other events, from the hour the events are read from (EVENT_LEAD)
    b.scenario.log_lines += routine_events(
        ["gs1-production"], DISRUPTION_WINDOW[0] - timedelta(hours=1), DISRUPTION_WINDOW[1]
    )
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
