"""The pods whose disruption Kubernetes recorded in the window, joined to swept attempts by
namespace and pod name (a PyTorchJob's replicas by their job's name, as signals are)."""

from __future__ import annotations

import threading
from collections import defaultdict

from forensics.config import Settings
from forensics.evidence.flyte_names import namespace_for
from forensics.model import AttemptRecord, Disruption, ExecutionRecord
from forensics.scan.resolve import pod_keys
from forensics.sources.k8s_events import EventsRead, PodKey


class DisruptionIndex:
    """Each disrupted pod's events, found by the namespace and pod names an attempt records.
    Unlike a signal, an event is evidence only: it never makes the scan look up a pod no swept
    execution claims (every pod of a consolidated node gets one). Thread-safe once filled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pod: dict[PodKey, list[Disruption]] = {}
        self._index: dict[tuple[str, str], list[PodKey]] = {}

    def fill(self, read: EventsRead) -> None:
        index: dict[tuple[str, str], list[PodKey]] = defaultdict(list)
        for ns, pod in read.by_pod:
            for name in pod_keys(pod):
                index[(ns, name)].append((ns, pod))
        with self._lock:
            self._by_pod, self._index = dict(read.by_pod), dict(index)

    def pods(self) -> frozenset[PodKey]:
        """The (namespace, pod) of every pod with disruption evidence in the window: where a
        sweep must look even at a task that cannot be elastic."""
        with self._lock:
            return frozenset(self._by_pod)

    def for_attempt(
        self, ex: ExecutionRecord, att: AttemptRecord, settings: Settings
    ) -> Disruption | None:
        """The earliest disruption recorded for any of the attempt's pods (in Loki's events or
        in Admin's `closure.reasons` for it), or None."""
        found = self.all_for_attempt(ex, att, settings)
        return found[0] if found else None

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
                for name in att.pods:
                    for key in self._index.get((ns, name), ()):
                        found.extend(self._by_pod[key])
        return sorted(found, key=_order)


def _order(d: Disruption) -> tuple[object, ...]:
    return (d.at, d.pod or "", d.reason, d.source)
