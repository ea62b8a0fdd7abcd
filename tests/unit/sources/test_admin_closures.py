"""`plan_of`: which nodes of a compiled workflow are listed, and when no node listing is needed."""

from __future__ import annotations

import pytest
from flyteidl.core import compiler_pb2, identifier_pb2, tasks_pb2
from flyteidl.core import workflow_pb2 as wf

from forensics.sources.admin_closures import plan_of


def _task_id(name: str) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK, project="p", domain="d", name=name, version="v1"
    )


TASKS = {  # name: (type, task_type_version)
    "elastic": ("python-task", 1),
    "pytorch": ("pytorch", 1),
    "plain": ("python-task", 0),
}


def _closure(*nodes: wf.Node, tasks=TASKS) -> compiler_pb2.CompiledWorkflowClosure:
    return compiler_pb2.CompiledWorkflowClosure(
        primary=compiler_pb2.CompiledWorkflow(template=wf.WorkflowTemplate(nodes=nodes)),
        tasks=[
            compiler_pb2.CompiledTask(
                template=tasks_pb2.TaskTemplate(id=_task_id(n), type=t, task_type_version=v)
            )
            for n, (t, v) in tasks.items()
        ],
    )


def _task(node_id: str, task: str) -> wf.Node:
    return wf.Node(id=node_id, task_node=wf.TaskNode(reference_id=_task_id(task)))


def test_a_workflow_of_elastic_task_nodes_is_listed_directly():
    plan = plan_of(_closure(_task("n0", "elastic"), _task("n1", "pytorch")))
    assert plan.direct == ("n0", "n1")
    gate = wf.Node(id="n1", gate_node=wf.GateNode())
    assert plan_of(_closure(_task("n0", "elastic"), gate)).direct == ("n0",)


@pytest.mark.parametrize(
    "other",
    [
        _task("n1", "plain"),  # may be @dynamic: only its node execution says
        _task("n1", "unregistered"),  # no template in the closure
        wf.Node(id="n1", array_node=wf.ArrayNode(node=_task("n1", "elastic"))),
        wf.Node(id="n1", workflow_node=wf.WorkflowNode(sub_workflow_ref=_task_id("sub"))),
        wf.Node(id="n1", workflow_node=wf.WorkflowNode(launchplan_ref=_task_id("lp"))),
        wf.Node(id="n1", branch_node=wf.BranchNode()),
    ],
    ids=["plain", "unknown-template", "array", "sub-workflow", "launch-plan", "branch"],
)
def test_any_other_node_lists_the_nodes(other):
    assert plan_of(_closure(_task("n0", "elastic"), other)).direct is None


def test_a_workflow_without_task_nodes_is_not_direct():
    assert plan_of(_closure(wf.Node(id="n0", gate_node=wf.GateNode()))).direct is None
