"""`relaunch --only-lost` over the in-process fakes: the lost node alone from its recorded
inputs, then the nodes after it, each exactly once; refused shapes; what it saves; RECOVERED
copies said and never counted; a whole relaunch's overwrite_cache chosen from the graph."""

from __future__ import annotations

import json
from dataclasses import replace

from support.fakes import execution, fake_sources, signalled, wrote_outputs
from support.pipeline import EVAL, NAME, TRAIN, pipeline

from forensics.model import ExecutionRef
from forensics.relaunch import AuditLog, Options, relaunch_name
from forensics.relaunch.only_lost import rerun_name
from forensics.relaunch.relauncher import Relauncher

LOST = Options(only_lost=True)


def setup(**kw):
    sources = fake_sources()
    return sources, pipeline(sources, **kw)


def relauncher(sources, tmp_path) -> Relauncher:
    return Relauncher.over(sources, AuditLog(tmp_path / "audit.jsonl"))


def rerun_of(ref: ExecutionRef, node: str) -> ExecutionRef:
    return replace(ref, name=rerun_name(ref, node))


def states(plan) -> dict[str, str]:
    return {s.node_id: s.state for s in plan.lost.steps}


def test_the_plan_reruns_the_lost_node_and_what_follows_never_the_finished_prep(tmp_path):
    sources, ref = setup()
    plan = relauncher(sources, tmp_path).plan(ref, LOST)
    assert plan.refusal is None and plan.failure is None
    assert states(plan) == {"n1": "to-start", "n2": "waiting"}
    assert [s.role for s in plan.lost.steps] == ["lost", "after"]
    n1 = plan.lost.steps[0].request
    assert n1.task == TRAIN and n1.inputs.texts["checkpoint_dir"] == "s3://ckpt/pipeline/"
    # what it saves: prep ran 1 h on 4 CPUs; a whole relaunch also re-runs train and eval.
    d = plan.details()["only_lost"]
    assert [c["node"] for c in d["not_rerun"]] == ["n0"]
    assert d["saved"] == {"run_seconds": 3600.0, "gpu_hours": 0.0, "cpu_hours": 4.0}
    # train: 1 h x 2 workers x 8 GPUs; eval: 1 h x 1 GPU
    assert d["whole_relaunch"]["gpu_hours"] == 17.0
    assert any(line.startswith("saves 1.00 h run time") for line in plan.lines())


def test_each_node_starts_once_in_order_and_reruns_advance_the_chain(tmp_path):
    sources, ref = setup()
    admin = sources.admin
    r = relauncher(sources, tmp_path)
    first = r.execute(r.plan(ref, LOST), dry_run=False)
    assert (first.status, first.relaunched_as) == ("relaunched", rerun_of(ref, "n1"))
    assert [q.node for q in admin.reruns] == ["n1"]
    assert admin.get_execution(rerun_of(ref, "n1")).launch_plan == TRAIN
    # again while n1 runs: nothing new, the chain said
    again = r.execute(r.plan(ref, LOST), dry_run=False)
    assert again.status == "already-relaunched" and "n1 running" in again.reason
    assert len(admin.reruns) == 1
    admin.finish(rerun_of(ref, "n1"))
    third = r.execute(r.plan(ref, LOST), dry_run=False)
    assert third.status == "relaunched"
    assert [(q.node, q.task) for q in admin.reruns] == [("n1", TRAIN), ("n2", EVAL)]
    assert admin.reruns[1].inputs.texts["dataset"] == "s3://data/ds"  # its recorded inputs
    admin.finish(rerun_of(ref, "n2"))
    done = r.execute(r.plan(ref, LOST), dry_run=False)
    assert done.status == "already-relaunched" and done.reason.startswith("every re-run succeeded")
    assert admin.calls["CreateExecution"] == 2 and admin.calls["RelaunchExecution"] == 0
    log = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [x["action"] for x in log] == ["relaunched"] * 1 + ["already-relaunched"] + [
        "relaunched",
        "already-relaunched",
    ]
    assert log[0]["request"]["only_lost"][0]["spec"]["launch_plan"]["resource_type"] == "TASK"


def test_a_rerun_output_replaces_the_input_a_later_node_read_from_the_lost_node(tmp_path):
    sources, ref = setup(eval_reads_model=True)
    r = relauncher(sources, tmp_path)
    r.execute(r.plan(ref, LOST), dry_run=False)
    sources.admin.finish(rerun_of(ref, "n1"), outputs={"model": "s3://new/model"})
    plan = r.plan(ref, LOST)
    step = plan.lost.steps[1]
    assert step.state == "to-start" and step.substituted == ("model <- n1.model",)
    r.execute(plan, dry_run=False)
    texts = sources.admin.reruns[1].inputs.texts
    assert texts["model"] == "s3://new/model" and texts["dataset"] == "s3://data/ds"


