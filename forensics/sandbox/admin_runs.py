"""The sandbox's propeller: runs the executions the sandbox Admin creates — a single-task
CreateExecution and a RecoverExecution — to completion, leaving node and task executions in Admin
and inputs.pb / outputs.pb / error.pb in the metadata bucket as propeller and flytekit would.

A created execution is QUEUED; the first Admin request after its creation starts it (RUNNING, its
node and attempt RUNNING, inputs.pb written); the first request once `run_seconds` have passed
since its creation finishes it. `run_seconds` 0 finishes it on that first request; None holds it
RUNNING until `finish` is called. Every step happens inside a request (or `advance`), so tests
see the same states in the same order whatever the machine's speed.

Recovery follows flytepropeller v1.16.8 `nodes/executor.go` attemptRecovery: every node whose
recorded phase is SUCCEEDED (or RECOVERED) is copied, not run — phase RECOVERED, its inputs
copied, its outputs taken from Admin's GetNodeExecutionData, which answers a missing outputs.pb
with an empty LiteralMap (flyteadmin `util/data.go` GetOutputs) and written as the new node's
outputs.pb; only the other nodes run. docs/upstream.md, "Single-task executions and recovery".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from flyteidl.core import execution_pb2 as core_execution_pb2
from flyteidl.core import literals_pb2

from forensics.evidence.flyte_names import generated_name
from forensics.model import UTC
from forensics.sandbox.admin_protos import (
    NodePhase,
    WfPhase,
    literal_map,
    node_proto,
    set_duration,
    set_time,
)
from forensics.sandbox.admin_state import AdminState, ExecRow, NodeRow
from forensics.sandbox.admin_workflows import START_NODE
from forensics.sandbox.blobs import INPUTS_FILE, OUTPUTS_FILE, Blobs, error_pb
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxNode,
    SandboxTask,
    SandboxWorkflowNode,
)

# A re-run attempt's reason when the task is made to fail (`AdminFaults.failing_tasks`).
FAILED_REASON = "injected failure: the task raised"
DONE = frozenset({"SUCCEEDED", "RECOVERED"})


@dataclass
class Step:
    """One top-level node of a created execution: run `task` on `inputs`, or copy (`recover`)
    the original's node `node_id`."""

    node_id: str
    task: SandboxTask | None
    inputs: dict[str, str] = field(default_factory=dict)
    bindings: dict[str, tuple[str, str]] | None = None  # resolve inputs from earlier outputs
    recover: NodeRow | None = None  # the original's node to copy


@dataclass
class Run:
    """A created execution propeller has yet to finish."""

    key: tuple[str, str, str]
    created: float  # time.monotonic() at creation
    steps: list[Step]
    started: bool = False
    inputs: dict[str, str] = field(default_factory=dict)  # the execution's inputs (bindings)


@dataclass
class Outcome:
    """What `AdminFaults` decides for a task's attempt when it finishes."""

    failing_tasks: set[str]
    silent_tasks: set[str]


def texts(m: literals_pb2.LiteralMap) -> dict[str, str]:
    """A LiteralMap's string literals (the sandbox's only type)."""
    return {k: v.scalar.primitive.string_value for k, v in m.literals.items()}


def rerun_output(execution: str, node_id: str, name: str) -> str:
    """The value a re-run writes for its output `name`: a location under its own execution."""
    return f"s3://flyte-data/{execution}/{node_id}/{name}"


