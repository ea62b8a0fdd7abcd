"""The sandbox's model of single-task executions and recovery, in process (no server): the
node id flyteadmin gives a task's execution, the compiled graph's bindings and connections, and
the sandbox propeller (`admin_runs`) running created executions against the scenario's files.
What each rule copies is cited in docs/upstream.md, "Single-task executions and recovery"."""

from __future__ import annotations

from flyteidl.core import literals_pb2

from forensics.sandbox.admin_protos import Mode, NodePhase, TaskPhase, WfPhase, literal_map
from forensics.sandbox.admin_runs import Outcome, Run, Runner, Step, recovery_steps, texts
from forensics.sandbox.admin_state import AdminState
from forensics.sandbox.admin_workflows import (
    compiled_graph,
    single_task_closure,
    single_task_node_id,
)
from forensics.sandbox.blobs import MemoryBlobs
from forensics.sandbox.only_lost import (
    BRANCHY,
    EVAL,
    EVAL_TASK,
    PIPELINE,
    PREP,
    RECOVERED_COPY,
    TRAIN,
    TRAIN_TASK,
    checkpoint_dir,
    dataset,
    graph,
    only_lost_scenario,
)
from forensics.sandbox.scenario import Scenario


def test_single_task_node_id_is_flyteadmins() -> None:
    # generateNodeNameFromTask: only '-', letters and digits, from the last 63 characters.
    assert single_task_node_id("staged.train") == "stagedtrain"
    assert single_task_node_id("my_pkg.my-task_2") == "mypkgmy-task2"
    long = "a." + "b" * 70
    assert single_task_node_id(long) == "b" * 63


def test_the_skeleton_binds_every_task_input_to_the_workflow_input() -> None:
    closure = single_task_closure(TRAIN_TASK)
    template = closure.primary.template
    assert template.id.name == ".flytegen.staged.train"
    assert template.id.version == TRAIN_TASK.version
    assert [n.id for n in template.nodes] == ["start-node", "stagedtrain", "end-node"]
    node = template.nodes[1]
    assert {b.var: (b.binding.promise.node_id, b.binding.promise.var) for b in node.inputs} == {
        "dataset": ("start-node", "dataset"),  # flyteadmin binds to "", compiled: start-node
        "checkpoint_dir": ("start-node", "checkpoint_dir"),
    }
    assert list(closure.primary.connections.upstream["stagedtrain"].ids) == ["start-node"]


def test_the_pipeline_compiles_with_flytekits_upstreams_and_the_compilers_connections() -> None:
    wf = compiled_graph(only_lost_ids(), graph(), ("corpus", "checkpoint_dir"))
    template = wf.primary.template
    ids = [n.id for n in template.nodes]
    assert ids == ["start-node", PREP, TRAIN, EVAL, "end-node"]
    by_id = {n.id: n for n in template.nodes}
    assert list(by_id[TRAIN].upstream_node_ids) == [PREP]
    assert list(by_id[EVAL].upstream_node_ids) == [PREP, TRAIN]  # data from n0, `>>` after n1
    assert {b.var: b.binding.promise.node_id for b in by_id[EVAL].inputs} == {
        "dataset": PREP,
        "checkpoint_dir": "start-node",
    }
    up = {k: list(v.ids) for k, v in wf.primary.connections.upstream.items()}
    down = {k: list(v.ids) for k, v in wf.primary.connections.downstream.items()}
    assert up == {
        PREP: ["start-node"],
        TRAIN: [PREP, "start-node"],
        EVAL: [PREP, TRAIN, "start-node"],
        "end-node": [EVAL],
    }
    assert down["start-node"] == [PREP, TRAIN, EVAL]
    assert down[TRAIN] == [EVAL]
    assert not by_id[TRAIN].HasField("branch_node")


def test_the_branchy_workflow_wraps_training_in_a_branch_node() -> None:
    wf = compiled_graph(only_lost_ids(), graph(branch=True), ("corpus", "checkpoint_dir"))
    train = {n.id: n for n in wf.primary.template.nodes}[TRAIN]
    case = train.branch_node.if_else.case.then_node
    assert case.id == f"{TRAIN}-n0"
    assert case.task_node.reference_id.name == TRAIN_TASK.name


def only_lost_ids():
    from flyteidl.core import identifier_pb2

    return identifier_pb2.Identifier(
        resource_type=identifier_pb2.WORKFLOW,
        project=PIPELINE.project,
        domain=PIPELINE.domain,
        name="wf.staged",
        version="v1",
    )


# -- the sandbox propeller, in process --------------------------------------------------------


def _runner(scenario: Scenario | None = None) -> tuple[AdminState, Runner, MemoryBlobs, Outcome]:
    scenario = scenario or only_lost_scenario()
    state = AdminState(scenario, "{project}-{domain}")
    blobs = MemoryBlobs(scenario)
    outcome = Outcome(set(), set())
    return state, Runner(state, blobs, lambda: outcome), blobs, outcome


