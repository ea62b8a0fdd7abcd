"""Kubernetes events as the collectors write them into Loki, for the sandbox (docs/upstream.md,
"Kubernetes events"):

- Grafana Alloy `loki.source.kubernetes_events` (grafana/alloy
  internal/component/loki/source/kubernetes_events/event_controller.go `parseEvent`): labels
  `namespace` (the object's), `job` (`loki.source.kubernetes_events` by default), `instance` (the
  component's id); the entry's time the event's `lastTimestamp`, else `eventTime`; the line
  `name= kind= [action=] objectAPIversion= [objectRV=] [eventRV=] [reportinginstance=]
  [reportingcontroller=] [sourcecomponent=] [sourcehost=] reason= type= [count=] msg=%q ` in
  logfmt, or those keys as one JSON object (Go's json.Marshal of a map: keys sorted, `<>&` escaped);
- kubernetes-event-exporter's Loki sink (resmoio/kubernetes-event-exporter pkg/sinks/loki.go,
  pkg/kube/event.go): the configured `streamLabels` only, the time it was sent, and the whole
  `corev1.Event` (plus `clusterName`) as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from forensics.model import rfc3339, to_ns
from forensics.sandbox.scenario import SandboxLogLine

ALLOY_JOB = "loki.source.kubernetes_events"
EXPORTER_LABELS = {"app": "kubernetes-event-exporter"}
FORMATS = ("alloy-logfmt", "alloy-json", "event-exporter")


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


def exporter_json(ev: K8sEvent, cluster: str = "") -> str:
    """kubernetes-event-exporter's body: the corev1.Event, `involvedObject` enhanced."""
    core = bool(ev.component)  # a core/v1 recorder sets the timestamps, events.k8s.io eventTime
    ts = rfc3339(ev.at.replace(microsecond=0))
    event = {
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
        "firstTimestamp": ts if core else None,
        "lastTimestamp": ts if core else None,
        "count": ev.count if core else 0,
        "type": ev.type,
        # metav1.MicroTime marshals as RFC 3339 with six fraction digits
        "eventTime": None if core else f"{ev.at:%Y-%m-%dT%H:%M:%S.%f}Z",
        "reportingComponent": ev.controller,
        "reportingInstance": "",
        "clusterName": cluster,
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
    return _go_json(event)


def event_line(ev: K8sEvent, fmt: str) -> SandboxLogLine:
    """The Loki entry `fmt` (one of FORMATS) stores for `ev`."""
    if fmt == "alloy-logfmt":
        labels = {"namespace": ev.namespace, "job": ALLOY_JOB, "instance": f"{ALLOY_JOB}.default"}
        return SandboxLogLine(to_ns(ev.at), labels, alloy_logfmt(ev))
    if fmt == "alloy-json":
        labels = {"namespace": ev.namespace, "job": ALLOY_JOB, "instance": f"{ALLOY_JOB}.default"}
        return SandboxLogLine(to_ns(ev.at), labels, alloy_json(ev))
    if fmt == "event-exporter":
        sent = ev.at + timedelta(milliseconds=800)  # the sink stamps the time it sends
        return SandboxLogLine(to_ns(sent), dict(EXPORTER_LABELS), exporter_json(ev))
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


def karpenter_evicted(ns: str, pod: str, at: datetime) -> K8sEvent:
    return K8sEvent(ns, pod, "Evicted", "Evicted pod", at, component="karpenter")


def spot_interrupted(ns: str, pod: str, at: datetime) -> K8sEvent:
    return K8sEvent(
        ns,
        pod,
        "SpotInterrupted",
        "Spot interruption warning was triggered",
        at,
        component="karpenter",
        type="Warning",
    )


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
