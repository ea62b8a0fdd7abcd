"""The pods whose disruption Kubernetes recorded in the window, joined to swept attempts by
namespace and pod name (a PyTorchJob's replicas by their job's name, as signals are)."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta

from forensics.config import Settings
from forensics.detect import wrong_join
from forensics.evidence.flyte_names import namespace_for
from forensics.model import AttemptRecord, Disruption, ExecutionRecord, Gap, Window
from forensics.scan.resolve import pod_keys
from forensics.scan.source_gaps import blind_gap, events_gaps
from forensics.sources import Sources
from forensics.sources.k8s_events import EventsRead, PodKey, events_client, read_disruptions


class DisruptionIndex:
    """Each disrupted pod's events, found by the namespace and pod names an attempt records.
    Unlike a signal, an event is evidence only: it never makes the scan look up a pod no swept
    execution claims (every pod of a consolidated node gets one). Thread-safe once filled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pod: dict[PodKey, list[Disruption]] = {}
        self._index: dict[tuple[str, str], list[PodKey]] = {}

    def fill(self, *reads: EventsRead) -> None:
        """Index what each source read (events in Loki, Prometheus' conditions)."""
        by_pod: dict[PodKey, list[Disruption]] = defaultdict(list)
        for read in reads:
            for key, found in read.by_pod.items():
                by_pod[key].extend(found)
        index: dict[tuple[str, str], list[PodKey]] = defaultdict(list)
        for ns, pod in by_pod:
            for name in pod_keys(pod):
                index[(ns, name)].append((ns, pod))
        with self._lock:
            self._by_pod, self._index = dict(by_pod), dict(index)

    def pods(self) -> frozenset[PodKey]:
        """The (namespace, pod) of every pod with disruption evidence in the window: where a
        sweep must look even at a task that cannot be elastic."""
        with self._lock:
            return frozenset(self._by_pod)

    def for_attempt(
        self, ex: ExecutionRecord, att: AttemptRecord, settings: Settings
    ) -> Disruption | None:
        """The earliest disruption recorded for any of the attempt's pods (in Loki's events or
        in Admin's `closure.reasons` for it), or None. One that contradicts the attempt's success
        (`detect.wrong_join`: another pod's) is chosen only when no other evidence exists, so a
        wrong join never hides a genuine disruption recorded later."""
        found = self.all_for_attempt(ex, att, settings)
        fitting = [d for d in found if not wrong_join(att, d)]
        return (fitting or found or [None])[0]

    def all_for_attempt(
        self, ex: ExecutionRecord, att: AttemptRecord, settings: Settings
    ) -> list[Disruption]:
        """Every disruption recorded for the attempt's pods, earliest first."""
        found: list[Disruption] = list(att.disruptions)
        if self._index:
            ref = ex.ref
            ns = att.namespace or namespace_for(
                ref.project, ref.domain, settings.flyte.namespace_template
            )
            with self._lock:
                # a replica is found by its own name and by its job's: each pod's once
                keys = {k: None for name in att.pods for k in self._index.get((ns, name), ())}
                for key in keys:
                    found.extend(self._by_pod[key])
        return sorted(found, key=_order)


def _order(d: Disruption) -> tuple[object, ...]:
    return (d.at, d.pod or "", d.reason, d.source)


# A pod is disrupted before it ends, by up to its termination grace period: an attempt that ended
# early in the window may have been disrupted shortly before it (docs/verdicts.md).
EVENT_LEAD = timedelta(hours=1)


def disruption_sources_on(settings: Settings) -> bool:
    """Whether a disruption source beside Admin's reasons is configured."""
    return settings.k8s_events.enabled or settings.prometheus.url is not None


def disruption_reads(
    sources: Sources,
    window: Window,
    stop: threading.Event | None = None,
    keep: Callable[[str], bool] | None = None,
) -> list[EventsRead]:
    """Read every configured disruption source over `window`, from `EVENT_LEAD` before its
    start (each with its own gaps): the pods with disruption evidence, for the scan, `show` and a
    sweep that narrows its listings to where evidence points (`DisruptionIndex.pods`). `keep`
    says which namespaces matter (the scan: Flyte's), so memory follows Flyte's pods."""
    settings = sources.settings
    window = Window(window.start - EVENT_LEAD, window.end)
    reads = []
    if settings.k8s_events.enabled:
        client, own = events_client(settings, sources.loki)
        try:
            reads.append(read_disruptions(client, settings, window, stop=stop, keep=keep))
        finally:
            if own:
                client.close()
    if settings.prometheus.url is not None:
        from forensics.sources.prometheus import PrometheusClient, read_conditions

        prom = PrometheusClient(settings.prometheus)
        try:
            reads.append(read_conditions(prom, window, keep))
        finally:
            prom.close()
    return reads


def blind_events_gaps(reads: list[EventsRead], window: Window) -> list[Gap]:
    """A gap for each events read whose selector matched no stream at all, for a window in which
    Flyte Admin shows attempts ran (the caller's to know): blind, never quiet."""
    return [blind_gap(r, window) for r in reads if r.selector_empty]


def pods_with_disruption_evidence(
    sources: Sources,
    window: Window,
    stop: threading.Event | None = None,
    keep: Callable[[str], bool] | None = None,
) -> tuple[frozenset[PodKey], list[Gap]]:
    """The (namespace, pod) of every pod a configured disruption source (events in Loki,
    Prometheus) names in `window`, and the gaps of the read: where a sweep that lists only
    elastic tasks' attempts must also look. Admin's `closure.reasons` come with the attempts
    themselves, so they cannot point a sweep anywhere before it lists them."""
    reads = disruption_reads(sources, window, stop, keep)
    index = DisruptionIndex()
    index.fill(*reads)
    return index.pods(), [g for read in reads for g in events_gaps(read)]
