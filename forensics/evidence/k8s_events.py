"""Kubernetes events as evidence: the disruption of a pod, as the event shippers store it in Loki.

Three shapes, each checked against its writer (docs/upstream.md, "Kubernetes events"):

- Grafana Alloy `loki.source.kubernetes_events`, `log_format = "logfmt"` (its default):
  `name=<obj> kind=Pod ... sourcecomponent=karpenter reason=Disrupted type=Normal count=1
  msg="<message>" ` — every field `%s` but `count` (`%d`) and `msg` (Go's `%q`), the object's
  namespace as the stream label `namespace`, the entry's time the event's `lastTimestamp` (or
  `eventTime`) (grafana/alloy internal/component/loki/source/kubernetes_events/event_controller.go);
- the same component with `log_format = "json"`: one JSON object of the same keys;
- kubernetes-event-exporter's Loki sink (resmoio/kubernetes-event-exporter pkg/sinks/loki.go):
  the whole `corev1.Event` as JSON (`involvedObject`, `reason`, `message`, `source`,
  `firstTimestamp`, `reportingComponent`, ...), stamped with the time it was *sent*, so the
  event's own timestamps are read from the body.

Only events that name a Pod and whose reason is a disruption (`DISRUPTION_REASONS`) are kept.
"""

from __future__ import annotations

import ast
import json
import re

from forensics.evidence.logs import parse_utc_time
from forensics.model import Disruption, LogEntry

SOURCE = "k8s-events"

# reason -> who gives it when the event does not say (its reporting controller or source).
DISRUPTION_REASONS: dict[str, str] = {
    # kube-scheduler's preemption of a lower-priority victim
    # (kubernetes pkg/scheduler/framework/preemption/preemption.go: "Preempted by <ns>/<pod> on node <n>")
    "Preempted": "default-scheduler",
    # Karpenter's drain (sigs.k8s.io/karpenter pkg/controllers/node/termination/terminator/
    # events/events.go: EvictPod "Evicted pod", DisruptPodDelete "Deleting the pod to
    # accommodate the terminationTime ..."); the kubelet's node-pressure eviction is "Evicted" too
    "Evicted": "karpenter",
    "Disrupted": "karpenter",
    # Karpenter's AWS provider, on every pod of an interrupted spot node
    # (aws/karpenter-provider-aws pkg/controllers/interruption/events/events.go)
    "SpotInterrupted": "karpenter",
    # the taint-eviction controller ("Marking for deletion Pod ns/name")
    "TaintManagerEviction": "taint-eviction-controller",
    # the kubelet stopping a running container ("Stopping container X")
    "Killing": "kubelet",
}

# One RE2 line filter for Loki (`|~`), a superset of every line `parse_event` accepts: the reason
# key in logfmt (`reason=Preempted `) or JSON (`"reason":"Preempted"`).
EVENT_LINE_REGEX: str = r'reason"?[=:] ?"?(' + "|".join(sorted(DISRUPTION_REASONS)) + r')("|\s|$)'
_FILTER_RE = re.compile(EVENT_LINE_REGEX)
# Alloy's logfmt: `key=value ` with `msg` quoted by Go's %q.
_LOGFMT_RE = re.compile(r'(?:^|\s)([A-Za-z]+)=("(?:[^"\\]|\\.)*"|\S*)')


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


def _exporter(obj: dict[str, object], entry: LogEntry) -> Disruption | None:
    """kubernetes-event-exporter's JSON: the event itself, with `involvedObject`."""
    involved = obj.get("involvedObject")
    reason = _str(obj, "reason")
    if not isinstance(involved, dict) or involved.get("kind") != "Pod" or reason is None:
        return None
    if reason not in DISRUPTION_REASONS:
        return None
    source = obj.get("source")
    component = _str(source, "component") if isinstance(source, dict) else None
    at = (
        parse_utc_time(obj.get("firstTimestamp"))
        or parse_utc_time(obj.get("eventTime"))
        or parse_utc_time(obj.get("lastTimestamp"))
        or entry.at
    )
    return Disruption(
        source=SOURCE,
        reason=reason,
        initiator=_str(obj, "reportingComponent") or component or DISRUPTION_REASONS[reason],
        at=at,
        namespace=_str(involved, "namespace"),
        pod=_str(involved, "name"),
        text=_str(obj, "message") or "",
    )


