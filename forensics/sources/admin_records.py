"""Admin's protobuf answers as our plain records (`admin_types.py`): executions, nodes,
attempts, inputs, task facts. Part of the Admin transport: only `admin_transport.py` imports it.

Pure functions over flyteidl messages; what Admin and propeller put where is in docs/upstream.md
("What Admin and propeller put where"). Each function reads the same messages for one record,
and the record's fields are decided together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import lru_cache
from typing import Any

from flyteidl.admin import execution_pb2, node_execution_pb2, task_execution_pb2
from flyteidl.core import execution_pb2 as core_execution_pb2
from flyteidl.core import identifier_pb2, literals_pb2, tasks_pb2
from google.protobuf import json_format

from forensics.errors import SourceError
from forensics.evidence.k8s_events import reason_of_message
from forensics.model import (
    UTC,
    AttemptRecord,
    AttemptRef,
    Disruption,
    ExecutionRecord,
    ExecutionRef,
    ParentNode,
    rfc3339,
)
from forensics.sources.admin_closures import plan_of
from forensics.sources.admin_types import (
    TERMINAL_TASK_PHASES,
    Binding,
    DynamicWorkflow,
    GraphNode,
    Literals,
    NodeRecord,
    Subtask,
    TaskFacts,
    TaskId,
    TaskRun,
    TaskTemplate,
    WorkflowFacts,
    WorkflowGraph,
    shared,
)
from forensics.sources.task_resources import primary_container

_START_END = frozenset({"start-node", "end-node"})
_shared = shared


@lru_cache(maxsize=256)
def _enum_name(enum: Any, value: int) -> str:
    """An enum value's name (one shared string per value), or the number of an unknown one."""
    try:
        return str(enum.Name(value))
    except ValueError:
        return str(value)


def _time(msg: Any, field: str) -> datetime | None:
    if not msg.HasField(field):
        return None
    ts = getattr(msg, field)
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return ts.ToDatetime(tzinfo=UTC)


def execution_ref(wf: identifier_pb2.WorkflowExecutionIdentifier) -> ExecutionRef:
    return ExecutionRef(_shared(wf.project), _shared(wf.domain), wf.name)


def execution_record(ex: execution_pb2.Execution) -> ExecutionRecord:
    """Plain data from an `admin.Execution`."""
    meta = ex.spec.metadata
    reference = None
    if meta.HasField("reference_execution") and meta.reference_execution.name:
        reference = execution_ref(meta.reference_execution)
    parent = None
    # flyteadmin sets `parent_node_execution` on an execution launched by a launch-plan node
    # (flyteadmin `execution_manager.go` `launchExecution`, mode CHILD_WORKFLOW).
    if meta.HasField("parent_node_execution") and meta.parent_node_execution.execution_id.name:
        pne = meta.parent_node_execution
        parent = ParentNode(execution_ref(pne.execution_id), pne.node_id)
    lp = ex.spec.launch_plan
    wf = ex.closure.workflow_id
    return ExecutionRecord(
        ref=execution_ref(ex.id),
        phase=_enum_name(core_execution_pb2.WorkflowExecution.Phase, ex.closure.phase),
        created_at=_time(ex.closure, "created_at"),
        updated_at=_time(ex.closure, "updated_at"),
        mode=_enum_name(execution_pb2.ExecutionMetadata.ExecutionMode, meta.mode),
        reference_execution=reference,
        labels=dict(ex.spec.labels.values),
        parent=parent,
        launch_plan=_shared((lp.project, lp.domain, lp.name, lp.version)) if lp.name else None,
        workflow=_shared((wf.project, wf.domain, wf.name, wf.version)) if wf.name else None,
    )


OUTPUTS_PB = "outputs.pb"