def _create(state: AdminState, name: str, inputs: dict[str, str]) -> tuple[str, str, str]:
    from flyteidl.admin import execution_pb2

    spec = execution_pb2.ExecutionSpec()
    state.insert(spec, PIPELINE.project, PIPELINE.domain, name, literal_map(dict(inputs)))
    return (PIPELINE.project, PIPELINE.domain, name)


def _phases(state: AdminState, key: tuple[str, str, str]) -> dict[str, str]:
    return {
        n.proto.id.node_id: NodePhase.Name(n.proto.closure.phase)
        for n in state.executions[key].nodes
    }


def test_a_task_run_succeeds_writing_its_inputs_and_declared_outputs() -> None:
    state, runner, blobs, _ = _runner()
    inputs = {"dataset": dataset(PIPELINE), "checkpoint_dir": checkpoint_dir(PIPELINE)}
    key = _create(state, "rerun-eval", inputs)
    step = Step("stagedeval", EVAL_TASK, bindings={v: ("", v) for v in EVAL_TASK.inputs})
    runner.add(Run(key, 0.0, [step], inputs=inputs))
    runner.advance()
    rec = state.executions[key]
    assert WfPhase.Name(rec.execution.closure.phase) == "SUCCEEDED"
    assert _phases(state, key) == {
        "start-node": "SUCCEEDED",
        "stagedeval": "SUCCEEDED",
        "end-node": "SUCCEEDED",
    }
    node = next(n for n in rec.nodes if n.proto.id.node_id == "stagedeval")
    assert texts(node.inputs) == inputs
    assert [t.id.retry_attempt for t in node.tasks] == [0]
    written = literals_pb2.LiteralMap()
    written.ParseFromString(blobs.read(node.proto.closure.output_uri))
    assert set(texts(written)) == {"metrics"}
    assert texts(rec.outputs) == texts(written)  # the skeleton's outputs are the task's
    stored = literals_pb2.LiteralMap()
    stored.ParseFromString(blobs.read(node.proto.input_uri))
    assert texts(stored) == inputs


def test_a_failing_task_fails_the_run_and_stops_it() -> None:
    state, runner, blobs, outcome = _runner()
    outcome.failing_tasks.add(TRAIN_TASK.name)
    key = _create(state, "rerun-train", {})
    steps = [
        Step(TRAIN, TRAIN_TASK, inputs={"dataset": "d", "checkpoint_dir": "c"}),
        Step(EVAL, EVAL_TASK, inputs={"dataset": "d", "checkpoint_dir": "c"}),
    ]
    runner.add(Run(key, 0.0, steps))
    runner.advance()
    closure = state.executions[key].execution.closure
    assert WfPhase.Name(closure.phase) == "FAILED"
    assert closure.error.message.startswith(f"[{TRAIN}]: ")
    assert _phases(state, key) == {"start-node": "SUCCEEDED", TRAIN: "FAILED"}  # eval never ran
    node = state.executions[key].nodes[-1]
    data_dir = node.proto.input_uri.removesuffix("/inputs.pb")
    assert blobs.read(f"{data_dir}/0/error.pb") is not None
    assert blobs.read(f"{data_dir}/0/outputs.pb") is None


def test_a_silent_task_succeeds_without_outputs_pb() -> None:
    state, runner, blobs, outcome = _runner()
    outcome.silent_tasks.add(TRAIN_TASK.name)
    key = _create(state, "rerun-silent", {})
    runner.add(Run(key, 0.0, [Step(TRAIN, TRAIN_TASK, inputs={"dataset": "d"})]))
    runner.advance()
    node = state.executions[key].nodes[-2]
    assert NodePhase.Name(node.proto.closure.phase) == "SUCCEEDED"
    assert blobs.read(node.proto.closure.output_uri) is None


def test_a_held_run_stays_running_until_finished() -> None:
    state, runner, _, _ = _runner()
    runner.run_seconds = None
    key = _create(state, "held", {})
    runner.add(Run(key, 0.0, [Step(TRAIN, TRAIN_TASK, inputs={})]))
    runner.advance()
    assert WfPhase.Name(state.executions[key].execution.closure.phase) == "RUNNING"
    runner.advance(finish_all=True)
    assert WfPhase.Name(state.executions[key].execution.closure.phase) == "SUCCEEDED"


def test_recovery_copies_every_succeeded_node_and_the_lost_ones_empty_outputs() -> None:
    state, runner, blobs, _ = _runner()
    original = state.executions[(PIPELINE.project, PIPELINE.domain, PIPELINE.name)]
    steps = recovery_steps(original, graph())
    assert [(s.node_id, s.recover is not None) for s in steps] == [
        (PREP, True),
        (TRAIN, True),  # SUCCEEDED without outputs.pb: copied all the same
        (EVAL, True),
    ]
    key = _create(state, "recovered", texts(original.inputs))
    runner.add(Run(key, 0.0, steps, inputs=texts(original.inputs)))
    runner.advance()
    rec = state.executions[key]
    assert WfPhase.Name(rec.execution.closure.phase) == "SUCCEEDED"
    assert _phases(state, key) == {
        "start-node": "SUCCEEDED",
        PREP: "RECOVERED",
        TRAIN: "RECOVERED",
        EVAL: "RECOVERED",
        "end-node": "SUCCEEDED",
    }
    by_id = {n.proto.id.node_id: n for n in rec.nodes}
    assert all(not by_id[n].tasks for n in (PREP, TRAIN, EVAL))  # copied, never run
    lost = blobs.read(by_id[TRAIN].proto.closure.output_uri)
    assert lost == b""  # an EMPTY LiteralMap, written as the recovered node's outputs.pb
    prep = literals_pb2.LiteralMap()
    prep.ParseFromString(blobs.read(by_id[PREP].proto.closure.output_uri))
    assert texts(prep) == {"dataset": dataset(PIPELINE)}