def _alloy(fields: dict[str, object], entry: LogEntry, namespace_label: str) -> Disruption | None:
    """Alloy's fields (logfmt or JSON): the object's name and kind, the namespace as a label."""
    reason = _str(fields, "reason")
    if fields.get("kind") != "Pod" or reason not in DISRUPTION_REASONS:
        return None
    assert reason is not None
    initiator = _str(fields, "reportingcontroller") or _str(fields, "sourcecomponent")
    return Disruption(
        source=SOURCE,
        reason=reason,
        initiator=initiator or DISRUPTION_REASONS[reason],
        at=entry.at,
        namespace=entry.label(namespace_label),
        pod=_str(fields, "name"),
        text=_str(fields, "msg") or "",
    )


def is_event(line: str) -> bool:
    """Whether a line is a shipped Kubernetes event in a shape this module reads (whatever its
    object or reason): a line the filter matched that is not one is shown, never dropped."""
    text = line.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return False
        return isinstance(obj, dict) and (
            isinstance(obj.get("involvedObject"), dict) or ("name" in obj and "reason" in obj)
        )
    return _logfmt(text) is not None


def parse_event(entry: LogEntry, *, namespace_label: str = "namespace") -> Disruption | None:
    """The pod disruption one shipped Kubernetes event records, or None (another kind of object,
    a reason that is no disruption, a line that is no event). The format is recognised per
    line: a JSON object with `involvedObject` is the event exporter's, another JSON object
    Alloy's json, anything else Alloy's logfmt."""
    line = entry.line.strip()
    if line.startswith("{"):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        if "involvedObject" in obj:
            return _exporter(obj, entry)
        return _alloy(obj, entry, namespace_label)
    fields = _logfmt(line)
    if fields is None:
        return None
    return _alloy(dict(fields), entry, namespace_label)


# Flyte Admin's `TaskExecution.closure.reasons` (propeller `send-object-events: true`) keep only
# each event's message (`event.Note`) and creation time (flytepropeller
# pkg/controller/nodes/task/k8s/event_watcher.go, plugin_manager.go `attachRecentObjectEvents`),
# so the reason is recognised from the message its reporter writes (upstream files as cited in
# DISRUPTION_REASONS; the kubelet's node-pressure eviction, pkg/kubelet/eviction/helpers.go).
_MESSAGES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"^Deleting the pod to accommodate the terminationTime "),
        "Disrupted",
        "karpenter",
    ),
    (re.compile(r"^Evicted pod$"), "Evicted", "karpenter"),
    (re.compile(r"^Spot interruption warning was triggered$"), "SpotInterrupted", "karpenter"),
    # "Preempted by %v/%v on node %v" (preemptor's namespace/name; some releases its pod UID)
    (re.compile(r"^Preempted by \S+(?: \S+)? on node \S+"), "Preempted", "default-scheduler"),
    (
        re.compile(r"^Marking for deletion Pod \S+"),
        "TaintManagerEviction",
        "taint-eviction-controller",
    ),
    (re.compile(r"^Stopping container \S+"), "Killing", "kubelet"),
    (re.compile(r"^The node was low on resource: "), "Evicted", "kubelet"),
)


def reason_of_message(message: str) -> tuple[str, str] | None:
    """(reason, initiator) of a disruption event known by its message alone, or None."""
    text = message.strip()
    for pattern, reason, initiator in _MESSAGES:
        if pattern.search(text):
            return reason, initiator
    return None
