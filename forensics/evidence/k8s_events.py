"""Kubernetes events as evidence: the disruption of a pod, as the event shippers store it in Loki.

The shapes, each checked against its writer (docs/upstream.md, "Kubernetes events"):

- Grafana Alloy `loki.source.kubernetes_events`, `log_format = "logfmt"` (its default):
  `name=<obj> kind=Pod ... sourcecomponent=karpenter reason=Disrupted type=Normal count=1
  msg="<message>" ` — every field `%s` but `count` (`%d`) and `msg` (Go's `%q`), the object's
  namespace as the stream label `namespace`, the entry's time the event's `lastTimestamp` (or
  `eventTime`) (grafana/alloy internal/component/loki/source/kubernetes_events/event_controller.go);
  an event the API server aggregated (`count` > 1) is stamped with its *last* occurrence;
- the same component with `log_format = "json"`: one JSON object of the same keys;
- kubernetes-event-exporter's Loki sink (resmoio/kubernetes-event-exporter pkg/sinks/loki.go):
  the whole `corev1.Event` as JSON (`involvedObject`, `reason`, `message`, `source`,
  `firstTimestamp`, `reportingComponent`, ...), stamped with the time it was *sent*, so the
  event's own timestamps are read from the body; its stdout sink (pkg/sinks/stdout.go) writes the
  same JSON, which a log agent tails inside a CRI or docker json-file envelope;
- heptiolabs/eventrouter (sinks/eventdata.go `EventData`, sinks/stdoutsink.go, glogsink.go):
  `{"verb":"ADDED"|"UPDATED","event":{<corev1.Event>},"old_event":{...}}` on stdout, tailed the
  same way.

What counts (docs/verdicts.md "Disruption evidence"): a Pod event whose reason and message say it
was disrupted (`POD_DISRUPTIONS`); a Node (or NodeClaim) announcement (`NODE_ANNOUNCEMENTS`)
joined to a pod through the kubelet's `Killing` event of the pod's own container on that node
(`source.host`); the kubelet's `Killing` alone never.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from datetime import datetime

from forensics.evidence.logs import parse_utc_time
from forensics.model import Disruption, LogEntry

SOURCE = "k8s-events"


@dataclass(frozen=True)
class Rule:
    """A disruption as its reporter records it: the reason, the message it must start with (None:
    any), and who gives it when the event does not say (its recorder's component)."""

    reason: str
    message: re.Pattern[str] | None
    initiator: str


# Pod events that record a disruption of that pod.
POD_DISRUPTIONS: tuple[Rule, ...] = (
    # kube-scheduler's preemption of a lower-priority victim (kubernetes
    # pkg/scheduler/framework/preemption/preemption.go: "Preempted by <ns>/<pod> on node <n>")
    Rule("Preempted", None, "default-scheduler"),
    # Karpenter's drain (kubernetes-sigs/karpenter pkg/controllers/node/termination/terminator/
    # events/events.go:33-41 EvictPod: "Evicted pod: " + the NodeClaim's DisruptionReason
    # (Underutilized, Empty, Drifted) or "Forceful Termination" (eviction.go:333-348), since
    # v1.2.0; "Evicted pod" alone in v0.32-v1.1), and the kubelet's node-pressure eviction
    # (kubernetes pkg/kubelet/eviction/eviction_manager.go evictPod: Warning "Evicted",
    # "The node was low on resource: ...")
    Rule("Evicted", None, "karpenter"),
    # Karpenter's forced delete at the node's terminationTime (events.go:43-51 DisruptPodDelete)
    Rule("Disrupted", None, "karpenter"),
    # The taint-eviction controller (kubernetes pkg/controller/tainteviction/taint_eviction.go
    # emitPodDeletionEvent "Marking for deletion Pod %s"); the same reason also records a
    # *cancelled* eviction (emitCancelPodDeletionEvent "Cancelling deletion of Pod %s"): no
    # disruption
    Rule(
        "TaintManagerEviction",
        re.compile(r"^Marking for deletion Pod "),
        "taint-eviction-controller",
    ),
    # Cluster Autoscaler's drain of a node it scales down, on each pod (kubernetes/autoscaler
    # cluster-autoscaler/core/scaledown/actuation/drain.go evictPod: Normal "ScaleDown",
    # "deleting pod for node scale down")
    Rule("ScaleDown", re.compile(r"^deleting pod for node scale down"), "cluster-autoscaler"),
)

# Node (and Karpenter NodeClaim) events that announce the end of every pod on the node; they name
# no pod, so they count only joined to a pod the kubelet then stopped on that node.
NODE_ANNOUNCEMENTS: tuple[Rule, ...] = (
    # Karpenter's AWS provider, on the NodeClaim and the Node only (aws/karpenter-provider-aws
    # pkg/controllers/interruption/events/events.go:24-42 SpotInterrupted, v0.32.0 ... v1.14.1;
    # v0.20.0 wrote "InstanceSpotInterrupted" on the Node), then TerminatingOnInterruption
    # (events.go:144-160) when it deletes the NodeClaim
    Rule("SpotInterrupted", None, "karpenter"),
    Rule("InstanceSpotInterrupted", None, "karpenter"),
    Rule("TerminatingOnInterruption", None, "karpenter"),
    # AWS Node Termination Handler (aws/aws-node-termination-handler pkg/observability/
    # k8s-events.go:68 spotITNReason, Emit on the Node, source component
    # aws-node-termination-handler)
    Rule("SpotInterruption", None, "aws-node-termination-handler"),
    # Cluster Autoscaler marking the node it scales down (drain.go / the actuator: Normal
    # "ScaleDown", "marked the node as toBeDeleted/unschedulable")
    Rule("ScaleDown", re.compile(r"^marked the node as toBeDeleted"), "cluster-autoscaler"),
)

# The kubelet stopping a container (kubernetes pkg/kubelet/kuberuntime/kuberuntime_container.go
# killContainer: Normal "Killing", "Stopping container <name>"): recorded for every container
# stop, so it never makes a disruption by itself.
KILLING = "Killing"
_STOPPING = re.compile(r"^Stopping container (\S+)")

_NODE_KINDS = frozenset({"Node", "NodeClaim"})
_REASONS = sorted({r.reason for r in (*POD_DISRUPTIONS, *NODE_ANNOUNCEMENTS)} | {KILLING})

# One RE2 line filter for Loki (`|~`), a superset of every line `read_event` accepts: the reason
# key in logfmt (`reason=Preempted `) or JSON (`"reason":"Preempted"`, inside an envelope
# `\"reason\":\"Preempted\"`).
EVENT_LINE_REGEX: str = r'reason\\?"?[=:] ?\\?"?(' + "|".join(_REASONS) + r')(\\?"|\s|$)'
_FILTER_RE = re.compile(EVENT_LINE_REGEX)
# Alloy's logfmt: `key=value ` with `msg` quoted by Go's %q.
_LOGFMT_RE = re.compile(r'(?:^|\s)([A-Za-z]+)=("(?:[^"\\]|\\.)*"|\S*)')
# A container runtime's CRI line: `<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <message>`.
_CRI_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T\S+ (?:stdout|stderr) [A-Z](?::\S*)? ")


@dataclass(frozen=True)
class ShippedEvent:
    """One Kubernetes event as a shipper stored it: its object, reason, message, reporter and
    time. `at` is the first occurrence where the body says it, else the shipper's stamp;
    `last_only` when that stamp is the last of `count` > 1 occurrences (Alloy)."""

    kind: str
    namespace: str | None
    name: str | None
    reason: str
    message: str
    component: str | None  # reportingController / reportingComponent, else source.component
    host: str | None  # source.host: the node of a kubelet's event
    at: datetime
    count: int = 1
    last_only: bool = False


@dataclass(frozen=True)
class Kill:
    """The kubelet's `Killing` of one container of a pod, on a node."""

    namespace: str
    pod: str
    container: str
    node: str
    at: datetime


@dataclass(frozen=True)
class NodeAnnouncement:
    """A Node's (or NodeClaim's) announcement that its pods will end."""

    node: str
    reason: str
    initiator: str
    at: datetime
    text: str


def event_line_matched(line: str) -> bool:
    """Whether Loki's `|~ EVENT_LINE_REGEX` filter lets `line` through."""
    return _FILTER_RE.search(line) is not None


def _go_quoted(text: str) -> str:
    """A Go `%q` string's value (JSON's escapes, or Go's `\\a \\v \\x \\U` ones)."""
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text)  # a string literal only: no code is run
        except (ValueError, SyntaxError):
            return text.strip('"')
    return value if isinstance(value, str) else text


