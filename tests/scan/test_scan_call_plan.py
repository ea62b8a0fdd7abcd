"""The sweep lists task executions only where an elastic task can run (the compiled closure of each
workflow version, read once) or where the evidence points (docs/performance.md, "What is called");
a closure that cannot be read costs calls, never findings."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from support.scan import NO_RETRY, key, sandbox_fixtures, scan_json, scan_json_while_failing

from forensics.evidence.flyte_names import generated_name
from forensics.model import ExecutionRef
from forensics.sandbox.incident import ScenarioBuilder, _try
from forensics.sandbox.s3_server import S3Faults, S3Rule
from forensics.sandbox.scenario import SandboxExecution, SandboxNode
from forensics.scan.join import PodIndex

pytestmark = pytest.mark.integration

UTC = timezone.utc
T0 = datetime(2026, 9, 8, 3, 0, 0, tzinfo=UTC)
NS = "gs1-production"
GS1 = ("gs1", "production")
QUIET = "a1fournodesquiet0000"  # elastic n0 without outputs.pb; plain n1..n3 fine
POINTED = "b2fournodespointed00"  # a plain node signalled, its outputs.pb missing
SUB = "c3subworkflow0000000"  # the elastic task inside a sub-workflow
HASHED = "nightly-d4hashedplainnode00000-retrain-from-latest-checkpoint-x"  # hashed pod names


def _four_nodes(b, name, start, *, quiet_elastic=False, signalled_plain=None, pods=None):
    """n0 runs the elastic task, n1..n3 a plain one (task_type_version 0)."""
    elastic = b.task(*GS1, "train.elastic")
    plain = b.task(*GS1, "prep.plain", version=0)
    nodes = []
    for i in range(4):
        node = f"n{i}"
        s, e = start + timedelta(minutes=10 * i), start + timedelta(minutes=10 * i + 8)
        silent = (i == 0 and quiet_elastic) or node == signalled_plain
        attempt = _try(
            name,
            0,
            "SUCCEEDED",
            s,
            e,
            elastic if i == 0 else plain,
            node=node,
            pods=[pods(node)] if pods else None,
            write_outputs=not silent,
        )
        nodes.append(SandboxNode(node, "SUCCEEDED", [attempt]))
    end = start + timedelta(minutes=45)
    return b.add(
        SandboxExecution(
            *GS1, name, "SUCCEEDED", start, end, nodes=nodes, launch_plan=("", "", "wf.four", "v1")
        )
    )


def _scenario():
    b = ScenarioBuilder()
    _four_nodes(b, QUIET, T0, quiet_elastic=True)
    _four_nodes(b, POINTED, T0 + timedelta(hours=1), signalled_plain="n2")
    n2_end = T0 + timedelta(hours=1, minutes=28)
    b.signal_pod(n2_end - timedelta(seconds=7), NS, f"{POINTED}-n2-0", f"{POINTED}-n2-0")

    def hashed(node):
        return generated_name([HASHED, node, 0])

    _four_nodes(b, HASHED, T0 + timedelta(hours=2), signalled_plain="n1", pods=hashed)
    n1_end = T0 + timedelta(hours=2, minutes=18)
    b.signal_pod(n1_end - timedelta(seconds=7), NS, hashed("n1"), hashed("n1"))
    # A sub-workflow `n0` whose own nodes run the elastic task (n0) and a plain one (n1).
    start = T0 + timedelta(hours=3)
    elastic, plain = b.task(*GS1, "train.elastic"), b.task(*GS1, "prep.plain", version=0)
    children = [
        SandboxNode(
            f"n0-0-{spec}",
            "SUCCEEDED",
            [
                _try(
                    SUB,
                    0,
                    "SUCCEEDED",
                    start + timedelta(minutes=i),
                    start + timedelta(minutes=i + 5),
                    task,
                    node=f"n0-0-{spec}",
                    write_outputs=spec == "n1",
                )
            ],
            spec_node_id=spec,
            parent_unique_id="n0",
        )
        for i, (spec, task) in enumerate([("n0", elastic), ("n1", plain)])
    ]
    b.add(
        SandboxExecution(
            *GS1,
            SUB,
            "SUCCEEDED",
            start,
            start + timedelta(minutes=10),
            nodes=[SandboxNode("n0", "SUCCEEDED", [], is_parent=True), *children],
            launch_plan=("", "", "wf.nested", "v1"),
        )
    )
    return b.build()


box, env = sandbox_fixtures(_scenario, NO_RETRY)

EXPECTED = {
    (*GS1, QUIET, "n0", 0): "suspected",
    (*GS1, POINTED, "n2", 0): "affected",
    (*GS1, HASHED, "n1", 0): "affected",
    (*GS1, SUB, "n0-0-n0", 0): "suspected",
}


def _listed(box, before: int) -> Counter:
    calls = box.admin.calls_of("ListTaskExecutions")[before:]
    return Counter(
        (r.node_execution_id.execution_id.name, r.node_execution_id.node_id) for r in calls
    )


def test_task_executions_are_listed_only_where_an_elastic_task_runs_or_the_evidence_points(
    box, capsys
):
    before = box.admin.call_counts()
    listed_before = len(box.admin.calls_of("ListTaskExecutions"))
    code, report, _ = scan_json(capsys)
    calls = box.admin.call_counts() - before
    assert code == 1 and report["complete"]
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    listed = _listed(box, listed_before)
    # The elastic nodes, and the plain node whose pod logged a signal; never the other plain ones.
    assert set(listed) >= {(QUIET, "n0"), (POINTED, "n0"), (POINTED, "n2"), (SUB, "n0-0-n0")}
    assert (QUIET, "n1") not in listed and (SUB, "n0-0-n1") not in listed
    assert (POINTED, "n1") not in listed and (POINTED, "n3") not in listed
    # A hashed pod name points at no node: its execution is looked up again, every node listed.
    assert (HASHED, "n1") in listed
    # One GetWorkflow per workflow version (the executions name it: no GetLaunchPlan).
    assert calls["GetWorkflow"] == 2 and calls["GetLaunchPlan"] == 0


def test_an_unreadable_closure_lists_every_node_and_finds_the_same(box, capsys):
    listed_before = len(box.admin.calls_of("ListTaskExecutions"))
    before = box.admin.call_counts()
    code, report, err = scan_json_while_failing(box, capsys, "GetWorkflow")
    assert code == 1 and report["complete"], err
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    listed = _listed(box, listed_before)
    for name in (QUIET, POINTED):
        assert {n for e, n in listed if e == name} == {"n0", "n1", "n2", "n3"}
    assert "workflow closure unreadable, listing every node" in err
    # Asked once per workflow version, not once per execution of it (three run wf.four).
    assert (box.admin.call_counts() - before)["GetWorkflow"] == 2


def test_pods_from_any_evidence_point_the_sweep_at_their_nodes():
    # A disruption event names a pod as a death signal does: `point` takes such pods too.
    index = PodIndex()
    index.point([(*GS1, f"{POINTED}-n2-0"), (*GS1, f"{SUB}-n0-0-n1-0"), (*GS1, "not-a-task-pod")])
    assert "n2" in index.points_at(ExecutionRef(*GS1, POINTED))
    assert "n0-0-n1" in index.points_at(ExecutionRef(*GS1, SUB))
    assert index.points_at(ExecutionRef(*GS1, QUIET)) == frozenset()


def test_outputs_are_read_from_listing_pages_or_a_head_each_where_listing_is_denied(box, capsys):
    """The sweep's outputs.pb checks are answered by walking the bucket's listing
    (`callplan`); a role without s3:ListBucket gets the same findings from a HEAD each."""
    s3 = box.s3
    s3.requests.clear()
    code, report, err = scan_json(capsys)
    assert code == 1 and report["complete"], err
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    heads = [r.path for r in s3.requests if r.method == "HEAD"]
    assert any(r.is_listing and "prefix=metadata" in r.query for r in s3.requests)
    # Only the attempts found after the sweep (pods it did not claim) are HEADed one by one.
    headed = {p.split("gs1-production-")[1].split("/data/")[0] for p in heads if "outputs" in p}
    assert headed == {f"{POINTED}/n2", f"{HASHED}/n1"}
    s3.requests.clear()
    s3.faults = S3Faults(access_denied=[S3Rule(listings=True, prefix="metadata/")])
    try:
        code, report, err = scan_json(capsys, "-v")
    finally:
        s3.faults = S3Faults()
    assert code == 1 and report["complete"], err
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    refused = [r for r in s3.requests if r.is_listing and r.status == 403]
    heads = [r.path for r in s3.requests if r.method == "HEAD" and r.path.endswith("/outputs.pb")]
    # Said once, with -v: a scan that is still complete, only slower.
    assert err.count("listing failed (forbidden") == 1, err
    assert refused and len(heads) == 4 + 2  # the sweep's four checks, and the two found late


def test_checks_sent_in_batches_during_the_sweep_find_the_same(box, capsys, monkeypatch):
    # A scan past OUTPUTS_BATCH candidates walks the listing once per full batch, during the
    # sweep; the last batch goes at its end.
    from forensics.scan import collect

    monkeypatch.setattr(collect, "OUTPUTS_BATCH", 2)
    box.s3.requests.clear()
    code, report, err = scan_json(capsys)
    assert code == 1 and report["complete"], err
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED
    walks = [r for r in box.s3.requests if r.is_listing and "start-after" in r.query]
    assert len(walks) >= 2