class Runner:
    """Advances created executions; called with the state's lock held."""

    def __init__(self, state: AdminState, blobs: Blobs, outcome: Callable[[], Outcome]) -> None:
        self.state = state
        self.blobs = blobs
        self.outcome = outcome
        self.runs: dict[tuple[str, str, str], Run] = {}
        self.run_seconds: float | None = 0.0

    def add(self, run: Run) -> None:
        self.runs[run.key] = run

    def advance(self, finish_all: bool = False) -> None:
        """Start every queued run; finish those whose time has come (all, with `finish_all`)."""
        if not self.runs:
            return
        now = time.monotonic()
        for key, run in list(self.runs.items()):
            if not run.started:
                self._start(run)
            due = self.run_seconds is not None and now - run.created >= self.run_seconds
            if finish_all or due:
                self._finish(run)
                del self.runs[key]
        self.state.version += 1

    # -- the execution's rows ---------------------------------------------------------------

    def _sandbox_execution(self, rec: ExecRow) -> SandboxExecution:
        i = rec.execution.id
        created = rec.execution.closure.created_at.ToDatetime(tzinfo=UTC)
        return SandboxExecution(i.project, i.domain, i.name, "RUNNING", created, created)

    def _start(self, run: Run) -> None:
        rec = self.state.executions[run.key]
        now = datetime.now(UTC)
        closure = rec.execution.closure
        closure.phase = WfPhase.Value("RUNNING")
        set_time(closure, "started_at", now)
        set_time(closure, "updated_at", now)
        ex = self._sandbox_execution(rec)
        start = node_proto(ex, START_NODE, "SUCCEEDED", now, now)
        rec.nodes.append(NodeRow(self.state.next_row(), start, None))
        run.started = True
        first = run.steps[0] if run.steps else None
        if first is not None and first.recover is None and first.task is not None:
            # Its first task node starts: inputs.pb written (preExecute), one attempt RUNNING.
            inputs, missing = self._resolve(first, {START_NODE: run.inputs, "": run.inputs})
            if missing:
                return
            data_dir = ex.node_data_dir(first.node_id)
            self.blobs.write(f"{data_dir}/{INPUTS_FILE}", _literal_map(inputs).SerializeToString())
            attempt = SandboxAttempt(
                0, "RUNNING", now, None, _pods(ex.name, first.node_id, first.task), first.task
            )
            node = SandboxNode(first.node_id, "RUNNING", [attempt], inputs=inputs)
            rec.nodes.append(self.state.node_row(ex, node))

    def _finish(self, run: Run) -> None:
        rec = self.state.executions[run.key]
        ex = self._sandbox_execution(rec)
        outcome = self.outcome()
        rec.nodes = [n for n in rec.nodes if n.proto.id.node_id == START_NODE]  # RUNNING ones go
        outputs: dict[str, dict[str, str]] = {START_NODE: dict(run.inputs), "": dict(run.inputs)}
        failed: str | None = None  # the failed node
        last: dict[str, str] = {}
        for step in run.steps:
            if failed:
                break
            if step.recover is not None:
                last = self._recover(ex, rec, step)
                outputs[step.node_id] = last
                continue
            inputs, missing = self._resolve(step, outputs)
            phase, last = self._run_task(ex, rec, step, inputs, missing, outcome)
            outputs[step.node_id] = last
            failed = step.node_id if phase != "SUCCEEDED" else None
        now = datetime.now(UTC)
        closure = rec.execution.closure
        closure.phase = WfPhase.Value("FAILED" if failed else "SUCCEEDED")
        if failed:
            # the failed node's error, as propeller reports the workflow's failure
            closure.error.CopyFrom(
                core_execution_pb2.ExecutionError(
                    code="USER:RuntimeError",
                    message=f"[{failed}]: {FAILED_REASON}",
                    kind=core_execution_pb2.ExecutionError.USER,
                )
            )
        set_time(closure, "updated_at", now)
        set_duration(closure, closure.started_at.ToDatetime(tzinfo=UTC), now)
        if not failed:
            end = node_proto(ex, "end-node", "SUCCEEDED", now, now)
            rec.nodes.append(NodeRow(self.state.next_row(), end, None))
            if len(run.steps) == 1 and run.steps[0].recover is None:
                rec.outputs = _literal_map(last)  # a single task's workflow outputs are its own

    @staticmethod
    def _resolve(
        step: Step, outputs: dict[str, dict[str, str]]
    ) -> tuple[dict[str, str], list[str]]:
        """The step's inputs: its bindings resolved against earlier outputs, else as given."""
        if step.bindings is None:
            return dict(step.inputs), []
        inputs, missing = {}, []
        for var, (node, name) in step.bindings.items():
            value = outputs.get(node, {}).get(name)
            if value is None:
                missing.append(f"{node}.{name}")
            else:
                inputs[var] = value
        return inputs, missing

    def _run_task(
        self,
        ex: SandboxExecution,
        rec: ExecRow,
        step: Step,
        inputs: dict[str, str],
        missing: list[str],
        outcome: Outcome,
    ) -> tuple[str, dict[str, str]]:
        """One attempt of `step.task`; (its phase, the outputs it wrote)."""
        task = step.task
        assert task is not None
        now = datetime.now(UTC)
        started = rec.execution.closure.started_at.ToDatetime(tzinfo=UTC)
        data_dir = ex.node_data_dir(step.node_id)
        if missing:
            # propeller's Resolve fails before the node runs: no attempt, the node FAILED.
            node = SandboxNode(step.node_id, "FAILED", inputs=dict(inputs))
            row = self.state.node_row(ex, node)
            row.proto.closure.error.message = (
                f"failed to resolve inputs: no output {', '.join(missing)} upstream"
            )
            rec.nodes.append(row)
            return "FAILED", {}
        self.blobs.write(f"{data_dir}/{INPUTS_FILE}", _literal_map(inputs).SerializeToString())
        fails = task.name in outcome.failing_tasks
        silent = task.name in outcome.silent_tasks
        declared = task.outputs or (("o0",) if task.has_outputs else ())
        written = {n: rerun_output(ex.name, step.node_id, n) for n in declared}
        attempt = SandboxAttempt(
            attempt=0,
            phase="FAILED" if fails else "SUCCEEDED",
            started_at=started,
            ended_at=max(now, started + timedelta(milliseconds=1)),
            pods=_pods(ex.name, step.node_id, task),
            task=task,
            reason=FAILED_REASON if fails else "",
        )
        node = SandboxNode(step.node_id, attempt.phase, [attempt], inputs=dict(inputs))
        rec.nodes.append(self.state.node_row(ex, node))
        out_dir = f"{data_dir}/0"
        if fails:
            self.blobs.write(f"{out_dir}/error.pb", error_pb("FAILED", FAILED_REASON, now))
            return "FAILED", {}
        if silent:  # the incident again: SUCCEEDED, nothing uploaded
            return "SUCCEEDED", {}
        self.blobs.write(f"{out_dir}/{OUTPUTS_FILE}", _literal_map(written).SerializeToString())
        return "SUCCEEDED", written

    def _recover(self, ex: SandboxExecution, rec: ExecRow, step: Step) -> dict[str, str]:
        """attemptRecovery: copy the original node's inputs and outputs, phase RECOVERED."""
        original = step.recover
        assert original is not None
        # GetNodeExecutionData's full_outputs: the outputs.pb at the closure's output_uri, or
        # an empty LiteralMap when it is missing (GetOutputs logs a warning and goes on).
        outputs = literals_pb2.LiteralMap()
        body = self.blobs.read(original.proto.closure.output_uri or "-")
        if body is not None:
            outputs.ParseFromString(body)
        now = datetime.now(UTC)
        data_dir = ex.node_data_dir(step.node_id)
        self.blobs.write(f"{data_dir}/{INPUTS_FILE}", original.inputs.SerializeToString())
        self.blobs.write(f"{data_dir}/0/{OUTPUTS_FILE}", outputs.SerializeToString())
        proto = node_proto(ex, step.node_id, "RECOVERED", now, now)
        proto.metadata.spec_node_id = original.proto.metadata.spec_node_id or step.node_id
        proto.closure.output_uri = f"{data_dir}/0/{OUTPUTS_FILE}"
        proto.closure.task_node_metadata.cache_status = (
            original.proto.closure.task_node_metadata.cache_status
        )
        inputs = literals_pb2.LiteralMap()
        inputs.CopyFrom(original.inputs)
        rec.nodes.append(NodeRow(self.state.next_row(), proto, None, inputs=inputs))
        return texts(outputs)


