"""`PodIndex`: signalled pods joined to swept attempts by project, domain and pod name."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from support.fakes import T0, attempt, execution

from forensics.model import ExecutionRef, SignalHit
from forensics.scan.join import PodIndex


def hit(ns, pod, at=T0):
    return SignalHit("SIGTERM", 15, at, ns, pod, "train", "agent", "Received")


EX = execution("azvg5f9v9974m78fvlf7")
ATT = attempt(EX)
NS = "gs1-production"


def test_an_attempt_gets_the_earliest_signal_of_its_pods():
    # A PyTorchJob's replicas log under their own pod names; the attempt records the job's.
    job = f"{EX.ref.name}-n0-0"
    index = PodIndex()
    index.fill(
        [
            ("gs1", "production", hit(NS, f"{job}-master-0", T0 - timedelta(seconds=3))),
            ("gs1", "production", hit(NS, f"{job}-worker-0", T0)),
        ]
    )
    assert index.match(EX, [ATT]) == {
        ATT.ref: hit(NS, f"{job}-master-0", T0 - timedelta(seconds=3))
    }
    assert index.unclaimed() == []


def test_a_pod_belongs_to_the_first_attempt_that_claims_it():
    index = PodIndex()
    index.fill([("gs1", "production", hit(NS, ATT.pods[0]))])
    assert ATT.ref in index.match(EX, [ATT])
    # The same pod name claimed again (an execution listed twice) is not signalled twice.
    assert index.match(EX, [ATT]) == {}


def test_the_join_is_per_project_and_domain():
    index = PodIndex()
    index.fill([("gs1", "development", hit("gs1-development", ATT.pods[0]))])
    assert index.match(EX, [ATT]) == {}
    assert index.unclaimed() == [("gs1-development", ATT.pods[0])]


def test_the_nodes_a_pod_may_belong_to_are_pointed_at_before_any_match():
    # Evidence other than a signal (a disruption event) points the sweep at a node too.
    index = PodIndex()
    index.point([("gs1", "production", f"{EX.ref.name}-n3-0")])
    index.fill([("gs1", "production", hit(NS, f"{EX.ref.name}-n1-2"))])
    assert index.points_at(EX.ref) == {"n1", "n3"}
    other = ExecutionRef("gs1", "production", "k5l9z3x7c1v5b9n3m7q1")
    assert index.points_at(other) == frozenset()
    assert index.match(replace(EX), []) == {}
