"""The join of signalled pods to swept attempts: by project, domain and pod name, each pod once."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence

from forensics.evidence.flyte_names import parse_pod_name
from forensics.model import AttemptRecord, AttemptRef, ExecutionRecord, ExecutionRef, SignalHit
from forensics.scan.resolve import pod_keys

PodKey = tuple[str, str]  # namespace, pod


class PodIndex:
    """The signalled pods in scope, found by the (project, domain, name) an attempt records.

    A pod belongs to one attempt: the first execution that claims it gets it, and the pods no
    swept execution claims are left for `resolve`. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hits: dict[PodKey, SignalHit] = {}
        self._index: dict[tuple[str, str, str], list[PodKey]] = {}
        self._matched: set[PodKey] = set()
        self._nodes: dict[tuple[str, str, str], frozenset[str]] = {}

    def fill(self, signalled: Iterable[tuple[str, str, SignalHit]]) -> None:
        """Index each (project, domain, hit); a PyTorchJob replica by its job's name too."""
        signalled = list(signalled)
        index: dict[tuple[str, str, str], list[PodKey]] = defaultdict(list)
        hits: dict[PodKey, SignalHit] = {}
        for project, domain, hit in signalled:
            key = (hit.namespace, hit.pod)
            hits[key] = hit
            for name in pod_keys(hit.pod):
                index[(project, domain, name)].append(key)
        with self._lock:
            self._hits, self._index = hits, dict(index)
        self.point((project, domain, hit.pod) for project, domain, hit in signalled)

    def point(self, pods: Iterable[tuple[str, str, str]]) -> None:
        """Pods the evidence names, as (project, domain, pod): the sweep lists the nodes their
        names may belong to, whatever their task. Death signals are added by `fill`; another
        source of evidence (pods with disruption events) adds its pods here, before the signals
        are final."""
        nodes: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for project, domain, pod in pods:
            parsed = parse_pod_name(pod)
            for execution, node_id, _ in parsed.candidates if parsed else ():
                nodes[(project, domain, execution)].add(node_id)
        with self._lock:
            for k, v in nodes.items():
                self._nodes[k] = self._nodes.get(k, frozenset()) | v

    def points_at(self, ref: ExecutionRef) -> frozenset[str]:
        """The unique node ids of `ref` that a pod the evidence names may belong to (every split
        of the name Flyte's naming allows): the sweep lists these nodes whatever their task."""
        with self._lock:
            return self._nodes.get((ref.project, ref.domain, ref.name), frozenset())

    def hit(self, key: PodKey) -> SignalHit:
        """The signal of an indexed pod."""
        return self._hits[key]

    def match(
        self, ex: ExecutionRecord, attempts: Sequence[AttemptRecord]
    ) -> dict[AttemptRef, SignalHit]:
        """The earliest signal of each attempt whose pods logged one (docs/verdicts.md)."""
        if not self._index:
            return {}
        project, domain = ex.ref.project, ex.ref.domain
        out: dict[AttemptRef, SignalHit] = {}
        with self._lock:
            for att in attempts:
                for name in att.pods:
                    for key in self._index.get((project, domain, name), ()):
                        if key in self._matched:
                            continue  # a pod belongs to one attempt: the first that claims it
                        self._matched.add(key)
                        hit = self._hits[key]
                        best = out.get(att.ref)
                        if best is None or (hit.at, hit.pod) < (best.at, best.pod):
                            out[att.ref] = hit
        return out

    def unclaimed(self) -> list[PodKey]:
        """The signalled pods no swept execution claimed, in order."""
        with self._lock:
            return sorted(k for k in self._hits if k not in self._matched)
