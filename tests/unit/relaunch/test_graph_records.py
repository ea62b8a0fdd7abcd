"""What `--only-lost` reads of a compiled closure and a literal map, from flyteidl's messages
as GetWorkflow and GetNodeExecutionData return them (`admin_records.graph_of`, `literals_of`)."""

from __future__ import annotations

from flyteidl.core import (
    compiler_pb2,
    identifier_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
    workflow_pb2,
)

from forensics.sources.admin_records import graph_of, literals_of

WF = ("gs1", "production", "pipeline", "v1")


def _id(name: str, kind: int = identifier_pb2.TASK) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=kind, project="gs1", domain="production", name=name, version="v1"
    )


def _promise(var: str, node: str, output: str) -> literals_pb2.Binding:
    return literals_pb2.Binding(
        var=var,
        binding=literals_pb2.BindingData(
            promise=types_pb2.OutputReference(node_id=node, var=output)
        ),
    )


def _closure() -> compiler_pb2.CompiledWorkflowClosure:
    prep = workflow_pb2.Node(id="n0", task_node=workflow_pb2.TaskNode(reference_id=_id("prep")))
    train = workflow_pb2.Node(
        id="n1",
        upstream_node_ids=["n0"],
        inputs=[_promise("dataset", "n0", "dataset"), _promise("ck", "start-node", "ck")],
        task_node=workflow_pb2.TaskNode(reference_id=_id("train")),
    )
    branch = workflow_pb2.Node(
        id="n2", upstream_node_ids=["n1"], branch_node=workflow_pb2.BranchNode()
    )
    lp = workflow_pb2.Node(
        id="n3",
        workflow_node=workflow_pb2.WorkflowNode(
            launchplan_ref=_id("child", identifier_pb2.LAUNCH_PLAN)
        ),
    )
    template = workflow_pb2.WorkflowTemplate(nodes=[prep, train, branch, lp])
    connections = compiler_pb2.ConnectionSet(
        upstream={
            "n1": compiler_pb2.ConnectionSet.IdList(ids=["n0", "start-node"]),
            "n2": compiler_pb2.ConnectionSet.IdList(ids=["n1"]),
        }
    )
    task = tasks_pb2.TaskTemplate(
        id=_id("prep"),
        type="python-task",
        metadata=tasks_pb2.TaskMetadata(discoverable=True, discovery_version="1"),
    )
    return compiler_pb2.CompiledWorkflowClosure(
        primary=compiler_pb2.CompiledWorkflow(template=template, connections=connections),
        tasks=[compiler_pb2.CompiledTask(template=task)],
    )


def test_the_graph_holds_each_nodes_kind_order_and_bindings():
    g = graph_of(WF, _closure())
    kinds = {n.node_id: (n.kind, n.upstream) for n in g.nodes}
    assert kinds == {
        "n0": ("task", ()),
        "n1": ("task", ("n0",)),  # start-node is the workflow's inputs, not a node
        "n2": ("branch", ("n1",)),
        "n3": ("launch-plan", ()),
    }
    n1 = g.node("n1")
    assert n1.task == ("gs1", "production", "train", "v1")
    assert [(b.var, b.node, b.output, b.plain) for b in n1.bindings] == [
        ("dataset", "n0", "dataset", True),
        ("ck", "start-node", "ck", True),
    ]
    assert g.tasks[("gs1", "production", "prep", "v1")].cacheable is True


def test_literals_keep_each_value_as_sent_and_as_text():
    lit = literals_pb2.Literal(
        scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(string_value="s3://d"))
    )
    got = literals_of(literals_pb2.LiteralMap(literals={"dataset": lit}))
    assert got.texts == {"dataset": "s3://d"}
    assert literals_pb2.Literal.FromString(got.payload["dataset"]) == lit