def test_recovery_runs_what_did_not_succeed_on_the_copied_outputs() -> None:
    scenario = only_lost_scenario()
    ex = next(e for e in scenario.executions if e.name == PIPELINE.name)
    ex.phase = "FAILED"
    ex.nodes[-1].phase = "FAILED"
    ex.nodes[-1].attempts[0].phase = "FAILED"
    state, runner, _, _ = _runner(scenario)
    original = state.executions[(PIPELINE.project, PIPELINE.domain, PIPELINE.name)]
    steps = recovery_steps(original, graph())
    assert [(s.node_id, s.recover is not None) for s in steps][-1] == (EVAL, False)
    key = _create(state, "recovered-eval", texts(original.inputs))
    runner.add(Run(key, 0.0, steps, inputs=texts(original.inputs)))
    runner.advance()
    evaluation = next(n for n in state.executions[key].nodes if n.proto.id.node_id == EVAL)
    assert NodePhase.Name(evaluation.proto.closure.phase) == "SUCCEEDED"
    assert texts(evaluation.inputs) == {
        "dataset": dataset(PIPELINE),  # n0's recovered outputs
        "checkpoint_dir": checkpoint_dir(PIPELINE),  # the workflow's input
    }


def test_the_scenario_records_every_nodes_inputs_and_the_lost_attempts_missing_outputs() -> None:
    scenario = only_lost_scenario()
    blobs = MemoryBlobs(scenario)
    for ref in (PIPELINE, BRANCHY):
        ex = next(e for e in scenario.executions if e.name == ref.name)
        for node in ex.nodes:
            if not node.attempts:
                continue  # the branch node itself runs no task
            stored = literals_pb2.LiteralMap()
            stored.ParseFromString(blobs.read(f"{ex.node_data_dir(node.node_id)}/inputs.pb"))
            assert texts(stored) == node.inputs
            outputs = blobs.read(f"{ex.node_data_dir(node.node_id)}/0/outputs.pb")
            assert (outputs is None) == (node.attempts[0].task is TRAIN_TASK)


def test_a_started_run_shows_its_node_and_attempt_running() -> None:
    state, runner, blobs, _ = _runner()
    runner.run_seconds = None
    inputs = {"dataset": "d", "checkpoint_dir": "c"}
    key = _create(state, "running", inputs)
    step = Step("stagedtrain", TRAIN_TASK, bindings={v: ("", v) for v in TRAIN_TASK.inputs})
    runner.add(Run(key, 0.0, [step], inputs=inputs))
    runner.advance()
    assert _phases(state, key) == {"start-node": "SUCCEEDED", "stagedtrain": "RUNNING"}
    node = state.executions[key].nodes[-1]
    assert [TaskPhase.Name(t.closure.phase) for t in node.tasks] == ["RUNNING"]
    assert blobs.read(node.proto.input_uri) is not None  # written before the node runs
    runner.advance(finish_all=True)
    assert _phases(state, key) == {
        "start-node": "SUCCEEDED",
        "stagedtrain": "SUCCEEDED",
        "end-node": "SUCCEEDED",
    }


def test_the_seeded_recovered_copy_is_what_the_sandboxs_recovery_makes() -> None:
    scenario = only_lost_scenario(recovered=True)
    state, runner, blobs, _ = _runner(scenario)
    seeded = state.executions[(RECOVERED_COPY.project, RECOVERED_COPY.domain, RECOVERED_COPY.name)]
    meta = seeded.execution.spec.metadata
    assert Mode.Name(meta.mode) == "RECOVERED" and meta.reference_execution.name == PIPELINE.name
    original = state.executions[(PIPELINE.project, PIPELINE.domain, PIPELINE.name)]
    key = _create(state, "recovered-now", texts(original.inputs))
    runner.add(Run(key, 0.0, recovery_steps(original, graph()), inputs=texts(original.inputs)))
    runner.advance()

    def shape(rec) -> dict[str, tuple[str, bytes | None, dict[str, str], int]]:
        return {
            n.proto.id.node_id: (
                NodePhase.Name(n.proto.closure.phase),
                blobs.read(n.proto.closure.output_uri) if n.proto.closure.output_uri else None,
                texts(n.inputs),
                len(n.tasks),
            )
            for n in rec.nodes
        }

    assert shape(seeded) == shape(state.executions[key])
    assert shape(seeded)[TRAIN][:2] == ("RECOVERED", b"")
