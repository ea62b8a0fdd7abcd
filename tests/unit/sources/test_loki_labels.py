"""The label census: which configured label names the matched streams lack (issue 43, item 2)."""

from __future__ import annotations

from datetime import datetime, timedelta

from forensics.failures import FailureKind
from forensics.model import UTC, Window
from forensics.scan.source_gaps import label_gaps
from forensics.sources.loki_labels import LabelCensus

W = Window(datetime(2026, 9, 4, tzinfo=UTC), datetime(2026, 9, 4, tzinfo=UTC) + timedelta(days=1))
LABELS = {
    "namespace_label": "namespace",
    "pod_label": "k8s_pod_name",
    "container_label": "container",
}


def stream(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def test_a_label_no_stream_carries_names_what_they_carry_and_is_a_gap():
    census = LabelCensus(LABELS)
    for pod in ("a", "b", "c"):
        census.saw(stream(namespace="ns", pod=pod, container="t", service_name="t"))
        census.saw(stream(namespace="ns", pod=pod, container="t", service_name="t"))  # once
    (gap,) = label_gaps("loki", W, census.missing_texts())
    assert gap.error.startswith(
        "[loki] pod_label = k8s_pod_name: 0 of 3 matched streams carry it; "
        "they carry container, namespace, pod."
    )
    assert (gap.start, gap.end, gap.kind, gap.failure) == (
        W.start,
        W.end,
        "failed",
        FailureKind.LABEL_MISSING,
    )


def test_some_streams_lacking_a_label_is_a_gap_too_and_an_empty_value_is_no_label():
    census = LabelCensus({"pod_label": "pod"}, section="[k8s_events]")
    census.saw(stream(namespace="ns", pod="a"))
    census.saw(stream(namespace="ns", pod=""))
    (missing,) = census.missing()
    assert (missing.lacking, missing.streams, missing.carried) == (1, 2, ("namespace",))
    assert missing.text("[k8s_events]").startswith(
        "[k8s_events] pod_label = pod: 1 of 2 matched streams lack it; it carries namespace."
    )


def test_streams_carrying_every_label_leave_no_gap():
    census = LabelCensus(LABELS | {"pod_label": "pod"})
    census.saw(stream(namespace="ns", pod="a", container="t"))
    assert census.missing_texts() == [] and census.streams == 1
