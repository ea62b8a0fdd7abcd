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

from flyteidl.core import compiler_pb2, identifier_pb2
from flyteidl.core import workflow_pb2 as core_workflow_pb2

from forensics.sandbox.admin_protos import task_identifier, task_key, task_template
from forensics.sandbox.admin_state import NodeRow
from forensics.sandbox.scenario import SandboxTask


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
