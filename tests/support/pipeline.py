"""A three-node pipeline in the in-process fakes, for `relaunch --only-lost` unit tests: `n0`
prep (python-task, cacheable, finished) -> `n1` train (elastic, silently green: SIGTERM, no
outputs.pb) -> `n2` eval (python-task, after n1 by order only; reads n0's dataset)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from forensics.sources.admin_types import (
    Binding,
    GraphNode,
    NodeData,
    PodResources,
    TaskFacts,
    TaskResources,
    WorkflowGraph,
)
from support.fakes import T0, attempt, execution, literals, signalled, wrote_outputs

WF = ("gs1", "production", "pipeline", "v1")
PREP = ("gs1", "production", "pipeline.prep", "v1")
TRAIN = ("gs1", "production", "pipeline.train", "v1")
EVAL = ("gs1", "production", "pipeline.eval", "v1")
NAME = "p1pelinex0000000000a"


def facts(task, cacheable=False, kind="python-task"):
    return TaskFacts(task, kind, "img:1", "1.16.8", None, cacheable, "1" if cacheable else "")


def graph(*, eval_kind="task", eval_cacheable=False, eval_reads_model=False) -> WorkflowGraph:
    n2_bindings = [
        Binding("dataset", "n0", "dataset", True),
        Binding("checkpoint_dir", "start-node", "checkpoint_dir", True),
    ]
    if eval_reads_model:
        n2_bindings.append(Binding("model", "n1", "model", True))
    return WorkflowGraph(
        WF,
        (
            GraphNode("n0", "task", PREP, (), ()),
            GraphNode(
                "n1",
                "task",
                TRAIN,
                ("n0",),
                (
                    Binding("dataset", "n0", "dataset", True),
                    Binding("checkpoint_dir", "start-node", "checkpoint_dir", True),
                ),
            ),
            GraphNode(
                "n2",
                eval_kind,
                EVAL if eval_kind == "task" else None,
                ("n0", "n1"),
                tuple(n2_bindings),
            ),
        ),
        {
            PREP: facts(PREP, cacheable=True),
            TRAIN: facts(TRAIN, kind="pytorch"),
            EVAL: facts(EVAL, cacheable=eval_cacheable),
        },
    )


def pipeline(sources, **graph_kw):
    """The pipeline execution in `sources`' fakes; returns its ref."""
    admin = sources.admin
    ex = replace(execution(NAME), workflow=WF)
    prep = replace(
        attempt(ex, "n0", ended=T0 - timedelta(hours=2), task_type="python-task", declared=True),
        task_id=PREP,
    )
    train = replace(attempt(ex, "n1"), task_id=TRAIN)
    ev = replace(
        attempt(ex, "n2", ended=T0 + timedelta(minutes=30), task_type="python-task"),
        task_id=EVAL,
    )
    admin.add(ex, [prep, train, ev])
    signalled(sources.loki, train)
    wrote_outputs(sources.store, prep, outputs=True)
    wrote_outputs(sources.store, train, outputs=False)
    wrote_outputs(sources.store, ev, outputs=True)
    admin.graphs[WF] = graph(**graph_kw)
    ck = "s3://ckpt/pipeline/"
    admin.node_io[(ex.ref, "n1")] = NodeData(
        literals({"dataset": "s3://data/ds", "checkpoint_dir": ck}), None
    )
    admin.node_io[(ex.ref, "n2")] = NodeData(
        literals({"dataset": "s3://data/ds", "checkpoint_dir": ck, "model": "s3://old"}), None
    )
    admin.tasks[PREP] = TaskResources(":".join(PREP), (PodResources("task", 1, 0, 4),), None, "t")
    admin.tasks[TRAIN] = TaskResources(
        ":".join(TRAIN), (PodResources("worker", 2, 8, 16),), "a100", "t"
    )
    admin.tasks[EVAL] = TaskResources(":".join(EVAL), (PodResources("task", 1, 1, 2),), None, "t")
    return ex.ref