def test_a_failed_rerun_stops_the_chain_and_says_so(tmp_path):
    sources, ref = setup()
    r = relauncher(sources, tmp_path)
    r.execute(r.plan(ref, LOST), dry_run=False)
    sources.admin.finish(rerun_of(ref, "n1"), "FAILED")
    plan = r.plan(ref, LOST)
    assert states(plan) == {"n1": "failed", "n2": "blocked"}
    out = r.execute(plan, dry_run=False)
    assert out.status == "failed" and "chain stopped" in out.reason
    assert len(sources.admin.reruns) == 1


def test_a_rerun_that_dies_silently_green_again_stops_the_chain(tmp_path):
    sources, ref = setup()
    r = relauncher(sources, tmp_path)
    r.execute(r.plan(ref, LOST), dry_run=False)
    new = rerun_of(ref, "n1")
    sources.admin.finish(new)
    # the re-run's own attempt: the same code, SIGTERM, no outputs.pb
    from support.fakes import attempt

    a = replace(attempt(execution(new.name), "pipelinetrain"), task_id=TRAIN)
    row = sources.admin._by_ref[new]
    row.attempts.append(a)
    old = execution(new.name)  # its life around the signal, as the attempt's
    row.record = replace(row.record, created_at=old.created_at, updated_at=old.updated_at)
    signalled(sources.loki, a)
    wrote_outputs(sources.store, a, outputs=False)
    plan = r.plan(ref, LOST)
    assert states(plan) == {"n1": "failed", "n2": "blocked"}
    assert "silently green too" in plan.lost.steps[0].detail


def test_two_commands_at_once_create_each_node_once(tmp_path):
    sources, ref = setup()
    a, b = relauncher(sources, tmp_path), relauncher(sources, tmp_path)
    pa, pb = a.plan(ref, LOST), b.plan(ref, LOST)  # both see n1 to start
    outs = [a.execute(pa, dry_run=False), b.execute(pb, dry_run=False)]
    assert sorted(o.status for o in outs) == ["already-relaunched", "relaunched"]
    assert len(sources.admin.reruns) == 1


def test_a_lost_answer_is_this_commands_own_rerun_not_a_second(tmp_path):
    sources, ref = setup()
    sources.admin.lose_response = True
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(ref, LOST), dry_run=False)
    assert (out.status, out.after_retry) == ("relaunched", True)
    assert len(sources.admin.reruns) == 1 and sources.admin.calls["CreateExecution"] == 2


def test_a_dry_run_shows_the_single_task_request_and_sends_nothing(tmp_path):
    sources, ref = setup()
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(ref, LOST), dry_run=True)
    assert out.status == "dry-run"
    (req,) = out.request["only_lost"]
    assert req["name"] == rerun_name(ref, "n1")
    assert req["spec"]["metadata"] == {"mode": "MANUAL", "reference_execution": ref.as_dict()}
    assert sources.admin.calls["CreateExecution"] == 0


def test_a_branch_after_the_lost_node_is_refused_with_the_whole_relaunch_command(tmp_path):
    sources, ref = setup(eval_kind="branch")
    r = relauncher(sources, tmp_path)
    out = r.execute(r.plan(ref, LOST), dry_run=False)
    assert out.status == "refused"
    assert "node n2 is a branch node" in out.reason
    assert f"elastic-audit relaunch {ref}" in out.reason
    assert sources.admin.calls["CreateExecution"] == 0


def test_a_lost_attempt_inside_another_node_is_refused(tmp_path):
    sources, ref = setup()
    row = sources.admin._by_ref[ref]
    row.attempts[1] = replace(row.attempts[1], parent_node="n1")
    out = relauncher(sources, tmp_path).plan(ref, LOST)
    assert out.refusal and "runs inside node n1" in out.refusal


def test_a_recovered_copy_is_said_and_never_the_repair(tmp_path):
    sources, ref = setup()
    original = sources.admin.get_execution(ref)
    copy = replace(
        execution("r3c0v3r3dxxxxxxxxxxx", mode="RECOVERED", reference=ref),
        created_at=original.created_at,
    )
    sources.admin.add(copy)
    r = relauncher(sources, tmp_path)
    plan = r.plan(ref)
    assert plan.recovered == (copy.ref,) and plan.refusal is None and plan.existing is None
    assert any("copied the false success" in line for line in plan.lines())
    out = r.execute(plan, dry_run=False)
    assert out.relaunched_as == replace(ref, name=relaunch_name(ref))
    assert out.plan["recovered_as"] == [copy.ref.as_dict()]


def test_no_recovered_copy_leaves_the_plan_as_it_was(tmp_path):
    sources, ref = setup()
    plan = relauncher(sources, tmp_path).plan(ref)
    assert "recovered_as" not in plan.details() and "only_lost" not in plan.details()


