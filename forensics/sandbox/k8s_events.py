"""Kubernetes events as the collectors write them into Loki, for the sandbox.

`event_line(ev, fmt)` is one event as one collector stores it: Grafana Alloy's
`loki.source.kubernetes_events` (logfmt or JSON, also under the k8s-monitoring chart's labels),
kubernetes-event-exporter's Loki sink or its stdout shipped in a CRI or docker envelope, and
eventrouter's stdout. The other functions build the events each writer records (Karpenter, its
AWS provider, the Node Termination Handler, Cluster Autoscaler, the taint-eviction controller,
the kubelet, the scheduler); `routine_events` is the cluster's everyday traffic. An aggregated
event (`count` > 1) carries its first and last occurrence. Where each shape comes from:
docs/upstream.md, "Kubernetes events" under "The sandbox servers"; what the tool reads from
them: "Kubernetes events and disruption conditions" there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from forensics.model import rfc3339, to_ns
from forensics.sandbox.scenario import SandboxLogLine

ALLOY_JOB = "loki.source.kubernetes_events"
EXPORTER_LABELS = {"app": "kubernetes-event-exporter"}
K8S_MONITORING_JOB = "integrations/kubernetes/eventhandler"
FORMATS = (
    "alloy-logfmt",
    "alloy-json",
    "event-exporter",
    "k8s-monitoring",
    "exporter-stdout-cri",
    "exporter-stdout-docker",
    "eventrouter-cri",
)
# The log agent's labels for a collector's own pod (its stdout is a container log like any other).
EXPORTER_POD = {"namespace": "monitoring", "pod": "event-exporter-6d9f7c-2kq8z",
                "container": "event-exporter"}  # fmt: skip
EVENTROUTER_POD = {"namespace": "kube-system", "pod": "eventrouter-5b8c9d-x7w2p",
                   "container": "kube-eventrouter"}  # fmt: skip


@dataclass(frozen=True)
class K8sEvent:
    """One Kubernetes event about a pod, as recorded by its reporter."""

    namespace: str
    pod: str
    reason: str
    message: str
    at: datetime
    component: str = ""  # source.component (core/v1 recorders: karpenter, kubelet)
    controller: str = ""  # reportingController (events.k8s.io recorders: default-scheduler)
    host: str = ""
    type: str = "Normal"
    kind: str = "Pod"
    count: int = 1
    action: str = ""
    first: datetime | None = None  # the first occurrence of an aggregated event (count > 1)


def _go_json(obj: object) -> str:
    """Go's encoding/json: compact, `<`, `>` and `&` escaped (HTML-safe by default)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _alloy_fields(ev: K8sEvent) -> list[tuple[str, object]]:
    fields: list[tuple[str, object]] = [("name", ev.pod), ("kind", ev.kind)]
    if ev.action:
        fields.append(("action", ev.action))
    fields += [("objectAPIversion", "v1"), ("objectRV", "48213377"), ("eventRV", "48213391")]
    if ev.controller:
        fields.append(("reportingcontroller", ev.controller))
    if ev.component:
        fields.append(("sourcecomponent", ev.component))
    if ev.host:
        fields.append(("sourcehost", ev.host))
    fields += [("reason", ev.reason), ("type", ev.type)]
    if ev.count:
        fields.append(("count", ev.count))
    fields.append(("msg", ev.message))
    return fields


def alloy_logfmt(ev: K8sEvent) -> str:
    """Alloy's default line: `key=value ` per field, `msg` quoted as Go's %q does."""
    out = []
    for key, value in _alloy_fields(ev):
        text = json.dumps(value, ensure_ascii=False) if key == "msg" else str(value)
        out.append(f"{key}={text} ")
    return "".join(out)


def alloy_json(ev: K8sEvent) -> str:
    """Alloy with `log_format = "json"`: the same fields as one JSON object."""
    return _go_json(dict(sorted(_alloy_fields(ev))))


def core_event(ev: K8sEvent) -> dict[str, object]:
    """The corev1.Event as the API serves it (what the exporter and eventrouter marshal)."""
    core = bool(ev.component)  # a core/v1 recorder sets the timestamps, events.k8s.io eventTime
    ts = rfc3339(ev.at.replace(microsecond=0))
    first = rfc3339((ev.first or ev.at).replace(microsecond=0))
    event: dict[str, object] = {
        "metadata": {
            "name": f"{ev.pod}.{to_ns(ev.at):x}",
            "namespace": ev.namespace,
            "uid": "5b0c2f3e-1d7a-4f7e-9a51-3c2b8d4e6f10",
            "resourceVersion": "48213391",
            "creationTimestamp": ts,
        },
        "reason": ev.reason,
        "message": ev.message,
        "source": {"component": ev.component, "host": ev.host} if core else {},
        "firstTimestamp": first if core else None,
        "lastTimestamp": ts if core else None,
        "count": ev.count if core else 0,
        "type": ev.type,
        # metav1.MicroTime marshals as RFC 3339 with six fraction digits
        "eventTime": None if core else f"{ev.at:%Y-%m-%dT%H:%M:%S.%f}Z",
        "reportingComponent": ev.controller,
        "reportingInstance": "",
        "involvedObject": {
            "kind": ev.kind,
            "namespace": ev.namespace,
            "name": ev.pod,
            "uid": "0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f",
            "apiVersion": "v1",
            "resourceVersion": "48213377",
        },
    }
    if ev.action:
        event["action"] = ev.action
    return event