def output_location(
    te: task_execution_pb2.TaskExecution, node_input_uri: str = ""
) -> tuple[str | None, str | None]:
    """The attempt's own `<node data dir>/<attempt>/`, or why Admin's record does not give it.

    propeller reports `OutputWriter.GetOutputPath()` = `<dir>/outputs.pb` (reference policy).
    Under its inline raw-output policy the outputs travel in the event and flyteadmin offloads
    them to its own `.../offloaded_outputs` object, or stores them inline (`output_data`)
    (flyteadmin `pkg/repositories/transformers/task_execution.go`): neither says whether the task
    wrote its outputs.pb, so the answer is `unknown`, never a guessed location.
    """
    c = te.closure
    out = c.output_uri
    if out:
        if out.endswith("/" + OUTPUTS_PB):
            return out[: -len(OUTPUTS_PB)], None
        return None, (
            f"Admin records the outputs at {out}, not at the attempt's own outputs.pb "
            "(flyteadmin offloads them under propeller's inline raw-output policy)"
        )
    if c.WhichOneof("output_result") == "output_data":
        return None, (
            "Admin holds the outputs inline (propeller's inline raw-output policy), "
            "not at the attempt's own outputs.pb"
        )
    for inputs in (te.input_uri, node_input_uri):
        if inputs.endswith("/inputs.pb"):
            return f"{inputs[: -len('inputs.pb')]}{te.id.retry_attempt}/", None
    return None, None


def output_dir(te: task_execution_pb2.TaskExecution, node_input_uri: str = "") -> str | None:
    """`<node data dir>/<attempt>/`: from `output_uri` (…/outputs.pb), else beside `inputs.pb`."""
    return output_location(te, node_input_uri)[0]


def attempt_pods(
    closure: task_execution_pb2.TaskExecutionClosure, external: bool = True
) -> tuple[str, ...]:
    """Pod names of an attempt: log_context's primary pod first, other pods, the generated name,
    then (unless `external` is False) array sub-task pods (external resources)."""
    ctx = closure.log_context
    names = [ctx.primary_pod_name] if ctx.primary_pod_name else []
    names += [p.pod_name for p in ctx.pods]
    names.append(closure.metadata.generated_name)
    if external:
        names += [r.external_id for r in closure.metadata.external_resources]
    return tuple(dict.fromkeys(n for n in names if n))


def literal_text(lit: literals_pb2.Literal) -> str | None:
    """A readable string for scalar literals (blob / dataset URIs as the URI); None for others."""
    if lit.HasField("scalar"):
        return _scalar_text(lit.scalar)
    return None  # collections, maps, offloaded literals: not a single value to show or template


def _scalar_text(s: literals_pb2.Scalar) -> str | None:
    kind = s.WhichOneof("value")
    if kind == "primitive":
        p = s.primitive
        which = p.WhichOneof("value")
        if which == "string_value":
            return p.string_value
        if which == "integer":
            return str(p.integer)
        if which == "float_value":
            return repr(p.float_value)
        if which == "boolean":
            return "true" if p.boolean else "false"
        if which == "datetime":
            return rfc3339(p.datetime.ToDatetime(tzinfo=UTC))
        if which == "duration":
            return f"{p.duration.ToTimedelta().total_seconds():g}s"
        return None
    if kind in ("blob", "structured_dataset", "schema"):
        return getattr(s, kind).uri or None
    if kind == "generic":
        return json_format.MessageToJson(s.generic, indent=None, sort_keys=True)
    if kind == "union":
        return literal_text(s.union.value)
    return None  # none_type, binary, error


def input_texts(rpc: str, target: str, data: Any, index: int | None = None) -> dict[str, str]:
    """`full_inputs` of a Get*Data response as text; `index` picks that element of collections."""
    if not data.full_inputs.literals and data.inputs.bytes > 0:
        # Admin withholds inputs above its remote-data max size and only links to them.
        raise SourceError(
            "admin",
            f"{rpc}: inputs ({data.inputs.bytes} bytes) are larger than Admin returns inline",
            target=target,
        )
    out: dict[str, str] = {}
    for name, lit in data.full_inputs.literals.items():
        if index is not None and lit.HasField("collection"):
            items = lit.collection.literals
            if index >= len(items):
                continue
            lit = items[index]
        text = literal_text(lit)
        if text is not None:
            out[name] = text
    return out


def task_template_of(tpl: tasks_pb2.TaskTemplate) -> TaskTemplate:
    """What the scan needs of a task template."""
    return TaskTemplate(tpl.type, tpl.task_type_version, bool(tpl.interface.outputs.variables))


