"""`relaunch --only-lost`: re-run only what was lost, never the finished work before it.

Each lost node (the node of an attempt the re-check proves affected or suspected) is re-run as
a single-task execution of the same task version (flyteadmin `launchSingleTaskExecution`:
CreateExecution whose launch plan is the TASK identifier) with the node's recorded inputs, so a
checkpoint input points at what the attempt saved; then each node after it in the original
graph, once the re-runs of the nodes it runs after succeeded, with its own recorded inputs and a
re-run's new outputs where its binding read them. Each re-run has one deterministic name per
(execution, node): Admin's ALREADY_EXISTS is the lock, so running the command again (or from two
terminals) starts each node once and reports where each stands. A re-run that fails, or that
ends silently green again, stops the chain (docs/commands.md, "relaunch --only-lost").

Only top-level task nodes are re-run: a shape whose replay would not be faithful (branch,
sub-workflow, launch-plan, gate and array nodes, dynamic parents, a lost attempt inside any of
them) is refused with the whole-relaunch command (docs/upstream.md, "Re-running only what was
lost", says why for each).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from forensics.errors import NotFoundError
from forensics.model import TERMINAL_EXECUTION_PHASES, AttemptRecord, ExecutionRef
from forensics.sources.admin_types import Literals, RerunRequest, rerun_labels

if TYPE_CHECKING:
    from forensics.relaunch.recheck import Recheck
    from forensics.sources.admin_types import GraphNode, TaskId, WorkflowGraph
    from forensics.sources.interfaces import RelaunchAdmin

HOUR = 3600.0

# Why each node kind cannot be replayed as one task (docs/upstream.md, "Re-running only what
# was lost"): flyteidl `core/workflow.proto` targets, propeller's handlers.
UNSUPPORTED = {
    "branch": "a branch node (propeller picks the branch from inputs at run time; a single "
    "task cannot replay that choice)",
    "sub-workflow": "a sub-workflow node (its nodes run inside it, not as one task)",
    "launch-plan": "a launch-plan node (it launches another execution with its own graph)",
    "gate": "a gate node (an approval, signal or sleep: no task to re-run)",
    "array": "a map (array) node (its subtasks and their outputs are gathered by propeller)",
    "other": "a node of a kind this tool does not read",
}

STATES = ("succeeded", "running", "failed", "to-start", "started", "waiting", "blocked")


def rerun_name(ref: ExecutionRef, node_id: str) -> str:
    """The one name every re-run of node `node_id` of `ref` gets (20 chars, `^[a-z][a-z0-9]*$`)."""
    digest = hashlib.sha256(f"{ref}/{node_id}".encode()).digest()
    return "o" + base64.b32encode(digest).decode().lower().rstrip("=")[:19]


def whole_command(ref: ExecutionRef) -> str:
    """The command that relaunches the whole execution instead."""
    return f"elastic-audit relaunch {ref}"


@dataclass(frozen=True)
class NodeStep:
    """One node of the chain: the lost node or one after it, and where its re-run stands."""

    node_id: str
    role: str  # "lost" | "after"
    task: TaskId
    execution: ExecutionRef  # the re-run's deterministic name
    state: str  # one of STATES
    detail: str = ""
    phase: str | None = None  # the re-run's phase, once it exists
    substituted: tuple[str, ...] = ()  # inputs taken from a re-run's outputs: "var <- node.out"
    request: RerunRequest | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, object]:
        return {
            "node": self.node_id,
            "role": self.role,
            "task": ":".join(self.task),
            "execution": self.execution.as_dict(),
            "state": self.state,
            "phase": self.phase,
            "detail": self.detail or None,
            "substituted": list(self.substituted),
        }

    def line(self) -> str:
        what = f"{self.node_id} ({self.role}, {self.task[2]} {self.task[3]})"
        text = f"{what}: {self.state} as {self.execution.name}"
        return text + (f" — {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class NodeCost:
    """What one node's finished run took: run time, GPU-hours and CPU-hours (None: unknown)."""

    node_id: str
    task: str
    run_seconds: float | None
    gpu_hours: float | None
    cpu_hours: float | None

    def as_dict(self) -> dict[str, object]:
        return {
            "node": self.node_id,
            "task": self.task,
            "run_seconds": self.run_seconds,
            "gpu_hours": self.gpu_hours,
            "cpu_hours": self.cpu_hours,
        }


