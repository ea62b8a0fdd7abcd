"""Which nodes of a workflow can run an elastic task, read from its compiled closure (pure).

The sweep lists task executions only for the nodes whose task can be elastic (docs/performance.md,
"What is called"). What a compiled closure holds (flyteidl `core/compiler.proto`,
`core/workflow.proto`, as flyteadmin's GetWorkflow returns it in `WorkflowClosure.compiled_workflow`):

- `CompiledWorkflowClosure.primary.template.nodes`: the workflow's nodes by spec id; a `task_node`
  names its task by `reference_id`, whose template is in `tasks`; an `array_node` wraps the node
  it maps (`array_node.node`); a `branch_node` holds its `then_node`s and `else_node`; a
  `workflow_node` either launches a launch plan (`launchplan_ref`: another execution, swept on its
  own) or runs a sub-workflow inline (`sub_workflow_ref`, whose template is in `sub_workflows`);
  a `gate_node` runs no task.
- Admin's node executions carry the spec id in `metadata.spec_node_id`; a sub-workflow's and a
  branch's nodes are listed under their parent node (propeller's `GenerateUniqueID`).
- A `@dynamic` node's children are compiled only at run time: their closure is the parent's
  `NodeExecutionGetDataResponse.dynamic_workflow.compiled_workflow` (same message), with spec ids
  `dn0`, `dn1`, ... (flytekit `core/workflow.py` names dynamic nodes so).

A node the plan does not know (an unknown spec id, a task whose template is missing, a node kind
this module does not read) is listed: a plan only ever removes calls it can prove useless.

`NodePlan.direct`: when every node of the primary workflow is a task node running an elastic task
(or a gate node, which runs none), the nodes' ids are known before any node ran, and their task
executions are listed without ListNodeExecutions: flyteadmin's ListTaskExecutions filters by the
node execution id and answers an empty list for a node that has not run
(`task_execution_manager.go` ListTaskExecutions). What that listing cannot show is a `@dynamic`
node's children; a dynamic task is a plain `python-task` in its template (the reason any
workflow with a non-elastic task node is listed node by node), and an elastic task that is
also `@dynamic` is guarded twice by the sweep (`AdminClient.sweep_attempts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from forensics.model import elastic_task


@dataclass(frozen=True)
class NodePlan:
    """What one compiled workflow template says about its nodes, by spec node id.

    `plain`: nodes whose own task executions cannot be elastic (task and array nodes whose task
    template is not elastic, gate nodes). `nested`: the plan of a sub-workflow node's children
    (its sub-workflow's); `branches`: branch nodes, whose branches are flattened into this plan.
    """

    plain: frozenset[str] = frozenset()
    nested: dict[str, NodePlan] = field(default_factory=dict)
    branches: frozenset[str] = frozenset()
    # The primary workflow's node ids when all of them run elastic tasks (gate nodes aside):
    # their task executions are listed directly, without ListNodeExecutions. None: list nodes.
    direct: tuple[str, ...] | None = None

    def lists(self, spec_node_id: str) -> bool:
        """Whether the node's task executions must be listed (unless the evidence points at it)."""
        return spec_node_id not in self.plain

    def children(self, spec_node_id: str) -> NodePlan | None:
        """The plan of a (non-dynamic) parent node's children; None: unknown, list them all."""
        if spec_node_id in self.branches:
            return self
        return self.nested.get(spec_node_id)


def _ident(i: Any) -> tuple[str, str, str, str]:
    return (i.project, i.domain, i.name, i.version)


def _flat(nodes: Iterable[Any]) -> list[Any]:
    """A template's nodes with its branches' nodes (not an array's mapped node: it is no node of
    this level, and its id may repeat one that is)."""
    out = []
    for n in nodes:
        out.append(n)
        if n.WhichOneof("target") == "branch_node":
            ie = n.branch_node.if_else
            inner = [ie.case.then_node, *(c.then_node for c in ie.other)]
            if ie.HasField("else_node"):
                inner.append(ie.else_node)
            out.extend(_flat(inner))
    return out


def plan_of(compiled: Any) -> NodePlan:
    """The primary workflow's plan from a `CompiledWorkflowClosure`."""
    elastic = {
        _ident(t.template.id): elastic_task(t.template.type, t.template.task_type_version)
        for t in compiled.tasks
    }
    templates = {_ident(w.template.id): w.template for w in compiled.sub_workflows}
    plan = _plan(compiled.primary.template, elastic, templates, ())
    direct = _direct(compiled.primary.template.nodes, elastic)
    return dataclasses.replace(plan, direct=direct) if direct else plan


def _direct(
    nodes: Iterable[Any], elastic: dict[tuple[str, str, str, str], bool]
) -> tuple[str, ...] | None:
    """The ids of the task nodes when every node is a task node whose task is elastic or a gate
    node; None when any is not (a branch, a sub-workflow, a launch plan, an array, a task that is
    not elastic or whose template is missing) or there is no task node at all."""
    ids = []
    for n in nodes:
        kind = n.WhichOneof("target")
        if kind == "gate_node":
            continue
        if kind != "task_node" or _task_elastic(n, elastic) is not True:
            return None
        ids.append(n.id)
    return tuple(ids) or None


def _task_elastic(node: Any, elastic: dict[tuple[str, str, str, str], bool]) -> bool | None:
    """Whether a task node's task can be elastic; None when its template is not in the closure."""
    return elastic.get(_ident(node.task_node.reference_id))


def _plan(
    template: Any,
    elastic: dict[tuple[str, str, str, str], bool],
    templates: dict[tuple[str, str, str, str], Any],
    seen: tuple[tuple[str, str, str, str], ...],
) -> NodePlan:
    plain: set[str] = set()
    branches: set[str] = set()
    nested: dict[str, NodePlan] = {}
    for n in _flat(template.nodes):
        kind = n.WhichOneof("target")
        if kind == "task_node":
            if _task_elastic(n, elastic) is False:
                plain.add(n.id)
        elif kind == "array_node":
            inner = n.array_node.node
            if inner.WhichOneof("target") == "task_node" and _task_elastic(inner, elastic) is False:
                plain.add(n.id)
        elif kind == "gate_node":
            plain.add(n.id)
        elif kind == "branch_node":
            branches.add(n.id)
        elif kind == "workflow_node" and n.workflow_node.HasField("sub_workflow_ref"):
            ref = _ident(n.workflow_node.sub_workflow_ref)
            sub = templates.get(ref)
            if sub is not None and ref not in seen:
                nested[n.id] = _plan(sub, elastic, templates, (*seen, ref))
    return NodePlan(frozenset(plain), nested, frozenset(branches))
