"""`DisruptionIndex`: which of an attempt's disruptions the decision reads."""

from __future__ import annotations

from datetime import timedelta

from support.fakes import T0, attempt, execution

from forensics.config import Settings
from forensics.model import Disruption
from forensics.scan.disruptions import DisruptionIndex
from forensics.sources.k8s_events import EventsRead

EX = execution("azvg5f9v9974m78fvlf7")
NS = "gs1-production"


def _pressure(att):
    """The kubelet's node-pressure eviction of the attempt's pod (it sets the pod Failed)."""
    return Disruption(
        "k8s-events", "Evicted", "kubelet", T0 - timedelta(minutes=30), NS, att.pods[0],
        "The node was low on resource: memory.",
    )  # fmt: skip


def _index(att, *found):
    index = DisruptionIndex()
    index.fill(EventsRead(by_pod={(NS, att.pods[0]): list(found)}))
    return index


def test_a_wrong_join_never_hides_a_genuine_disruption_recorded_after_it():
    # A kubelet eviction (it sets its pod Failed) of a name a SUCCEEDED single pod shares is
    # another pod's; a Karpenter disruption of the same name later is evidence to grade on.
    att = attempt(EX, task_type="python-task")
    pressure = _pressure(att)
    karpenter = Disruption(
        "k8s-events",
        "Disrupted",
        "karpenter",
        T0 - timedelta(minutes=2),
        NS,
        att.pods[0],
        "Deleting the pod to accommodate the terminationTime 2026-10-06T14:00:00Z of the node",
    )
    assert _index(att, pressure, karpenter).for_attempt(EX, att, Settings()) == karpenter


def test_a_wrong_join_alone_is_still_what_the_decision_reads():
    att = attempt(EX, task_type="python-task")
    pressure = _pressure(att)
    assert _index(att, pressure).for_attempt(EX, att, Settings()) == pressure


def test_a_pytorch_job_keeps_its_earliest_disruption():
    att = attempt(EX)  # a PyTorchJob: one evicted replica does not fail the job
    early = _pressure(att)
    late = Disruption("k8s-events", "Preempted", "default-scheduler", T0, NS, att.pods[0], "x")
    assert _index(att, early, late).for_attempt(EX, att, Settings()) == early