def task_facts_of(tpl: tasks_pb2.TaskTemplate) -> TaskFacts:
    """What a task template says about the code a relaunch would run."""
    m = tpl.metadata
    t = tpl.id
    return TaskFacts(
        (t.project, t.domain, t.name, t.version),
        tpl.type,
        template_image(tpl),
        m.runtime.version or None,
        m.interruptible if m.WhichOneof("interruptible_value") else None,
        m.discoverable,
        m.discovery_version,
    )


def template_image(tpl: tasks_pb2.TaskTemplate) -> str | None:
    """The image a task runs: its container's, or the primary container's of its pod template
    (flytekit 1.16 writes kfpytorch's `Elastic` and `PyTorch` tasks, which mount shared memory,
    with `k8s_pod` and no `container`); None when the template names none."""
    if tpl.HasField("container"):
        return tpl.container.image or None
    primary = primary_container(tpl)
    return (primary or {}).get("image") or None


def task_run(
    ref: ExecutionRef,
    node: NodeRecord | None,
    te: task_execution_pb2.TaskExecution,
    template_of: Callable[[TaskId], TaskTemplate | None],
    parent_node: str | None = None,
) -> TaskRun:
    """One task execution as plain data: its attempt (`template_of` its task's template fills
    what the task execution does not say), its array subtasks, whether it spawned nodes."""
    c = te.closure
    tid = te.id.task_id
    template = template_of((tid.project, tid.domain, tid.name, tid.version))
    subtasks = tuple(
        Subtask(
            r.index,
            r.retry_attempt,
            _enum_name(core_execution_pb2.TaskExecution.Phase, r.phase),
            r.external_id,
        )
        for r in c.metadata.external_resources
    )
    return TaskRun(
        attempt_record(ref, node, te, template, parent_node),
        te.is_parent,
        subtasks,
        attempt_pods(c, False) if subtasks else (),
        _time(c, "updated_at") if subtasks else None,
    )


def attempt_record(
    ref: ExecutionRef,
    node: NodeRecord | None,
    te: task_execution_pb2.TaskExecution,
    template: TaskTemplate | None,
    parent_node: str | None = None,
) -> AttemptRecord:
    """One task attempt as plain data; `template` fills what the task execution does not say;
    `parent_node` is the node it runs under (Admin's unique id), None at the top level. `node`
    None: listed without its node execution (a top-level node, listed directly by the sweep)."""
    c = te.closure
    phase = _enum_name(core_execution_pb2.TaskExecution.Phase, c.phase)
    started = _time(c, "started_at")
    ended, end_from = attempt_end(c, phase, started)
    tid = te.id.task_id
    task_id = _shared((tid.project, tid.domain, tid.name, tid.version))
    namespaces = [_shared(p.namespace) for p in c.log_context.pods if p.namespace]
    if node is None:
        node_id, node_input, checkpoint, node_phase = te.id.node_execution_id.node_id, "", "", None
        is_array, spec = False, node_id
    else:
        node_id, node_input = node.node_id, node.input_uri
        checkpoint, node_phase = node.checkpoint_uri, node.phase
        is_array, spec = node.is_array, node.spec_node_id
    out_dir, out_unknown = output_location(te, node_input)
    return AttemptRecord(
        ref=AttemptRef(ref, _shared(node_id), te.id.retry_attempt),
        phase=phase,
        task_type=_shared(c.task_type or (template.type if template else "")),
        task_type_version=template.version if template else None,
        is_array=is_array,
        started_at=started,
        ended_at=ended,
        output_dir=out_dir,
        pods=attempt_pods(c),
        namespace=namespaces[0] if namespaces else None,
        checkpoint_uri=checkpoint or None,
        node_phase=node_phase,
        task_id=task_id,
        outputs_declared=template.outputs_declared if template else False,
        outputs_unknown=out_unknown,
        disruptions=closure_disruptions(
            te, namespaces[0] if namespaces else None, c.metadata.generated_name or None
        ),
        end_from=end_from,
        spec_node_id=spec or None,
        inputs_uri=next((u for u in (te.input_uri, node_input) if u.endswith("/inputs.pb")), None),
        parent_node=parent_node,
        node_read=node is not None,
    )