def test_a_whole_relaunch_reuses_the_cached_prep_when_nothing_after_the_loss_is_cacheable(
    tmp_path,
):
    sources, ref = setup()
    plan = relauncher(sources, tmp_path).plan(ref)
    assert plan.request["overwrite_cache"] is False
    assert plan.cache.startswith("no overwrite_cache, because neither the lost node(s) nor")


def test_a_whole_relaunch_overwrites_when_a_node_after_the_loss_is_cacheable(tmp_path):
    sources, ref = setup(eval_cacheable=True)
    plan = relauncher(sources, tmp_path).plan(ref)
    assert plan.request["overwrite_cache"] is True
    assert plan.cache.startswith("overwrite_cache, because n2")


def test_the_operator_choice_of_overwrite_cache_wins(tmp_path):
    sources, ref = setup()
    plan = relauncher(sources, tmp_path).plan(ref, Options(overwrite_cache=True))
    assert plan.request["overwrite_cache"] is True


def test_the_pipeline_name_is_a_flyte_name():
    assert NAME.islower() and len(NAME) == 20


def test_a_lost_attempt_of_another_task_than_the_graph_names_is_refused(tmp_path):
    # a dynamic launch: the node's task in the graph is not what the attempt ran
    sources, ref = setup()
    row = sources.admin._by_ref[ref]
    row.attempts[1] = replace(row.attempts[1], task_id=EVAL)
    plan = relauncher(sources, tmp_path).plan(ref, LOST)
    assert (
        plan.refusal and "ran task pipeline.eval, not the task its workflow names" in plan.refusal
    )


def test_a_cacheable_node_after_the_loss_is_rerun_with_overwrite_cache(tmp_path):
    sources, ref = setup(eval_cacheable=True)
    r = relauncher(sources, tmp_path)
    plan = r.plan(ref, LOST)
    assert plan.cache.startswith("the re-runs of cacheable node(s) n2 send overwrite_cache")
    r.execute(plan, dry_run=False)
    sources.admin.finish(rerun_of(ref, "n1"))
    r.execute(r.plan(ref, LOST), dry_run=False)
    train, ev = sources.admin.reruns
    assert (train.overwrite_cache, ev.overwrite_cache) == (False, True)
    assert ev.data["spec"]["overwrite_cache"] is True


def test_the_plan_on_stderr_says_what_starts_what_it_keeps_and_where_the_chain_stopped(tmp_path):
    from forensics.formats.relaunch import plan_lines

    sources, ref = setup()
    r = relauncher(sources, tmp_path)
    plan = r.plan(ref, LOST)
    lines = plan_lines(plan)
    assert lines[0] == f"{ref}: will re-run only what was lost: n1"
    assert any("re-runs n1 (lost, pipeline.train v1): to-start" in x for x in lines)
    assert any(
        x.strip().startswith("does not re-run the finished: n0 (pipeline.prep") for x in lines
    )
    r.execute(plan, dry_run=False)
    sources.admin.finish(rerun_of(ref, "n1"), "FAILED")
    assert plan_lines(r.plan(ref, LOST))[0] == f"{ref}: only-lost chain stopped at node n1"


def test_a_whole_relaunch_is_refused_beside_running_only_lost_reruns(tmp_path):
    sources, ref = setup()
    r = relauncher(sources, tmp_path)
    r.execute(r.plan(ref, LOST), dry_run=False)
    plan = r.plan(ref)
    assert plan.refusal and plan.refusal.startswith("--only-lost re-runs it already: n1 as")
    assert r.execute(plan, dry_run=False).status == "refused"
    assert sources.admin.calls["RelaunchExecution"] == 0
    assert r.plan(ref, Options(force=True)).refusal is None


def test_the_plan_says_whether_the_rerun_sees_the_lost_attempts_checkpoint(tmp_path):
    sources, ref = setup()
    row = sources.admin._by_ref[ref]
    row.attempts[1] = replace(row.attempts[1], checkpoint_uri="s3://ckpt/pipeline/")
    sources.store.put("s3://ckpt/pipeline/step-100.pt")
    detail = relauncher(sources, tmp_path).plan(ref, LOST).lost.steps[0].detail
    assert "input checkpoint_dir points at the checkpoint s3://ckpt/pipeline/" in detail
    # a checkpoint no input names (Flyte's own per-attempt one) is not seen by a new execution
    row.attempts[1] = replace(row.attempts[1], checkpoint_uri="s3://meta/flytecheckpoints/")
    sources.store.put("s3://meta/flytecheckpoints/x")
    detail = relauncher(sources, tmp_path).plan(ref, LOST).lost.steps[0].detail
    assert "no input names the checkpoint s3://meta/flytecheckpoints/" in detail