def recovery_steps(original: ExecRow, graph: list[SandboxWorkflowNode]) -> list[Step]:
    """The top-level nodes of a recovery of `original`, in the order propeller reaches them:
    the declared graph's when there is one, else the original's node executions'."""
    rows = {r.proto.id.node_id: r for r in original.nodes if r.parent is None}
    steps = []
    if graph:
        for n in _topological(graph):
            row = rows.get(n.node_id)
            if row is not None and NodePhase.Name(row.proto.closure.phase) in DONE:
                steps.append(Step(n.node_id, n.task, recover=row))
            else:
                steps.append(Step(n.node_id, n.task, bindings=dict(n.bindings)))
        return steps
    for node_id, row in rows.items():
        if node_id in (START_NODE, "end-node"):
            continue
        if NodePhase.Name(row.proto.closure.phase) in DONE:
            steps.append(Step(node_id, None, recover=row))
        elif row.task_defs:
            steps.append(Step(node_id, row.task_defs[-1], inputs=texts(row.inputs)))
    return steps


def _topological(graph: list[SandboxWorkflowNode]) -> list[SandboxWorkflowNode]:
    """Declared order, each node after the nodes it waits for (bindings and `upstream`)."""
    by_id = {n.node_id: n for n in graph}
    done: set[str] = set()
    out: list[SandboxWorkflowNode] = []

    def visit(n: SandboxWorkflowNode) -> None:
        if n.node_id in done:
            return
        done.add(n.node_id)
        for dep in [*(b for b, _ in n.bindings.values()), *n.upstream]:
            if dep in by_id:
                visit(by_id[dep])
        out.append(n)

    for n in graph:
        visit(n)
    return out


def _pods(execution: str, node_id: str, task: SandboxTask) -> list[str]:
    name = generated_name([execution, node_id, 0])
    if task.task_type == "pytorch":
        workers = task.worker_replicas or 1
        return [f"{name}-master-0", *(f"{name}-worker-{i}" for i in range(workers - 1))]
    return [name]


def _literal_map(values: dict[str, str]) -> literals_pb2.LiteralMap:
    return literal_map(dict(values))