def _logfmt(line: str) -> dict[str, str] | None:
    fields: dict[str, str] = {}
    for m in _LOGFMT_RE.finditer(line):
        key, value = m.group(1), m.group(2)
        fields[key] = _go_quoted(value) if value.startswith('"') else value
    return fields if "name" in fields and "reason" in fields else None


def _str(obj: dict[str, object], key: str) -> str | None:
    v = obj.get(key)
    return v if isinstance(v, str) and v else None


def _count(v: object) -> int:
    try:
        return int(v) if isinstance(v, (int, str)) else 1
    except ValueError:
        return 1


def _core_event(obj: dict[str, object], entry: LogEntry) -> ShippedEvent | None:
    """A `corev1.Event` as JSON (the event exporter's body, eventrouter's `event`): its own
    first occurrence (`firstTimestamp`, else `eventTime`, else `lastTimestamp`) is its time."""
    involved = obj.get("involvedObject")
    reason = _str(obj, "reason")
    if not isinstance(involved, dict) or reason is None:
        return None
    source = obj.get("source")
    src = source if isinstance(source, dict) else {}
    at = (
        parse_utc_time(obj.get("firstTimestamp"))
        or parse_utc_time(obj.get("eventTime"))
        or parse_utc_time(obj.get("lastTimestamp"))
        or entry.at
    )
    return ShippedEvent(
        kind=_str(involved, "kind") or "",
        namespace=_str(involved, "namespace"),
        name=_str(involved, "name"),
        reason=reason,
        message=_str(obj, "message") or "",
        component=_str(obj, "reportingComponent") or _str(src, "component"),
        host=_str(src, "host"),
        at=at,
        count=_count(obj.get("count")),
    )


