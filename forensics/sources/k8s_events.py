"""Kubernetes events in Loki (docs/configuration.md `[k8s_events]`): the pods whose disruption
Kubernetes recorded in a window, read through the Loki client's shards with the same honesty as
the death signals: a part that cannot be read is returned as failed (the scan makes it a gap of
source `k8s-events`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

from forensics.concurrency import Stopped
from forensics.config import Settings
from forensics.errors import SourceError
from forensics.evidence.k8s_events import (
    EVENT_LINE_REGEX,
    SOURCE,
    Kill,
    NodeAnnouncement,
    announcement_of,
    disruption_of,
    kill_of,
    read_event,
)
from forensics.model import Disruption, FailedPart, LogEntry, ShardRead, Window, rfc3339
from forensics.sources.logql import build_query
from forensics.sources.loki import LokiClient
from forensics.sources.loki_labels import LabelCensus

log = logging.getLogger("elastic-audit")

PodKey = tuple[str, str]  # namespace, pod


@dataclass
class EventsRead:
    """What one read of the events found: each pod's disruptions (time order), the parts of the
    window it could not read (`failed`) and the configured labels the matched lines lack
    (`label_missing`, one text each: the scan makes both gaps of `source` over `window`), and
    how many lines the filter matched that name no pod's disruption (other objects' events)."""

    by_pod: dict[PodKey, list[Disruption]] = field(default_factory=dict)
    failed: list[FailedPart] = field(default_factory=list)
    label_missing: list[str] = field(default_factory=list)
    source: str = SOURCE
    window: Window | None = None
    skipped: int = 0
    unreadable: int = 0  # matched the filter, but in no shape an event shipper writes
    unreadable_example: str | None = None
    lines: int = 0  # lines the query returned
    # The selector matches no stream at all in the window (asked only when no line came back):
    # blind, not quiet, wherever Flyte Admin shows attempts ran (`blind_gap`).
    selector_empty: bool = False
    # Pod events whose namespace the configured label should give and does not (Alloy's shapes
    # take it from the stream label `[k8s_events] namespace_label`): a wrong label name, a gap.
    census: LabelCensus | None = None
    selector: str = ""


def events_query(settings: Settings) -> str:
    """The configured events selector and one line filter for the disruption reasons."""
    return build_query(settings.k8s_events.selector, [("|~", EVENT_LINE_REGEX)])


def events_client(settings: Settings, loki: LokiClient) -> tuple[LokiClient, bool]:
    """The client that reads the events: Loki's own, or one for `[k8s_events] url` (with the
    same credentials, or the user:password that URL carried); True when it is a new client the
    caller must close."""
    events = settings.k8s_events
    url = events.url
    if url is None or (url == settings.loki.url and events.password is None):
        return loki, False
    reader = replace(settings.loki, url=url)
    if events.password is not None:
        reader = replace(
            reader, bearer_token=None, username=events.username, password=events.password
        )
    return LokiClient(reader, workers=settings.workers), True


def read_disruptions(
    loki: LokiClient,
    settings: Settings,
    window: Window,
    *,
    stop: threading.Event | None = None,
    keep: Callable[[str], bool] | None = None,
) -> EventsRead:
    """Every pod disruption recorded in `window`, per (namespace, pod), earliest first; with
    `keep`, only those of the namespaces it accepts (memory follows Flyte's pods, not the
    cluster's)."""
    lk = settings.loki
    out = EventsRead(
        census=LabelCensus(
            {"namespace_label": settings.k8s_events.namespace_label}, section="[k8s_events]"
        ),
        window=window,
    )
    query = events_query(settings)
    items = loki.read_shards(query, window, shard=lk.shard, max_query_length=lk.max_query_length)
    kills: list[Kill] = []
    announced: dict[str, list[NodeAnnouncement]] = {}
    try:
        for item in items:
            if stop is not None and stop.is_set():
                raise Stopped()
            if isinstance(item, ShardRead):
                out.failed.extend(item.failed)
                continue
            _take(out, item, settings, window, keep, kills, announced)
    except SourceError as e:
        # A refused query or credentials fail every shard alike: the whole window is a gap of
        # this source, never a silent "no disruption".
        out.failed.append(FailedPart(window.start, window.end, e.cause, e.kind))
    finally:
        items.close()
    if out.census is not None:
        out.label_missing.extend(out.census.missing_texts())
    for d in joined(kills, announced, window):
        out.by_pod.setdefault((d.namespace or "", d.pod or ""), []).append(d)
    out.selector = settings.k8s_events.selector
    if out.lines == 0 and not out.failed and not out.label_missing:
        try:
            out.selector_empty = not loki.holds_any(out.selector, window)
        except SourceError as e:
            out.failed.append(FailedPart(window.start, window.end, e.cause, e.kind))
    for events in out.by_pod.values():
        events.sort(key=lambda d: (d.at, d.reason))
    if out.unreadable:
        # e.g. the event exporter with a custom `layout`: its disruptions cannot be seen
        log.warning(
            "Kubernetes events: %d line(s) matched %s but are in no shape an event shipper "
            "writes (docs/configuration.md [k8s_events]); the first: %s",
            out.unreadable,
            query,
            out.unreadable_example,
        )
    log.info(
        "Kubernetes events %s: %d disrupted pod(s), %d other line(s), %d gap(s)",
        query,
        len(out.by_pod),
        out.skipped,
        len(out.failed) + len(out.label_missing),
    )
    return out


def _take(
    out: EventsRead,
    item: LogEntry,
    settings: Settings,
    window: Window,
    keep: Callable[[str], bool] | None,
    kills: list[Kill],
    announced: dict[str, list[NodeAnnouncement]],
) -> None:
    """File one line the query returned: a pod's disruption, a node's announcement, the
    kubelet's stop of a container (for the join), another event (skipped), or no event."""
    out.lines += 1
    ev = read_event(item, namespace_label=settings.k8s_events.namespace_label)
    if ev is None:
        out.unreadable += 1
        if out.unreadable_example is None:
            out.unreadable_example = item.line[:500]
        return
    if ev.kind == "Pod" and ev.namespace is None and out.census is not None:
        out.census.saw(item.labels)  # only Alloy's shapes read the namespace from a label
    a = announcement_of(ev)
    if a is not None:
        announced.setdefault(a.node, []).append(a)
        return
    k = kill_of(ev)
    if k is not None:
        if keep is None or keep(k.namespace):
            kills.append(k)
        return
    d = disruption_of(ev)
    if d is None or d.namespace is None or d.pod is None or d.at not in window:
        out.skipped += 1
    elif keep is not None and not keep(d.namespace):
        out.skipped += 1
    else:
        out.by_pod.setdefault((d.namespace, d.pod), []).append(d)


# A node announcement reaches the pods the kubelet stops on that node within this time after it
# (a spot interruption's two-minute warning, Karpenter's and NTH's drain, Cluster Autoscaler's).
JOIN_HORIZON = timedelta(minutes=10)
# Containers that are a Flyte task's own: the container plugin names its container after the pod
# (flyteorg/flyte v1.16.8 flyteplugins/go/tasks/pluginmachinery/flytek8s/container_helper.go:243,
# `GetGeneratedName()`); a PyTorchJob's replica container is `pytorch`. Any other (an uploader,
# a log or mesh sidecar) is a sidecar: its stop is not the task's.
TASK_CONTAINERS = frozenset({"pytorch"})


def task_container(kill: Kill) -> bool:
    """Whether the kubelet stopped the task's own container, not a sidecar."""
    return kill.container == kill.pod or kill.container in TASK_CONTAINERS


def joined(
    kills: list[Kill], announced: dict[str, list[NodeAnnouncement]], window: Window
) -> list[Disruption]:
    """Node announcements joined to pods through the node the kubelet's `Killing` names: the
    task container of a pod stopped on a node within `JOIN_HORIZON` after the node announced its
    end is disrupted by that announcement's initiator, at the stop's time. A `Killing` with no
    announcement is no disruption (every container stop records one)."""
    found: dict[tuple[str, str], Disruption] = {}
    for k in sorted(kills, key=lambda k: k.at):
        if not task_container(k) or k.at not in window or (k.namespace, k.pod) in found:
            continue
        # the node's first announcement before the stop (Karpenter's SpotInterrupted, then its
        # TerminatingOnInterruption: one disruption, by the first)
        near = [a for a in announced.get(k.node, ()) if a.at <= k.at <= a.at + JOIN_HORIZON]
        for a in sorted(near, key=lambda a: (a.at, a.reason))[:1]:
            found[(k.namespace, k.pod)] = Disruption(
                source=SOURCE,
                reason=a.reason,
                initiator=a.initiator,
                at=k.at,
                namespace=k.namespace,
                pod=k.pod,
                text=(
                    f"{a.reason} on node {a.node} at {rfc3339(a.at)}: {a.text}; the kubelet "
                    f"stopped container {k.container} at {rfc3339(k.at)}"
                ),
            )
    return list(found.values())


# grafana/k8s-monitoring-helm charts/k8s-monitoring/charts/feature-cluster-events/values.yaml:43
# `jobLabel: "integrations/kubernetes/eventhandler"` (Alloy's loki.source.kubernetes_events,
# `log_format = "logfmt"`, `job_name` set to it).
K8S_MONITORING_SELECTOR = '{job="integrations/kubernetes/eventhandler"}'
