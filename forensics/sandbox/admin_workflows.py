"""The sandbox's compiled workflows: GetWorkflow's `CompiledWorkflowClosure` and a dynamic node's
compiled workflow (GetNodeExecutionData), shaped from the node executions the scenario seeded.

Task nodes name a `CompiledTask`; a map task is an `array_node` wrapping the node it maps; a
sub-workflow node's `CompiledWorkflow` is in `sub_workflows` (every level's, flattened); a
launch-plan node names the launch plan (its child is another execution); a `@dynamic` node's
yielded nodes (`dn<i>`) exist only in its dynamic workflow. Upstream: docs/upstream.md, "The
sandbox servers".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flyteidl.core import (
    compiler_pb2,
    condition_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    types_pb2,
)
from flyteidl.core import workflow_pb2 as core_workflow_pb2

from forensics.sandbox.admin_protos import task_identifier, task_key, task_template
from forensics.sandbox.admin_state import NodeRow
from forensics.sandbox.scenario import SandboxTask, SandboxWorkflowNode


def _spec(row: NodeRow) -> str:
    return row.proto.metadata.spec_node_id or row.proto.id.node_id


class _Builder:
    """Compiles the rows of one execution into templates, gathering tasks and sub-workflows."""

    def __init__(self, rows: Sequence[NodeRow], wf_id: identifier_pb2.Identifier) -> None:
        self.rows = rows
        self.wf_id = wf_id
        self.tasks: dict[tuple[str, str, str, str], SandboxTask] = {}
        self.sub_workflows: list[compiler_pb2.CompiledWorkflow] = []

    def nodes(self, parent: str | None) -> list[core_workflow_pb2.Node]:
        out = []
        for row in self.rows:
            if row.parent != parent or _spec(row) in ("start-node", "end-node"):
                continue
            node = self.node(row)
            if node is not None:
                out.append(node)
        return out

    def node(self, row: NodeRow) -> core_workflow_pb2.Node | None:
        meta, spec = row.proto.metadata, _spec(row)
        if row.proto.closure.HasField("workflow_node_metadata"):
            child = row.proto.closure.workflow_node_metadata.executionId
            ref = identifier_pb2.Identifier(
                resource_type=identifier_pb2.LAUNCH_PLAN,
                project=child.project,
                domain=child.domain,
                name=f"{self.wf_id.name}.{spec}",
                version=self.wf_id.version,
            )
            return core_workflow_pb2.Node(
                id=spec, workflow_node=core_workflow_pb2.WorkflowNode(launchplan_ref=ref)
            )
        if meta.is_parent_node and not (meta.is_dynamic or meta.is_array):
            sub_id = identifier_pb2.Identifier()
            sub_id.CopyFrom(self.wf_id)
            sub_id.name = f"{self.wf_id.name}.{spec}"
            template = core_workflow_pb2.WorkflowTemplate(
                id=sub_id, nodes=self.nodes(row.proto.id.node_id)
            )
            self.sub_workflows.append(compiler_pb2.CompiledWorkflow(template=template))
            return core_workflow_pb2.Node(
                id=spec, workflow_node=core_workflow_pb2.WorkflowNode(sub_workflow_ref=sub_id)
            )
        if not row.task_defs:
            return None  # never ran: nothing says what it would have run
        for t in row.task_defs:
            self.tasks.setdefault(task_key(t), t)
        task = row.task_defs[-1]
        inner = core_workflow_pb2.Node(
            id=spec, task_node=core_workflow_pb2.TaskNode(reference_id=task_identifier(task))
        )
        if meta.is_array:
            return core_workflow_pb2.Node(
                id=spec, array_node=core_workflow_pb2.ArrayNode(node=inner)
            )
        return inner

    def closure(self, nodes: list[core_workflow_pb2.Node]) -> compiler_pb2.CompiledWorkflowClosure:
        return compiler_pb2.CompiledWorkflowClosure(
            primary=compiler_pb2.CompiledWorkflow(
                template=core_workflow_pb2.WorkflowTemplate(id=self.wf_id, nodes=nodes)
            ),
            sub_workflows=self.sub_workflows,
            tasks=[
                compiler_pb2.CompiledTask(template=task_template(t)) for t in self.tasks.values()
            ],
        )


def compiled_rows(
    rows: Sequence[NodeRow],
    parent: str | None,
    wf_id: identifier_pb2.Identifier,
    extra: Sequence[core_workflow_pb2.Node] = (),
    extra_tasks: Sequence[SandboxTask] = (),
) -> compiler_pb2.CompiledWorkflowClosure:
    """The compiled closure of the nodes under `parent` (None: the top level) of one execution's
    rows, plus `extra` nodes (and their tasks) a registered launch plan declares."""
    b = _Builder(rows, wf_id)
    nodes = b.nodes(parent)
    known = {n.id for n in nodes}
    nodes += [n for n in extra if n.id not in known]
    for t in extra_tasks:
        b.tasks.setdefault(task_key(t), t)
    return b.closure(nodes)


# -- declared graphs: what flytekit registers and flytepropeller's compiler keeps ---------------

START_NODE = "start-node"
END_NODE = "end-node"


def _binding(var: str, node_id: str, output: str) -> literals_pb2.Binding:
    return literals_pb2.Binding(
        var=var,
        binding=literals_pb2.BindingData(
            promise=types_pb2.OutputReference(node_id=node_id, var=output)
        ),
    )


def _graph_node(
    node: SandboxWorkflowNode, wf_id: identifier_pb2.Identifier, subs: list[Any]
) -> core_workflow_pb2.Node:
    """One declared node: inputs bound by promise, `upstream_node_ids` as flytekit writes them
    (the nodes its bindings name, start-node excepted, and its explicit `>>` upstreams)."""
    upstream = sorted(
        {n for n, _ in node.bindings.values() if n not in ("", START_NODE)} | set(node.upstream)
    )
    out = core_workflow_pb2.Node(
        id=node.node_id,
        metadata=core_workflow_pb2.NodeMetadata(name=node.node_id),
        # the compiler rewrites a promise's node to the node it found, "" to start-node
        # (flytepropeller `compiler/validators/bindings.go`, `validators/node.go` validateNodeID)
        inputs=[_binding(v, n or START_NODE, o) for v, (n, o) in sorted(node.bindings.items())],
        upstream_node_ids=upstream,
    )
    task_node = (
        core_workflow_pb2.TaskNode(reference_id=task_identifier(node.task)) if node.task else None
    )
    if node.kind == "branch":
        # A conditional whose case runs the task: `core.BranchNode` (flyteidl core/workflow.proto).
        inner = core_workflow_pb2.Node(id=f"{node.node_id}-n0", task_node=task_node)
        case = core_workflow_pb2.IfBlock(
            condition=condition_pb2.BooleanExpression(
                comparison=condition_pb2.ComparisonExpression(
                    operator=condition_pb2.ComparisonExpression.EQ,
                    left_value=condition_pb2.Operand(var=".run"),
                    right_value=condition_pb2.Operand(
                        primitive=literals_pb2.Primitive(boolean=True)
                    ),
                )
            ),
            then_node=inner,
        )
        block = core_workflow_pb2.IfElseBlock(
            case=case, error=types_pb2.Error(failed_node_id=node.node_id, message="no case")
        )
        out.branch_node.CopyFrom(core_workflow_pb2.BranchNode(if_else=block))
    elif node.kind == "subworkflow":
        sub_id = identifier_pb2.Identifier()
        sub_id.CopyFrom(wf_id)
        sub_id.name = f"{wf_id.name}.{node.node_id}"
        subs.append(compiled_graph(sub_id, node.children, (), subs).primary)
        out.workflow_node.CopyFrom(core_workflow_pb2.WorkflowNode(sub_workflow_ref=sub_id))
    else:
        out.task_node.CopyFrom(task_node)
    return out


def _connections(nodes: Sequence[core_workflow_pb2.Node]) -> compiler_pb2.ConnectionSet:
    """flytepropeller `compiler/workflow_compiler.go` ValidateWorkflow: explicit edges from
    `upstream_node_ids`, implicit ones from promise bindings (start-node for workflow inputs),
    then start-node -> every node without an upstream and every node without a downstream ->
    end-node; each list sorted (`sets.String.List`)."""
    up: dict[str, set[str]] = {}
    down: dict[str, set[str]] = {}

    def edge(src: str, dst: str) -> None:
        down.setdefault(src or START_NODE, set()).add(dst)
        up.setdefault(dst, set()).add(src or START_NODE)

    for n in sorted(nodes, key=lambda n: n.id):
        for u in n.upstream_node_ids:
            edge(u, n.id)
        for b in n.inputs:
            edge(b.binding.promise.node_id, n.id)
    for n in sorted(nodes, key=lambda n: n.id):
        if n.id not in up:
            edge(START_NODE, n.id)
        if n.id not in down:
            edge(n.id, END_NODE)
    return compiler_pb2.ConnectionSet(
        upstream={k: compiler_pb2.ConnectionSet.IdList(ids=sorted(v)) for k, v in up.items()},
        downstream={k: compiler_pb2.ConnectionSet.IdList(ids=sorted(v)) for k, v in down.items()},
    )


def compiled_graph(
    wf_id: identifier_pb2.Identifier,
    graph: Sequence[SandboxWorkflowNode],
    inputs: Sequence[str],
    subs: list[Any] | None = None,
    outputs: dict[str, tuple[str, str]] | None = None,
) -> compiler_pb2.CompiledWorkflowClosure:
    """The compiled closure of a declared graph: start-node, the nodes, end-node (the compiler
    adds both sentinels to the template), connections, sub-workflows and task templates.
    `outputs` binds the workflow's outputs to node outputs (name -> (node id, output))."""
    subs = [] if subs is None else subs
    nodes = [_graph_node(n, wf_id, subs) for n in graph]
    outputs = outputs or {}

    def variables(names: Sequence[str]) -> interface_pb2.VariableMap:
        string = types_pb2.LiteralType(simple=types_pb2.STRING)
        return interface_pb2.VariableMap(
            variables={name: interface_pb2.Variable(type=string) for name in names}
        )

    template = core_workflow_pb2.WorkflowTemplate(
        id=wf_id,
        interface=interface_pb2.TypedInterface(
            inputs=variables(inputs), outputs=variables(sorted(outputs))
        ),
        outputs=[_binding(v, n, o) for v, (n, o) in sorted(outputs.items())],
        nodes=[
            core_workflow_pb2.Node(id=START_NODE),
            *nodes,
            core_workflow_pb2.Node(id=END_NODE),
        ],
    )
    tasks: dict[tuple[str, str, str, str], SandboxTask] = {}

    def gather(ns: Sequence[SandboxWorkflowNode]) -> None:
        for n in ns:
            if n.task is not None:
                tasks.setdefault(task_key(n.task), n.task)
            gather(n.children)

    gather(graph)
    return compiler_pb2.CompiledWorkflowClosure(
        primary=compiler_pb2.CompiledWorkflow(template=template, connections=_connections(nodes)),
        sub_workflows=subs,
        tasks=[compiler_pb2.CompiledTask(template=task_template(t)) for t in tasks.values()],
    )