def _alloy(fields: dict[str, object], entry: LogEntry, namespace_label: str) -> ShippedEvent:
    """Alloy's fields (logfmt or JSON): the object's name and kind, the namespace as a label, the
    entry's time the event's lastTimestamp (the last of `count` occurrences)."""
    count = _count(fields.get("count"))
    return ShippedEvent(
        kind=_str(fields, "kind") or "",
        namespace=entry.label(namespace_label),
        name=_str(fields, "name"),
        reason=_str(fields, "reason") or "",
        message=_str(fields, "msg") or "",
        component=_str(fields, "reportingcontroller") or _str(fields, "sourcecomponent"),
        host=_str(fields, "sourcehost"),
        at=entry.at,
        count=count,
        last_only=count > 1,
    )


def _strip_envelope(line: str) -> str:
    """The line a container wrote, out of a CRI (containerd, CRI-O) or docker json-file
    (`{"log": "...\\n", "stream": ..., "time": ...}`) envelope; anything else unchanged."""
    text = line.strip()
    m = _CRI_RE.match(text)
    if m:
        return text[m.end() :].strip()
    if text.startswith('{"log":') or ('"stream":' in text[:200] and '"log":' in text):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return text
        if isinstance(obj, dict) and isinstance(obj.get("log"), str) and "stream" in obj:
            return obj["log"].strip()
    return text


def read_event(entry: LogEntry, *, namespace_label: str = "namespace") -> ShippedEvent | None:
    """The Kubernetes event one shipped line records, whatever its object or reason, or None (a
    line that is no event). The shape is recognised per line: eventrouter's `{"verb", "event"}`,
    a JSON object with `involvedObject` (the event exporter's), another JSON object with `name`
    and `reason` (Alloy's json), else Alloy's logfmt; inside a CRI or docker-json envelope too."""
    line = _strip_envelope(entry.line)
    if line.startswith("{"):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        inner = obj.get("event")
        if "verb" in obj and isinstance(inner, dict):
            return _core_event(inner, entry)
        if "involvedObject" in obj:
            return _core_event(obj, entry)
        if "name" in obj and "reason" in obj:
            return _alloy(obj, entry, namespace_label)
        return None
    fields = _logfmt(line)
    if fields is None:
        return None
    return _alloy(dict(fields), entry, namespace_label)


def is_event(line: str) -> bool:
    """Whether a line is a shipped Kubernetes event in a shape this module reads (whatever its
    object or reason): a line the filter matched that is not one is shown, never dropped."""
    return read_event(LogEntry.make(0, {}, line)) is not None


def _rule(rules: tuple[Rule, ...], reason: str, message: str) -> Rule | None:
    for r in rules:
        if r.reason == reason and (r.message is None or r.message.search(message.strip())):
            return r
    return None