@dataclass(frozen=True)
class LostChain:
    """The chain `--only-lost` re-runs and what it does not re-run."""

    steps: tuple[NodeStep, ...]
    kept: tuple[NodeCost, ...]  # finished nodes not re-run
    rerun: tuple[NodeCost, ...]  # what the re-run nodes took the first time
    cache: str = ""  # which re-runs send overwrite_cache, and why

    @property
    def failed(self) -> NodeStep | None:
        return next((s for s in self.steps if s.state == "failed"), None)

    @property
    def to_start(self) -> tuple[NodeStep, ...]:
        return tuple(s for s in self.steps if s.state == "to-start")

    @property
    def done(self) -> bool:
        return all(s.state == "succeeded" for s in self.steps)

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": [s.as_dict() for s in self.steps],
            "not_rerun": [c.as_dict() for c in self.kept],
            "saved": _totals(self.kept),
            "whole_relaunch": _totals(self.kept + self.rerun),
        }

    def lines(self) -> list[str]:
        out = [f"re-runs {s.line()}" for s in self.steps]
        if self.kept:
            kept = ", ".join(f"{c.node_id} ({c.task}, {_words(_totals([c]))})" for c in self.kept)
            out.append(f"does not re-run the finished: {kept}")
        saved, whole = _totals(self.kept), _totals(self.kept + self.rerun)
        out.append(f"saves {_words(saved)} of a whole relaunch's {_words(whole)}")
        return out