def node_record(node: node_execution_pb2.NodeExecution) -> NodeRecord:
    """Plain data from an `admin.NodeExecution`."""
    meta = node.metadata
    return NodeRecord(
        node_id=node.id.node_id,
        spec_node_id=meta.spec_node_id,
        input_uri=node.input_uri,
        checkpoint_uri=node.closure.task_node_metadata.checkpoint_uri,
        phase=_enum_name(core_execution_pb2.NodeExecution.Phase, node.closure.phase),
        is_array=meta.is_array,
        is_dynamic=meta.is_dynamic,
        is_parent_node=meta.is_parent_node,
        start_or_end=is_start_or_end(node),
        may_have_tasks=may_have_tasks(node),
    )


def closure_disruptions(
    te: task_execution_pb2.TaskExecution, namespace: str | None, pod: str | None
) -> tuple[Disruption, ...]:
    """The disruptions among the Kubernetes events Admin keeps for an attempt's object in
    `closure.reasons` (flyteidl admin/task_execution.proto `Reason`: `occurred_at`, `message`),
    earliest first; the object is the pod for a single-pod plugin."""
    found = []
    for r in te.closure.reasons:
        known = reason_of_message(r.message)
        if known is None or not r.HasField("occurred_at"):
            continue
        reason, initiator = known
        at = r.occurred_at.ToDatetime(tzinfo=UTC)
        found.append(Disruption("admin-reasons", reason, initiator, at, namespace, pod, r.message))
    return tuple(sorted(found, key=lambda d: (d.at, d.reason)))


def attempt_end(
    c: task_execution_pb2.TaskExecutionClosure, phase: str, started: datetime | None
) -> tuple[datetime | None, str | None]:
    """A finished attempt's end and the field it comes from (docs/verdicts.md, "The attempt's end").

    flyteadmin sets `started_at` only on a RUNNING event and `duration` only on a terminal event
    after one (`pkg/repositories/transformers/task_execution.go` addTaskStartedState,
    addTaskTerminalState: "task execution is missing StartedAt"). A pod that went Pending ->
    Succeeded between two propeller rounds has neither. Its closure's `updated_at` is then the
    terminal event's `reported_at` (UpdateTaskExecutionModel), which propeller stamps with
    `time.Now()` as it reports the phase it observed (flytepropeller `nodes/task/transformer.go`
    ToTaskExecutionEvent): the end as propeller saw it, at or after the pod's exit, never before.
    """
    if phase not in TERMINAL_TASK_PHASES:
        return None, None
    if started is not None and c.HasField("duration"):
        return started + c.duration.ToTimedelta(), "duration"
    reported = _time(c, "updated_at")
    return reported, ("updated_at" if reported is not None else None)


def compiled_templates(tasks: Iterable[Any]) -> dict[TaskId, TaskTemplate]:
    """The templates of a compiled workflow's tasks, by (project, domain, name, version)."""
    templates = {}
    for compiled in tasks:
        t = compiled.template
        templates[(t.id.project, t.id.domain, t.id.name, t.id.version)] = task_template_of(t)
    return templates


def dynamic_workflow(compiled: Any) -> DynamicWorkflow:
    """A dynamic parent's `CompiledWorkflowClosure`: its children's plan and task templates."""
    return DynamicWorkflow(plan_of(compiled), compiled_templates(compiled.tasks))


def workflow_facts_of(
    launch_plan: tuple[str, str, str, str],
    workflow: tuple[str, str, str, str],
    compiled: Any,
) -> WorkflowFacts:
    """What a launch plan's workflow runs, from its `CompiledWorkflowClosure`: tasks and nodes."""
    tasks = {}
    for ct in compiled.tasks:
        facts = task_facts_of(ct.template)
        tasks[facts.id] = facts
    task_nodes, lp_nodes = [], []
    for w in [compiled.primary, *compiled.sub_workflows]:
        for node in template_nodes(w.template.nodes):
            kind = node.WhichOneof("target")
            if kind == "task_node":
                r = node.task_node.reference_id
                task_nodes.append((node.id, (r.project, r.domain, r.name, r.version)))
            elif kind == "workflow_node" and node.workflow_node.HasField("launchplan_ref"):
                lp_nodes.append(node.id)
    return WorkflowFacts(
        launch_plan,
        workflow,
        tasks,
        tuple(task_nodes),
        tuple(lp_nodes),
    )