def exporter_json(ev: K8sEvent, cluster: str = "") -> str:
    """kubernetes-event-exporter's body: the corev1.Event, `involvedObject` enhanced."""
    event: dict[str, object] = {}
    for k, v in core_event(ev).items():
        if k == "involvedObject":  # the EnhancedEvent's ClusterName comes before it
            event["clusterName"] = cluster
        event[k] = v
    return _go_json(event)


def eventrouter_json(ev: K8sEvent) -> str:
    """eventrouter's `EventData` (sinks/eventdata.go): ADDED, or UPDATED with the old event for
    a repeat (count > 1)."""
    if ev.count > 1:
        old = core_event(K8sEvent(**{**ev.__dict__, "count": ev.count - 1}))
        return _go_json({"verb": "UPDATED", "event": core_event(ev), "old_event": old})
    return _go_json({"verb": "ADDED", "event": core_event(ev)})


def cri(at: datetime, line: str) -> str:
    """containerd's CRI log line: `<RFC3339Nano> stdout F <line>`."""
    return f"{at:%Y-%m-%dT%H:%M:%S.%f}000Z stdout F {line}"


def docker_json(at: datetime, line: str) -> str:
    """docker's json-file log line (the line with its newline, the stream, the time)."""
    return _go_json({"log": line + "\n", "stream": "stdout", "time": f"{at:%Y-%m-%dT%H:%M:%S.%f}Z"})


def event_line(ev: K8sEvent, fmt: str) -> SandboxLogLine:
    """The Loki entry `fmt` (one of FORMATS) stores for `ev` (Loki keeps no empty label: a
    cluster-scoped object's `namespace`)."""
    line = _event_line(ev, fmt)
    return SandboxLogLine(line.ts_ns, {k: v for k, v in line.labels.items() if v}, line.line)


def _event_line(ev: K8sEvent, fmt: str) -> SandboxLogLine:
    if fmt == "alloy-logfmt":
        labels = {"namespace": ev.namespace, "job": ALLOY_JOB, "instance": f"{ALLOY_JOB}.default"}
        return SandboxLogLine(to_ns(ev.at), labels, alloy_logfmt(ev))
    if fmt == "alloy-json":
        labels = {"namespace": ev.namespace, "job": ALLOY_JOB, "instance": f"{ALLOY_JOB}.default"}
        return SandboxLogLine(to_ns(ev.at), labels, alloy_json(ev))
    sent = ev.at + timedelta(milliseconds=800)  # a sink stamps (or prints at) the time it sends
    if fmt == "event-exporter":
        return SandboxLogLine(to_ns(sent), dict(EXPORTER_LABELS), exporter_json(ev))
    if fmt == "k8s-monitoring":
        labels = {"namespace": ev.namespace, "job": K8S_MONITORING_JOB,
                  "instance": "cluster_events.cluster_events", "source": "kubernetes-events",
                  "kind": ev.kind, "level": ev.type, "service_name": K8S_MONITORING_JOB,
                  "reason": ev.reason}  # fmt: skip
        return SandboxLogLine(to_ns(ev.at), labels, alloy_logfmt(ev))
    if fmt == "exporter-stdout-cri":
        return SandboxLogLine(to_ns(sent), dict(EXPORTER_POD), cri(sent, exporter_json(ev)))
    if fmt == "exporter-stdout-docker":
        return SandboxLogLine(to_ns(sent), dict(EXPORTER_POD), docker_json(sent, exporter_json(ev)))
    if fmt == "eventrouter-cri":
        return SandboxLogLine(to_ns(sent), dict(EVENTROUTER_POD), cri(sent, eventrouter_json(ev)))
    raise ValueError(f"unknown event format {fmt!r}")


# What each disruption's reporter writes (the upstream files are cited in
# forensics/evidence/k8s_events.py DISRUPTION_REASONS).
def karpenter_disrupted(ns: str, pod: str, at: datetime, node_deadline: datetime) -> K8sEvent:
    return K8sEvent(
        ns,
        pod,
        "Disrupted",
        # Go's %v of a time.Time
        f"Deleting the pod to accommodate the terminationTime "
        f"{node_deadline:%Y-%m-%d %H:%M:%S} +0000 UTC of the node. The "
        "pod was granted 30 seconds of grace-period of its 30 terminationGracePeriodSeconds. "
        "This bypasses the PDB of the pod and the do-not-disrupt annotation.",
        at,
        component="karpenter",
    )


