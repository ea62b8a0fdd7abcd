"""`callplan`: outputs.pb answered by walking a bucket's listing where its keys are dense, a HEAD
each where they are not, and never a guess (docs/performance.md, "What is called")."""

from __future__ import annotations

import gc
from dataclasses import replace

import pytest
from support.fakes import FakeStore

from forensics.model import ObjectCheck
from forensics.scan import callplan
from forensics.scan.callplan import Listed, plan, walk

BUCKET = "flyte-metadata"
ROOT = "metadata/propeller/gs1-production-"


def node_dir(i: int, node: str = "n0") -> str:
    return f"s3://{BUCKET}/{ROOT}ex{i:05d}/{node}/data"


def outputs_dir(i: int) -> str:
    return f"{node_dir(i)}/0/"


def inputs_uri(i: int) -> str:
    return f"{node_dir(i)}/inputs.pb"


class Check:
    """An attempt as the plan sees it: its output dir and its node's inputs.pb."""

    def __init__(self, i: int, out: str | None = None) -> None:
        self.i = i
        self.out = out if out is not None else outputs_dir(i)
        self.inputs = inputs_uri(i)


def listed(checks: list[Check]) -> list[Listed]:
    direct, runs = plan(checks, lambda c: c.out, lambda c: c.inputs, runs=1)
    assert not direct and len(runs) == 1
    return runs[0]


def store_with(executions: range, *, written=lambda i: i % 3 != 0, others: int = 0) -> FakeStore:
    """Each execution's node inputs.pb, and its outputs.pb where `written`; `others` unrelated
    executions' files between each two of them (a bucket holding more than the batch)."""
    store = FakeStore()
    for i in executions:
        store.put(inputs_uri(i))
        if written(i):
            store.put(outputs_dir(i) + "outputs.pb")
        for j in range(others):
            store.put(f"s3://{BUCKET}/{ROOT}ex{i:05d}-other{j:04d}/n0/data/inputs.pb")
    return store


def truth(store: FakeStore, c: Check) -> str:
    return "present" if c.out + "outputs.pb" in store.objects else "missing"


def test_dense_keys_are_answered_by_pages_with_no_head(monkeypatch):
    monkeypatch.setattr(callplan, "LIST_PAGE", 50)
    store = store_with(range(300))
    checks = [Check(i) for i in range(300)]
    walked = list(walk(listed(checks), store.list_from))
    assert [checks[w.index] for w in walked] == sorted(checks, key=lambda c: c.out)
    for w in walked:
        assert w.outputs is not None and w.outputs.state == truth(store, checks[w.index])
    # About 500 keys (inputs.pb each, outputs.pb for two in three), 50 a page.
    assert store.calls == {"ListObjectsV2": 10}
    # The node's inputs.pb sorts right after its outputs.pb: the same page answers the witness,
    # but for a page that ends between the two.
    witnessed = [w for w in walked if w.witness is not None]
    assert len(witnessed) >= 290 and all(w.witness.state == "present" for w in witnessed)


def test_a_batch_that_skips_much_of_the_bucket_jumps_over_it():
    # Two clusters of checks at the two ends of a 6,000-key range: the second page starts at
    # the next key not yet answered, not where the first page ended.
    store = store_with(range(3000), written=lambda i: True)
    checks = [Check(i) for i in (*range(100), *range(2900, 3000))]
    walked = list(walk(listed(checks), store.list_from))
    assert all(w.outputs is not None and w.outputs.state == "present" for w in walked)
    assert store.calls == {"ListObjectsV2": 2}


def test_sparse_keys_fall_back_to_a_head_each_after_one_page():
    # Forty unrelated folders between each two checked attempts: more keys a page than a HEAD
    # each would cost (GAP_MAX), so the first page's answers stand and the rest are HEADed.
    store = store_with(range(200), others=40)
    checks = [Check(i) for i in range(200)]
    walked = list(walk(listed(checks), store.list_from))
    answered = [w for w in walked if w.outputs is not None]
    assert store.calls == {"ListObjectsV2": 1}
    assert 0 < len(answered) < callplan.LIST_PAGE // callplan.GAP_MAX
    assert all(w.outputs.state == truth(store, checks[w.index]) for w in answered)
    assert [w.index for w in walked if w.outputs is None] == list(range(len(answered), 200))


def test_a_listing_that_fails_leaves_every_key_to_a_head():
    store = store_with(range(20))
    store.fail(f"s3://{BUCKET}/", "AccessDenied")
    walked = list(walk(listed([Check(i) for i in range(20)]), store.list_from))
    assert len(walked) == 20 and all(w.outputs is None and w.witness is None for w in walked)
    assert store.calls == {"ListObjectsV2": 1}


