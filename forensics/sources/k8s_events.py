"""Kubernetes events in Loki (docs/configuration.md `[k8s_events]`): the pods whose disruption
Kubernetes recorded in a window, read through the Loki client's sharded scan with the same
honesty as the death signals: a shard that cannot be read is a gap (source `k8s-events`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from forensics.concurrency import Stopped
from forensics.config import Settings
from forensics.errors import SourceError
from forensics.evidence.k8s_events import EVENT_LINE_REGEX, SOURCE, is_event, parse_event
from forensics.model import Disruption, Gap, Window
from forensics.sources.logql import build_query
from forensics.sources.loki import LokiClient, ShardOutcome

log = logging.getLogger("elastic-audit")

PodKey = tuple[str, str]  # namespace, pod


@dataclass
class EventsRead:
    """What one read of the events found: each pod's disruptions (time order), the gaps, and
    how many lines the filter matched that name no pod's disruption (other objects' events)."""

    by_pod: dict[PodKey, list[Disruption]] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)
    skipped: int = 0
    unreadable: int = 0  # matched the filter, but in no shape an event shipper writes
    unreadable_example: str | None = None


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
    on_shard: Callable[[ShardOutcome], None] | None = None,
    stop: threading.Event | None = None,
    keep: Callable[[str], bool] | None = None,
) -> EventsRead:
    """Every pod disruption recorded in `window`, per (namespace, pod), earliest first; with
    `keep`, only those of the namespaces it accepts (memory follows Flyte's pods, not the
    cluster's)."""
    lk = settings.loki
    out = EventsRead()
    query = events_query(settings)
    items = loki.scan(query, window, shard=lk.shard, max_query_length=lk.max_query_length)
    try:
        for item in items:
            if stop is not None and stop.is_set():
                raise Stopped()
            if isinstance(item, ShardOutcome):
                out.gaps.extend(item.gaps(SOURCE))
                if on_shard is not None:
                    on_shard(item)
                continue
            d = parse_event(item, namespace_label=settings.k8s_events.namespace_label)
            if d is None and not is_event(item.line):
                out.unreadable += 1
                if out.unreadable_example is None:
                    out.unreadable_example = item.line[:500]
            if d is None or d.namespace is None or d.pod is None or d.at not in window:
                out.skipped += 1
                continue
            if keep is not None and not keep(d.namespace):
                out.skipped += 1
                continue
            out.by_pod.setdefault((d.namespace, d.pod), []).append(d)
    except SourceError as e:
        # A refused query or credentials fail every shard alike: the whole window is a gap of
        # this source, never a silent "no disruption".
        out.gaps.append(Gap(SOURCE, window.start, window.end, e.cause, failure=e.kind))
    finally:
        items.close()
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
        len(out.gaps),
    )
    return out