def karpenter_evicted(
    ns: str, pod: str, at: datetime, reason: str | None = "Forceful Termination"
) -> K8sEvent:
    """Karpenter's EvictPod: "Evicted pod: " + the NodeClaim's disruption reason (Underutilized,
    Empty, Drifted) or "Forceful Termination" (since v1.2.0); `reason=None`: "Evicted pod" alone
    (v0.32 ... v1.1)."""
    message = "Evicted pod" if reason is None else f"Evicted pod: {reason}"
    return K8sEvent(ns, pod, "Evicted", message, at, component="karpenter")


def node_spot_interrupted(node: str, nodeclaim: str, at: datetime) -> list[K8sEvent]:
    """Karpenter's AWS provider on a spot interruption: SpotInterrupted on the NodeClaim and the
    Node, never on a pod, then TerminatingOnInterruption on both as it deletes the NodeClaim."""
    warn = "Spot interruption warning was triggered"
    return [
        K8sEvent("", nodeclaim, "SpotInterrupted", warn, at, component="karpenter",
                 kind="NodeClaim", type="Warning"),
        K8sEvent("", node, "SpotInterrupted", warn, at, component="karpenter", kind="Node",
                 type="Warning"),
        K8sEvent("", nodeclaim, "TerminatingOnInterruption",
                 "Interruption triggered termination for the NodeClaim", at, component="karpenter",
                 kind="NodeClaim", type="Warning"),
        K8sEvent("", node, "TerminatingOnInterruption",
                 "Interruption triggered termination for the Node", at, component="karpenter",
                 kind="Node", type="Warning"),
    ]  # fmt: skip


def nth_spot_interruption(node: str, at: datetime, deadline: datetime) -> K8sEvent:
    """AWS Node Termination Handler (IMDS mode) on the Node it drains: reason SpotInterruption,
    message the interruption notice's description."""
    return K8sEvent("", node, "SpotInterruption",
                    f"Spot ITN received. Instance will be interrupted at {rfc3339(deadline)} \n",
                    at, component="aws-node-termination-handler", host=node, kind="Node")  # fmt: skip


def autoscaler_scale_down(ns: str, pod: str, at: datetime) -> K8sEvent:
    """Cluster Autoscaler's drain, on each pod of the node it removes."""
    return K8sEvent(ns, pod, "ScaleDown", "deleting pod for node scale down", at,
                    component="cluster-autoscaler")  # fmt: skip


def taint_eviction(ns: str, pod: str, at: datetime, *, cancelled: bool = False) -> K8sEvent:
    """The taint-eviction controller's deletion of a pod, or its cancellation: the same reason."""
    verb = "Cancelling deletion of Pod" if cancelled else "Marking for deletion Pod"
    return K8sEvent(ns, pod, "TaintManagerEviction", f"{verb} {ns}/{pod}", at,
                    component="taint-eviction-controller")  # fmt: skip


def kubelet_pressure_eviction(ns: str, pod: str, at: datetime, host: str) -> K8sEvent:
    """The kubelet's node-pressure eviction (Warning "Evicted"), the pod set Failed first."""
    return K8sEvent(ns, pod, "Evicted",
                    "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
                    "91Mi. Container main was using 14Gi, request is 8Gi, has larger consumption "
                    "of memory. ", at, component="kubelet", host=host, type="Warning")  # fmt: skip


def scheduler_preempted(ns: str, pod: str, at: datetime, node: str) -> K8sEvent:
    return K8sEvent(
        ns,
        pod,
        "Preempted",
        # kubernetes pkg/scheduler/framework/preemption/preemption.go: the preemptor's ns/name
        f"Preempted by {ns}/llm-serve-7f9c4d-xk2p9 on node {node}",
        at,
        controller="default-scheduler",
        action="Preempting",
    )


def kubelet_killing(ns: str, pod: str, container: str, at: datetime, host: str) -> K8sEvent:
    return K8sEvent(
        ns, pod, "Killing", f"Stopping container {container}", at, component="kubelet", host=host
    )


def routine_events(
    namespaces: list[str], start: datetime, end: datetime, every: timedelta = timedelta(hours=1)
) -> list[SandboxLogLine]:
    """A cluster's ordinary events (the kubelet starting a container of its other pods), in
    every namespace, from `start` to `end`: a real events stream is never silent for an hour,
    so a selector that returns nothing at all there is blind, not quiet (docs/verdicts.md)."""
    out = []
    for ns in namespaces:
        at = start + timedelta(minutes=3)
        while at < end:
            ev = K8sEvent(ns, "feature-store-0", "Started", "Started container feature-store", at,
                          component="kubelet", host="ip-10-0-1-1")  # fmt: skip
            out.append(event_line(ev, "alloy-logfmt"))
            at += every
    return out
