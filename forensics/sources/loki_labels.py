"""Whether the lines a query matched carry the label names the config says they do.

A wrong label name (`[loki] pod_label = "k8s_pod_name"` against streams labelled `pod`) does not
make Loki fail: the selector still matches, every line comes back, and none of them can be
attributed to a pod. So the readers count, per configured label, the matched streams that carry
it, and a label that some matched streams lack is a gap naming the setting, how many streams lack
it and the label names those streams carry instead (docs/configuration.md, "Label names").

One census per reader: the death-signal reader (`forensics/scan/signals.py`) and any other reader
of labelled lines (the Kubernetes events in Loki) builds one with the settings it reads labels by.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("elastic-audit")

# Labels Loki itself adds to results (docs/upstream.md, "Labels Loki adds"): `service_name`
# (discovered at ingestion), `detected_level` (structured metadata merged into the labels),
# `__tenant_id__` (multi-tenant queries). They say nothing of the pod and split one stream in
# several; a census leaves them out.
LOKI_ADDED_LABELS = frozenset({"service_name", "detected_level", "__tenant_id__"})
MAX_NAMES = 12  # label names listed in a gap's text, at most


@dataclass(frozen=True)
class MissingLabel:
    """A configured label that `lacking` of `streams` matched streams do not carry; `carried`:
    the label names those streams carry instead (Loki's own left out)."""

    setting: str  # "pod_label"
    label: str  # "k8s_pod_name"
    lacking: int
    streams: int
    carried: tuple[str, ...]

    def text(self, section: str) -> str:
        names = list(self.carried[:MAX_NAMES])
        more = len(self.carried) - len(names)
        they = ", ".join(names) + (f" (and {more} more)" if more > 0 else "") or "no label"
        if self.lacking == self.streams:
            head = f"0 of {self.streams} matched streams carry it"
        else:
            head = f"{self.lacking} of {self.streams} matched streams lack it"
        verb = "they carry" if self.lacking > 1 else "it carries"
        return (
            f"{section} {self.setting} = {self.label}: {head}; {verb} {they}. Lines without it "
            "cannot be attributed to a pod; set the label name those streams use"
        )


class LabelCensus:
    """Counts the distinct matched streams (label sets) and, per configured label, those that
    lack it. `labels`: setting name -> label name (`{"pod_label": "pod", ...}`). Thread-safe."""

    def __init__(self, labels: Mapping[str, str], *, section: str = "[loki]") -> None:
        self.labels = dict(labels)
        self.section = section
        self._lock = threading.Lock()
        self._seen: set[tuple[tuple[str, str], ...]] = set()
        self._lacking: dict[str, int] = dict.fromkeys(self.labels, 0)
        self._carried: dict[str, set[str]] = {setting: set() for setting in self.labels}

    def saw(self, labels: tuple[tuple[str, str], ...]) -> None:
        """A matched line's labels (stream labels and structured metadata, as Loki merges them)."""
        own = tuple(kv for kv in labels if kv[0] not in LOKI_ADDED_LABELS)
        if own in self._seen:  # racy read: the set is re-checked under the lock
            return
        with self._lock:
            if own in self._seen:
                return
            self._seen.add(own)
            names = {k for k, v in own if v}
            for setting, label in self.labels.items():
                if label not in names:
                    self._lacking[setting] += 1
                    self._carried[setting].update(names)

    @property
    def streams(self) -> int:
        return len(self._seen)

    def missing(self) -> list[MissingLabel]:
        """The configured labels some matched streams lack, in the order configured."""
        with self._lock:
            total = len(self._seen)
            return [
                MissingLabel(
                    setting,
                    label,
                    self._lacking[setting],
                    total,
                    tuple(sorted(self._carried[setting])),
                )
                for setting, label in self.labels.items()
                if self._lacking[setting]
            ]

    def missing_texts(self) -> list[str]:
        """One line per configured label some matched streams lack, each warned: the lines
        could not be attributed (the scan makes each a gap over its window)."""
        out = []
        for m in self.missing():
            text = m.text(self.section)
            log.warning("%s", text)
            out.append(text)
        return out