def template_nodes(nodes: Iterable[Any]) -> Iterator[Any]:
    """Every node of a workflow template, array and branch nodes' inner nodes included."""
    for n in nodes:
        yield n
        kind = n.WhichOneof("target")
        if kind == "array_node":
            yield from template_nodes([n.array_node.node])
        elif kind == "branch_node":
            ie = n.branch_node.if_else
            yield from template_nodes(
                [ie.case.then_node, *(c.then_node for c in ie.other), ie.else_node]
            )


def is_start_or_end(node: node_execution_pb2.NodeExecution) -> bool:
    return node.metadata.spec_node_id in _START_END or node.id.node_id in _START_END


def may_have_tasks(node: node_execution_pb2.NodeExecution) -> bool:
    # Skip ListTaskExecutions only where Admin cannot hold task executions: subworkflow /
    # launch-plan nodes, non-dynamic parents (subworkflows), and nodes that never ran.
    if node.closure.HasField("workflow_node_metadata"):
        return False
    meta = node.metadata
    if meta.is_parent_node and not (meta.is_dynamic or meta.is_array):
        return False
    return node.closure.phase != core_execution_pb2.NodeExecution.SKIPPED


# -- a workflow's graph and recorded literals (`relaunch --only-lost`) -------------------------
# What a compiled closure holds (flyteidl `core/compiler.proto`, `core/workflow.proto`;
# docs/upstream.md, "Re-running only what was lost"): `primary.template.nodes` are the top-level
# nodes, each with its `inputs` bindings (a `promise` names the node and output it reads;
# `start-node` is the workflow's inputs) and one target; `primary.connections.upstream` lists,
# per node, the nodes it runs after (data and `>>` order alike; propeller schedules from it).

_KINDS = {
    "task_node": "task",
    "branch_node": "branch",
    "gate_node": "gate",
    "array_node": "array",
}


def _kind(node: Any) -> str:
    target = node.WhichOneof("target")
    if target == "workflow_node":
        wn = node.workflow_node
        return "launch-plan" if wn.HasField("launchplan_ref") else "sub-workflow"
    return _KINDS.get(target or "", "other")


def _binding(b: Any) -> Binding:
    data = b.binding
    which = data.WhichOneof("value")
    if which == "promise":
        return Binding(b.var, data.promise.node_id, data.promise.var, True)
    if which == "scalar":
        return Binding(b.var, None, None, True)
    return Binding(b.var, None, None, False)  # collection / map / union: may hold promises


def graph_of(workflow: TaskId, compiled: Any) -> WorkflowGraph:
    """The top-level nodes of a `CompiledWorkflowClosure`'s primary workflow."""
    template = compiled.primary.template
    upstream = compiled.primary.connections.upstream
    nodes = []
    for n in template.nodes:
        if n.id in ("start-node", "end-node"):
            continue
        ups = list(upstream[n.id].ids) if n.id in upstream else list(n.upstream_node_ids)
        task = (
            _graph_ident(n.task_node.reference_id)
            if n.WhichOneof("target") == "task_node"
            else None
        )
        nodes.append(
            GraphNode(
                n.id,
                _kind(n),
                task,
                tuple(u for u in ups if u != "start-node"),
                tuple(_binding(b) for b in n.inputs),
            )
        )
    tasks = {}
    for ct in compiled.tasks:
        facts = task_facts_of(ct.template)
        tasks[facts.id] = facts
    return WorkflowGraph(workflow, tuple(nodes), tasks)


def literals_of(literal_map: Any) -> Literals:
    """A `core.LiteralMap`: each value serialized and as text (`?` where it has none)."""
    payload, texts = {}, {}
    for name, lit in literal_map.literals.items():
        payload[name] = lit.SerializeToString()
        texts[name] = literal_text(lit) or "?"
    return Literals(payload, texts)


def _graph_ident(i: Any) -> TaskId:
    return (i.project, i.domain, i.name, i.version)