def _sum(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else round(sum(v or 0.0 for v in values), 4)


def _totals(costs: Sequence[NodeCost]) -> dict[str, float | None]:
    return {
        "run_seconds": _sum([c.run_seconds for c in costs]),
        "gpu_hours": _sum([c.gpu_hours for c in costs]),
        "cpu_hours": _sum([c.cpu_hours for c in costs]),
    }


def _words(t: dict[str, float | None]) -> str:
    def num(v: float | None, unit: str) -> str:
        return f"? {unit}" if v is None else f"{v:g} {unit}"

    run = t["run_seconds"]
    run_text = "? run time" if run is None else f"{run / HOUR:.2f} h run time"
    return f"{run_text}, {num(t['gpu_hours'], 'GPU-h')}, {num(t['cpu_hours'], 'CPU-h')}"


# -- planning -----------------------------------------------------------------------------------


def refusal_for(
    graph: WorkflowGraph, lost: Sequence[AttemptRecord], attempts: Sequence[AttemptRecord]
) -> tuple[list[str], list[str]]:
    """(the lost top-level nodes, the reasons --only-lost must refuse: empty when it can go)."""
    reasons: list[str] = []
    nodes: list[str] = []
    for a in lost:
        node = a.ref.node_id
        if a.parent_node is not None:
            reasons.append(
                f"lost attempt {node}/{a.ref.attempt} runs inside node {a.parent_node} (a "
                "sub-workflow, branch or dynamic parent): its inputs are bound inside that node"
            )
        elif a.array_node is not None or a.is_array:
            reasons.append(f"lost node {a.array_node or node} is {UNSUPPORTED['array']}")
        elif graph.node(node) is None:
            reasons.append(f"lost node {node} is not a top-level node of {graph.workflow[2]}")
        elif _ran_other_task(graph, a):
            reasons.append(
                f"lost node {node} ran task {a.task_id and a.task_id[2]}, not the task its "
                "workflow names (launched dynamically): which task to re-run cannot be read "
                "from the graph"
            )
        else:
            nodes.append(node)
    nodes = list(dict.fromkeys(nodes))
    order = chain_of(graph, nodes)
    parents = {a.parent_node for a in attempts if a.parent_node is not None}
    for node_id in order:
        n = graph.node(node_id)
        assert n is not None
        if n.kind != "task":
            reasons.append(f"node {node_id} is {UNSUPPORTED.get(n.kind, UNSUPPORTED['other'])}")
        elif node_id in parents:
            reasons.append(
                f"node {node_id} is a dynamic parent (its children are compiled at run time)"
            )
        elif node_id not in nodes:
            loose = [b.var for b in n.bindings if not b.plain]
            if loose:
                reasons.append(
                    f"node {node_id}'s input(s) {', '.join(loose)} are collections or maps of "
                    "promises: a re-run's outputs cannot be put in their place"
                )
    return nodes, list(dict.fromkeys(reasons))


def _ran_other_task(graph: WorkflowGraph, a: AttemptRecord) -> bool:
    n = graph.node(a.ref.node_id)
    return n is not None and None not in (n.task, a.task_id) and n.task != a.task_id


def chain_of(graph: WorkflowGraph, lost: Sequence[str]) -> list[str]:
    """The lost nodes and every node after them, in an order where each follows its upstream."""
    after: dict[str, set[str]] = {n.node_id: set() for n in graph.nodes}
    for n in graph.nodes:
        for u in n.upstream:
            after.setdefault(u, set()).add(n.node_id)
    reach, todo = set(lost), list(lost)
    while todo:
        for d in after.get(todo.pop(), ()):
            if d not in reach:
                reach.add(d)
                todo.append(d)
    order: list[str] = []
    pending = [n for n in graph.nodes if n.node_id in reach]
    while pending:
        ready = [n for n in pending if all(u not in reach or u in order for u in n.upstream)]
        if not ready:  # a cycle cannot compile; keep the closure's order rather than loop
            ready = pending[:1]
        for n in ready:
            order.append(n.node_id)
        pending = [n for n in pending if n.node_id not in order]
    return order


def plan_chain(
    admin: RelaunchAdmin,
    recheck: Callable[[ExecutionRef], Recheck],
    ref: ExecutionRef,
    graph: WorkflowGraph,
    lost: Sequence[str],
    attempts: Sequence[AttemptRecord],
    checkpoint: str | None = None,
) -> LostChain:
    """Where each node of the chain stands, and the request of each node that can start now;
    `checkpoint` the lost attempt's checkpoint location (whether a re-run sees it is said).
    Raises SourceError when Admin cannot say (nothing is started on a guess)."""
    order = chain_of(graph, lost)
    members = set(order)
    steps: dict[str, NodeStep] = {}
    for node_id in order:
        n = graph.node(node_id)
        assert n is not None and n.task is not None
        step = _state(admin, recheck, ref, n, "lost" if node_id in lost else "after")
        if step.state == "not-started":
            ups = [steps[u] for u in n.upstream if u in members]
            stuck = [u for u in ups if u.state in ("failed", "blocked")]
            waiting = [u for u in ups if u.state != "succeeded"]
            if stuck:
                step = replace(
                    step, state="blocked", detail=f"{stuck[0].node_id}'s re-run did not succeed"
                )
            elif waiting:
                step = replace(
                    step,
                    state="waiting",
                    detail="waits for the re-run of " + ", ".join(u.node_id for u in waiting),
                )
            else:
                step = _startable(admin, ref, n, step, steps, _cacheable(graph, n.task))
                if step.role == "lost" and step.request is not None and checkpoint:
                    step = replace(
                        step, detail=f"{step.detail}; {_sees(step.request.inputs, checkpoint)}"
                    )
        steps[node_id] = step
    kept, rerun = _costs(admin, graph, members, attempts)
    hot = [n for n in order if _cacheable(graph, steps[n].task)]
    cache = (
        f"the re-runs of cacheable node(s) {', '.join(hot)} send overwrite_cache (a result "
        "cached after the loss must not be served again)"
        if hot
        else "no node re-run is cacheable"
    ) + "; the finished nodes before the loss are not re-run at all"
    return LostChain(tuple(steps[n] for n in order), kept, rerun, cache)


def _sees(inputs: Literals, checkpoint: str) -> str:
    """Whether a re-run from `inputs` finds the lost attempt's checkpoint: only through an input
    naming its location (Flyte's own per-attempt checkpoint is not passed to a new execution)."""
    names = [k for k, v in inputs.texts.items() if v.rstrip("/") == checkpoint.rstrip("/")]
    if names:
        return f"input {names[0]} points at the checkpoint {checkpoint}: training resumes from it"
    return f"no input names the checkpoint {checkpoint}: the re-run does not see it"


def _cacheable(graph: WorkflowGraph, task: TaskId | None) -> bool:
    facts = graph.tasks.get(task) if task is not None else None
    return bool(facts and facts.cacheable)


def _state(
    admin: RelaunchAdmin,
    recheck: Callable[[ExecutionRef], Recheck],
    ref: ExecutionRef,
    n: GraphNode,
    role: str,
) -> NodeStep:
    from forensics.relaunch.recheck import RELAUNCHABLE

    assert n.task is not None
    new = ExecutionRef(ref.project, ref.domain, rerun_name(ref, n.node_id))
    step = NodeStep(n.node_id, role, n.task, new, "not-started")
    try:
        rec = admin.get_execution(new)
    except NotFoundError:
        return step
    if rec.phase not in TERMINAL_EXECUTION_PHASES:
        return replace(step, state="running", phase=rec.phase)
    if rec.phase != "SUCCEEDED":
        return replace(
            step, state="failed", phase=rec.phase, detail=f"re-run ended {rec.phase}: chain stopped"
        )
    if role == "lost":
        again = recheck(new)  # the same code may die silently green again
        if again.verdict in RELAUNCHABLE:
            return replace(
                step,
                state="failed",
                phase=rec.phase,
                detail=f"re-run ended silently green too (re-check {again.verdict}): chain stopped",
            )
    return replace(step, state="succeeded", phase=rec.phase)


def _startable(
    admin: RelaunchAdmin,
    ref: ExecutionRef,
    n: GraphNode,
    step: NodeStep,
    done: dict[str, NodeStep],
    overwrite: bool,
) -> NodeStep:
    """The request that starts `n` now: its recorded inputs, a re-run's outputs substituted;
    `overwrite`: its task is cacheable, and a result cached after the loss must not be served."""
    assert n.task is not None
    recorded = admin.node_data(ref, n.node_id).inputs
    payload, texts = dict(recorded.payload), dict(recorded.texts)
    swapped = []
    outputs: dict[str, Literals] = {}
    for b in n.bindings:
        if b.node in done and b.output is not None:
            source = done[b.node].execution
            if b.node not in outputs:
                outputs[b.node] = admin.execution_outputs(source)
            new = outputs[b.node]
            if b.output not in new.payload:
                return replace(
                    step,
                    state="failed",
                    detail=f"the re-run of {b.node} ({source}) has no output {b.output}: chain "
                    "stopped",
                )
            payload[b.var], texts[b.var] = new.payload[b.output], new.texts[b.output]
            swapped.append(f"{b.var} <- {b.node}.{b.output}")
    inputs = Literals(payload, texts)
    data: dict[str, object] = {
        "project": ref.project,
        "domain": ref.domain,
        "name": step.execution.name,
        "spec": {
            "launch_plan": {
                "resource_type": "TASK",
                **dict(zip(("project", "domain", "name", "version"), n.task, strict=True)),
            },
            "metadata": {"mode": "MANUAL", "reference_execution": ref.as_dict()},
            "labels": rerun_labels(ref, n.node_id),
        },
        "inputs": texts,
    }
    if overwrite:
        data["spec"]["overwrite_cache"] = True  # type: ignore[index]
    request = RerunRequest(
        ref, n.node_id, n.task, step.execution.name, inputs, data, overwrite_cache=overwrite
    )
    detail = "from its recorded inputs" + (f" ({', '.join(swapped)})" if swapped else "")
    return replace(
        step, state="to-start", detail=detail, substituted=tuple(swapped), request=request
    )


def _costs(
    admin: RelaunchAdmin,
    graph: WorkflowGraph,
    members: set[str],
    attempts: Sequence[AttemptRecord],
) -> tuple[tuple[NodeCost, ...], tuple[NodeCost, ...]]:
    """Each top-level task node's last attempt: run time and hours (as forensics/cost.py)."""
    from forensics.errors import SourceError

    last: dict[str, AttemptRecord] = {}
    for a in attempts:
        if a.parent_node is None and a.array_node is None:
            last[a.ref.node_id] = a
    kept, rerun = [], []
    for n in graph.nodes:
        if n.kind != "task" or n.task is None:
            continue
        a = last.get(n.node_id)
        run = None
        if a is not None and a.started_at is not None and a.ended_at is not None:
            run = max(0.0, (a.ended_at - a.started_at).total_seconds())
        gpus = cpus = None
        try:
            res = admin.task_resources(n.task)
            gpus, cpus = res.gpus, res.cpus
        except SourceError:
            pass
        cost = NodeCost(
            n.node_id,
            n.task[2],
            run,
            None if run is None or gpus is None else round(run / HOUR * gpus, 4),
            None if run is None or cpus is None else round(run / HOUR * cpus, 4),
        )
        (rerun if n.node_id in members else kept).append(cost)
    return tuple(kept), tuple(rerun)
