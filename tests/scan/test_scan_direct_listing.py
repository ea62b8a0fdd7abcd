"""A workflow whose nodes all run elastic tasks is swept without ListNodeExecutions: its node ids
are in the compiled closure, and ListTaskExecutions answers each (docs/performance.md, "What is
called"). What that listing cannot see is a `@dynamic` node's children: a task execution that
spawned nodes (`is_parent`, event version 0) lists the nodes after all, and a pod no attempt
claimed (event version 2, where no task execution is a parent) has its execution looked up whole.
The checkpoint Flyte records on the node execution is read for findings only."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from support.scan import NO_RETRY, key, sandbox_fixtures, scan_json, scan_json_while_failing

from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.scenario import SandboxExecution, SandboxNode

pytestmark = pytest.mark.integration

UTC = timezone.utc
T0 = datetime(2026, 9, 8, 3, 0, 0, tzinfo=UTC)
NS = "gs1-production"
GS1 = ("gs1", "production")
SINGLE = "a1singleelastic00000"  # one elastic node, signalled, no outputs.pb: affected
QUIET = "b2singlequiet0000000"  # one elastic node, no outputs.pb, no signal: suspected
TWO = "c3twoelastic00000000"  # two elastic nodes, the second signalled: affected
DYN = "d4dynamicelastic0000"  # a pytorch-typed @dynamic parent, event version 2; child signalled
LEGACY = "e5dynamiclegacy00000"  # the same under event version 0, its child not signalled
CHECKPOINT = "s3://ckpt/flyte/{}/n0/_flytecheckpoints"


def _dynamic(b, name, start, event_version, *, signalled):
    """n0: a @dynamic node whose task is `pytorch`-typed; its child dn0 trains and writes no
    outputs.pb."""
    parent = b.task(*GS1, "sweep.elastic.dynamic", "pytorch")
    train = b.task(*GS1, "train.elastic")
    child = "n0-0-dn0"
    b.add(SandboxExecution(*GS1, name, "SUCCEEDED", start, start + timedelta(minutes=30), nodes=[
        SandboxNode("n0", "SUCCEEDED", is_parent=True, is_dynamic=True, attempts=[
            _try(name, 0, "SUCCEEDED", start, start + timedelta(minutes=1), parent,
                 write_outputs=True),
        ]),
        SandboxNode(child, "SUCCEEDED", spec_node_id="dn0", parent_unique_id="n0", attempts=[
            _try(name, 0, "SUCCEEDED", start + timedelta(minutes=2), start + timedelta(minutes=20),
                 train, node=child),
        ]),
    ], launch_plan=("", "", f"wf.{name}", "v1"), event_version=event_version))  # fmt: skip
    end = start + timedelta(minutes=20)
    pod = f"{name}-{child}-0"
    if signalled:
        b.signal_pod(end - timedelta(seconds=7), NS, pod, pod)


def _scenario():
    b = ScenarioBuilder()
    train = b.task(*GS1, "train.elastic")
    finetune = b.task(*GS1, "finetune.elastic", "pytorch")
    for i, name in enumerate((SINGLE, QUIET)):
        start = T0 + timedelta(hours=i)
        end = start + timedelta(minutes=20)
        b.add(SandboxExecution(*GS1, name, "SUCCEEDED", start, end + timedelta(minutes=1), nodes=[
            SandboxNode("n0", "SUCCEEDED", [_try(name, 0, "SUCCEEDED", start, end, train)],
                        checkpoint_uri=CHECKPOINT.format(name)),
        ], launch_plan=("", "", "wf.single", "v1")))  # fmt: skip
        if name == SINGLE:
            b.signal_pod(end - timedelta(seconds=7), NS, f"{name}-n0-0", f"{name}-n0-0")
    start = T0 + timedelta(hours=2)
    b.add(SandboxExecution(*GS1, TWO, "SUCCEEDED", start, start + timedelta(minutes=50), nodes=[
        SandboxNode("n0", "SUCCEEDED", [
            _try(TWO, 0, "SUCCEEDED", start, start + timedelta(minutes=20), train,
                 write_outputs=True)]),
        SandboxNode("n1", "SUCCEEDED", [
            _try(TWO, 0, "SUCCEEDED", start + timedelta(minutes=21),
                 start + timedelta(minutes=45), finetune, node="n1")]),
    ], launch_plan=("", "", "wf.two", "v1")))  # fmt: skip
    end = start + timedelta(minutes=45)
    b.signal_pod(end - timedelta(seconds=7), NS, f"{TWO}-n1-0", f"{TWO}-n1-0")
    _dynamic(b, DYN, T0 + timedelta(hours=3), event_version=2, signalled=True)
    _dynamic(b, LEGACY, T0 + timedelta(hours=4), event_version=0, signalled=False)
    return b.build()


box, env = sandbox_fixtures(_scenario, NO_RETRY)

EXPECTED = {
    (*GS1, SINGLE, "n0", 0): "affected",
    (*GS1, QUIET, "n0", 0): "suspected",
    (*GS1, TWO, "n1", 0): "affected",
    (*GS1, DYN, "n0-0-dn0", 0): "affected",
    (*GS1, LEGACY, "n0-0-dn0", 0): "suspected",
}


def _by_execution(box, rpc: str, before: int) -> Counter:
    calls = box.admin.calls_of(rpc)[before:]
    if rpc == "ListTaskExecutions":
        return Counter(r.node_execution_id.execution_id.name for r in calls)
    if rpc == "ListNodeExecutions":
        return Counter(r.workflow_execution_id.name for r in calls)
    return Counter(r.id.execution_id.name for r in calls)


def _marks(box) -> dict[str, int]:
    return {
        rpc: len(box.admin.calls_of(rpc))
        for rpc in ("ListNodeExecutions", "ListTaskExecutions", "GetNodeExecution")
    }


def test_all_elastic_workflows_are_swept_without_listing_their_nodes(box, capsys):
    marks = _marks(box)
    code, report, err = scan_json(capsys)
    assert code == 1 and report["complete"], err
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    nodes = _by_execution(box, "ListNodeExecutions", marks["ListNodeExecutions"])
    tasks = _by_execution(box, "ListTaskExecutions", marks["ListTaskExecutions"])
    # One ListTaskExecutions per node, no ListNodeExecutions, for the all-elastic workflows.
    assert nodes[SINGLE] == nodes[QUIET] == nodes[TWO] == 0, nodes
    assert (tasks[SINGLE], tasks[QUIET], tasks[TWO]) == (1, 1, 2), tasks
    # Event version 0: the parent's task execution says it spawned nodes; the sweep lists them,
    # and finds the silent child no evidence points at.
    assert nodes[LEGACY] >= 1
    # Event version 2: nothing says so; the child's signalled pod, which no attempt claimed,
    # has its execution looked up whole.
    assert nodes[DYN] >= 1


def test_a_findings_flyte_checkpoint_is_read_from_its_node_execution(box, capsys):
    marks = _marks(box)
    code, report, err = scan_json(capsys)
    assert code == 1 and report["complete"], err
    found = {key(f)[2]: f for f in report["findings"]}
    for name in (SINGLE, QUIET):
        ck = found[name]["checkpoint"]
        assert ck["uri"] == CHECKPOINT.format(name) + "/" and ck["source"] == "flyte-checkpoint"
    # One GetNodeExecution per finding the sweep listed directly, and only for those.
    got = _by_execution(box, "GetNodeExecution", marks["GetNodeExecution"])
    assert got[SINGLE] == got[QUIET] == got[TWO] == 1, got
    assert sum(got.values()) == 3, got


def test_listing_every_node_finds_the_same(box, capsys):
    # Without a closure, every node is listed (the way the sweep read every workflow before).
    code, listed, err = scan_json_while_failing(box, capsys, "GetWorkflow")
    assert code == 1 and listed["complete"], err
    code, direct, err = scan_json(capsys)
    assert code == 1 and direct["complete"], err
    assert listed["findings"] == direct["findings"]
    assert listed["summary"] == direct["summary"]


def test_an_unreadable_node_execution_leaves_the_checkpoint_unknown_never_the_verdict(box, capsys):
    code, report, err = scan_json_while_failing(box, capsys, "GetNodeExecution")
    assert code == 1 and report["complete"], err
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    ck = {key(f)[2]: f["checkpoint"] for f in report["findings"]}[SINGLE]
    assert ck["state"] == "unknown" and ck["reason"].startswith("node execution: "), ck