def single_task_node_id(task_name: str) -> str:
    """flyteadmin v1.16.8 `util/single_task_execution.go` generateNodeNameFromTask: the last 63
    characters of the task's name, keeping only `-`, letters and digits."""
    if len(task_name) >= 63:
        task_name = task_name[len(task_name) - 63 :]
    return "".join(c for c in task_name if c == "-" or c.isalpha() or c.isdigit())


def single_task_workflow_id(task: SandboxTask) -> identifier_pb2.Identifier:
    """The skeleton workflow flyteadmin makes for a task: `.flytegen.<task name>`, same version."""
    return identifier_pb2.Identifier(
        resource_type=identifier_pb2.WORKFLOW,
        project=task.project,
        domain=task.domain,
        name=f".flytegen.{task.name}",
        version=task.version,
    )


def single_task_closure(task: SandboxTask) -> compiler_pb2.CompiledWorkflowClosure:
    """`CreateOrGetWorkflowModel`'s skeleton, compiled: one node running `task`, every input
    bound to the workflow's input of the same name (`generateBindings(inputs, "")`)."""
    node_id = single_task_node_id(task.name)
    # `noInputNodeID` is "": the compiler reads it as start-node.
    node = SandboxWorkflowNode(node_id, task, bindings={name: ("", name) for name in task.inputs})
    outputs = task.outputs or (("o0",) if task.has_outputs else ())
    return compiled_graph(
        single_task_workflow_id(task),
        [node],
        task.inputs,
        outputs={name: (node_id, name) for name in outputs},
    )