def test_a_missing_key_is_missing_only_inside_the_range_a_page_covers():
    # Page of 2 keys: ex00000's inputs.pb and outputs.pb... the next check starts a new page.
    store = store_with(range(4), written=lambda i: i != 2)
    checks = [Check(i) for i in range(4)]
    walked = {checks[w.index].i: w for w in walk(listed(checks), _paged(store, 2))}
    assert [walked[i].outputs.state for i in range(4)] == [
        "present",
        "present",
        "missing",
        "present",
    ]


def _paged(store: FakeStore, size: int):
    def list_from(bucket, prefix, start_after, max_keys):
        return store.list_from(bucket, prefix, start_after, size)

    return list_from


@pytest.mark.parametrize("runs", [1, 3, 8])
def test_the_plan_splits_sorted_keys_by_bucket_and_heads_what_cannot_be_listed(runs):
    checks = [Check(i) for i in (5, 1, 4, 2, 3, 0)]
    lone = Check(9, "s3://other-bucket/metadata/x/n0/data/0/")
    unreadable = Check(8, "gs://not-s3/metadata/x/n0/data/0/")
    items = [*checks, lone, unreadable]
    direct, planned = plan(items, lambda c: c.out, lambda c: c.inputs, runs=runs)
    # One check in a bucket costs one request either way: a HEAD, which needs no ListBucket.
    assert {items[i].i for i in direct} == {8, 9}
    flat = [x for run in planned for x in run]
    assert [items[x[0]].i for x in flat] == [0, 1, 2, 3, 4, 5]  # sorted, contiguous runs
    assert all(len(run) >= callplan.MIN_LISTED for run in planned)
    assert len(planned) <= max(runs, 1)
    assert flat[0][2] == f"{ROOT}ex00000/n0/data/0/outputs.pb"
    assert flat[0][3] == f"{ROOT}ex00000/n0/data/inputs.pb"


HALF = callplan.MIN_RUN  # attempts whose keys (two each) fill about one page


@pytest.mark.parametrize(("checks", "runs"), [(HALF - 25, 1), (3 * HALF - 1, 2), (64 * HALF, 8)])
def test_a_run_is_never_shorter_than_half_a_page(checks, runs):
    # Eight runs of a few attempts each would list eight pages for what one page answers.
    _, planned = plan([Check(i) for i in range(checks)], lambda c: c.out, lambda c: c.inputs, 8)
    assert len(planned) == runs
    assert all(len(run) >= min(checks, callplan.MIN_RUN) for run in planned)


def test_a_maps_subtasks_listed_alone_still_answer_their_nodes_witness():
    # A map's subtasks write under `<node>/data/0/<index>/<attempt>/`; the node's inputs.pb lies
    # above that folder. A run holding only them lists from a prefix that holds the witness too.
    node = f"s3://{BUCKET}/{ROOT}map0000000/n0/data"
    store = FakeStore()
    store.put(f"{node}/inputs.pb")
    checks = [Check(i, f"{node}/0/{i}/0/") for i in range(3)]
    for c in checks:
        c.inputs = f"{node}/inputs.pb"
    walked = list(walk(listed(checks), store.list_from))
    assert [w.outputs.state for w in walked] == ["missing"] * 3
    assert [w.witness.state for w in walked] == ["present"] * 3  # never written, not expired
    assert store.calls == {"ListObjectsV2": 1}


def test_a_store_that_ignores_start_after_only_answers_less():
    # Every page from the prefix's first key: it still answers truly for the range it covers,
    # and a page that ends before the next key to answer ends the walk.
    store = store_with(range(100))
    checks = [Check(i) for i in range(100)]

    def from_the_start(bucket, prefix, start_after, max_keys):
        page = store.list_from(bucket, prefix, "", 50)
        return page if isinstance(page, ObjectCheck) else replace(page, start_after=start_after)

    walked = list(walk(listed(checks), from_the_start))
    answered = [w for w in walked if w.outputs is not None]
    assert 0 < len(answered) < 100
    assert all(w.outputs.state == truth(store, checks[w.index]) for w in answered)
    assert all(w.outputs is None for w in walked[len(answered) :])


def test_a_plan_holds_no_object_the_collector_must_keep_watching():
    # A batch's plan lives until its walk ends: 20,000 entries at 1x. Strings and indices only,
    # which the collector stops tracking at its first pass (docs/performance.md).
    _, planned = plan([Check(i) for i in range(10)], lambda c: c.out, lambda c: c.inputs, 1)
    gc.collect()
    assert not any(gc.is_tracked(x) for run in planned for x in run)