def disruption_of(ev: ShippedEvent) -> Disruption | None:
    """The pod disruption a Pod event records, or None (another object, a reason or message that
    is no disruption: a cancelled taint eviction, the kubelet's `Killing`)."""
    if ev.kind != "Pod":
        return None
    rule = _rule(POD_DISRUPTIONS, ev.reason, ev.message)
    if rule is None:
        return None
    return Disruption(
        source=SOURCE,
        reason=ev.reason,
        initiator=ev.component or rule.initiator,
        at=ev.at,
        namespace=ev.namespace,
        pod=ev.name,
        text=ev.message,
        last_only=ev.last_only,
    )


def kill_of(ev: ShippedEvent) -> Kill | None:
    """The kubelet's stop of one container of a pod on its node, or None."""
    m = _STOPPING.match(ev.message.strip())
    if ev.kind != "Pod" or ev.reason != KILLING or m is None:
        return None
    if not (ev.namespace and ev.name and ev.host):
        return None
    return Kill(ev.namespace, ev.name, m.group(1), ev.host, ev.at)


def announcement_of(ev: ShippedEvent) -> NodeAnnouncement | None:
    """A Node's or NodeClaim's announcement that its pods will end, or None."""
    if ev.kind not in _NODE_KINDS or ev.name is None:
        return None
    rule = _rule(NODE_ANNOUNCEMENTS, ev.reason, ev.message)
    if rule is None:
        return None
    return NodeAnnouncement(ev.name, ev.reason, ev.component or rule.initiator, ev.at, ev.message)


def parse_event(entry: LogEntry, *, namespace_label: str = "namespace") -> Disruption | None:
    """The pod disruption one shipped Kubernetes event records, or None."""
    ev = read_event(entry, namespace_label=namespace_label)
    return None if ev is None else disruption_of(ev)


# Flyte Admin's `TaskExecution.closure.reasons` (propeller `send-object-events: true`) keep only
# each event's message (`event.Note`) and creation time (flytepropeller
# pkg/controller/nodes/task/k8s/event_watcher.go, plugin_manager.go `attachRecentObjectEvents`),
# so the reason is recognised from the message its reporter writes (upstream files as cited in
# POD_DISRUPTIONS). The kubelet's "Stopping container" is no disruption by itself, and a
# cancelled taint eviction ("Cancelling deletion of Pod") none at all.
_MESSAGES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"^Deleting the pod to accommodate the terminationTime "),
        "Disrupted",
        "karpenter",
    ),
    # "Evicted pod" (Karpenter v0.32-v1.1), "Evicted pod: <reason>" (v1.2.0 on)
    (re.compile(r"^Evicted pod(?:$|: )"), "Evicted", "karpenter"),
    # "Preempted by %v/%v on node %v" (preemptor's namespace/name; some releases its pod UID)
    (re.compile(r"^Preempted by \S+(?: \S+)? on node \S+"), "Preempted", "default-scheduler"),
    (
        re.compile(r"^Marking for deletion Pod \S+"),
        "TaintManagerEviction",
        "taint-eviction-controller",
    ),
    (re.compile(r"^deleting pod for node scale down"), "ScaleDown", "cluster-autoscaler"),
    # the kubelet's node-pressure eviction (pkg/kubelet/eviction/helpers.go nodeLowMessageFmt,
    # nodeConditionMessageFmt)
    (re.compile(r"^The node (?:was low on resource|had condition): "), "Evicted", "kubelet"),
)


def reason_of_message(message: str) -> tuple[str, str] | None:
    """(reason, initiator) of a disruption event known by its message alone, or None."""
    text = message.strip()
    for pattern, reason, initiator in _MESSAGES:
        if pattern.search(text):
            return reason, initiator
    return None


# -- what sets the pod Failed before it is stopped --------------------------------------------------


# The kubelet's node-pressure eviction (pkg/kubelet/eviction/eviction_manager.go evictPod: status
# Phase Failed, Reason "Evicted") and graceful node shutdown (pkg/kubelet/nodeshutdown/
# nodeshutdown_manager.go killPods: Phase Failed unless already Succeeded, DisruptionTarget
# TerminationByKubelet) mark the pod Failed before they kill it: a single pod Flyte recorded
# SUCCEEDED was not the pod they stopped.
def fails_the_pod(d: Disruption) -> bool:
    """Whether this disruption sets its pod Failed before stopping it (the kubelet's own)."""
    if d.reason == "TerminationByKubelet":
        return True
    return d.reason == "Evicted" and (
        d.initiator == "kubelet" or d.text.startswith(("The node was low on", "The node had"))
    )
