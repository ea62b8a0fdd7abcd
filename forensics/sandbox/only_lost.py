"""The `relaunch --only-lost` scenario: a three-node pipeline whose training node died silently
green between a finished data-preparation node and an evaluation node, and an execution whose
lost node sits inside a branch (a shape `--only-lost` must refuse).

Serve it as the reference incident is served: `stack.sandbox(only_lost_scenario())`. The sandbox
Admin runs what `relaunch` creates there (single-task CreateExecution, and RecoverExecution for the
tests that show why never to use it) to completion: `admin_runs`. The graph, bindings and tasks
follow what flytekit registers and flytepropeller compiles (docs/upstream.md, "Single-task
executions and recovery").

PIPELINE (`gs1:production:k8m2n6b0v4c8x2z6l0j4`, launch plan `wf.staged` v1, inputs `corpus` and
`checkpoint_dir`):

- `n0` prep — task `staged.prep` (python-task, cacheable), input `corpus` from the workflow,
  output `dataset`; SUCCEEDED, outputs.pb written.
- `n1` train — task `staged.train` (single-node torch elastic, 8 GPUs, no outputs), inputs
  `dataset` <- n0.dataset and `checkpoint_dir` <- the workflow's; its pod got SIGTERM, the attempt
  SUCCEEDED without outputs.pb (affected); checkpoints saved under `checkpoint_dir`.
- `n2` eval — task `staged.eval` (python-task), after n1 by `>>` (no data from it), inputs
  `dataset` <- n0.dataset and `checkpoint_dir` <- the workflow's, output `metrics`; SUCCEEDED.

BRANCHY (`gs1:production:r3t7y1u5i9o3p7a1s5d9`, launch plan `wf.branchy` v1): the same n0 -> n1 ->
n2, but n1 is a conditional whose case runs `staged.train`; the lost attempt is the branch's child
node execution `n1-0-n1-n0`.

RECOVERED_COPY (`gs1:production:w6e0r4t8y2u6i0o4p8a2`, only with `only_lost_scenario(recovered=
True)`): what a recovery of PIPELINE left, as the sandbox's own RecoverExecution makes it — mode
RECOVERED, `reference_execution` PIPELINE, n0..n2 RECOVERED with no task execution, each node's
inputs copied and its outputs.pb written from Admin's outputs: n1's an empty map.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from forensics.model import UTC, ExecutionRef
from forensics.sandbox.blobs import inputs_pb, outputs_pb, split_uri
from forensics.sandbox.incident import MODELS_BUCKET, ScenarioBuilder
from forensics.sandbox.k8s_events import routine_events
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLaunchPlan,
    SandboxNode,
    SandboxObject,
    SandboxTask,
    SandboxWorkflowNode,
    Scenario,
)

PROJECT, DOMAIN = "gs1", "production"
PIPELINE = ExecutionRef(PROJECT, DOMAIN, "k8m2n6b0v4c8x2z6l0j4")
BRANCHY = ExecutionRef(PROJECT, DOMAIN, "r3t7y1u5i9o3p7a1s5d9")
# A scan window holding both executions (and nothing of the reference incident's).
WINDOW_START = datetime(2026, 10, 5, tzinfo=UTC)
WINDOW_END = datetime(2026, 10, 7, tzinfo=UTC)
IMAGE = "ghcr.io/exa-labs/staged:2026.10.01"
CORPUS = "s3://exa-data/corpus/2026-10/"
# Node ids of the declared graph (the same in both executions' workflows).
PREP, TRAIN, EVAL = "n0", "n1", "n2"
BRANCH_CHILD = "n1-0-n1-n0"  # BRANCHY's lost node execution: <parent>-<retry>-<spec id>
RECOVERED_COPY = ExecutionRef(PROJECT, DOMAIN, "w6e0r4t8y2u6i0o4p8a2")

PREP_TASK = SandboxTask(
    PROJECT, DOMAIN, "staged.prep", "v1", "python-task", 0, image=IMAGE,
    inputs=("corpus",), outputs=("dataset",), cacheable=True, cache_version="1.0",
    requests=(("cpu", "8"), ("memory", "32Gi")),
)  # fmt: skip
TRAIN_TASK = SandboxTask(
    PROJECT, DOMAIN, "staged.train", "v1", "python-task", 1, image=IMAGE,
    inputs=("dataset", "checkpoint_dir"), interruptible=True,
    requests=(("cpu", "16"), ("gpu", "8"), ("memory", "320Gi")), accelerator="nvidia-h100",
)  # fmt: skip
EVAL_TASK = SandboxTask(
    PROJECT, DOMAIN, "staged.eval", "v1", "python-task", 0, image=IMAGE,
    inputs=("dataset", "checkpoint_dir"), outputs=("metrics",),
    requests=(("cpu", "4"), ("gpu", "1"), ("memory", "16Gi")),
)  # fmt: skip
TASKS = (PREP_TASK, TRAIN_TASK, EVAL_TASK)


def checkpoint_dir(ref: ExecutionRef) -> str:
    """The execution's `checkpoint_dir` input, where its training saves checkpoints."""
    return f"s3://{MODELS_BUCKET}/checkpoints/staged/{ref.name}/"


def dataset(ref: ExecutionRef) -> str:
    """What n0 prep returned in `ref` (its outputs.pb's `dataset`)."""
    return f"s3://exa-data/datasets/{ref.name}/"


def graph(branch: bool = False) -> list[SandboxWorkflowNode]:
    """n0 prep -> n1 train -> n2 eval as flytekit declares it: bindings by promise, n2 after n1
    by `>>` only; `branch` wraps n1 in a conditional."""
    wf = "start-node"
    return [
        SandboxWorkflowNode(PREP, PREP_TASK, {"corpus": (wf, "corpus")}),
        SandboxWorkflowNode(
            TRAIN,
            TRAIN_TASK,
            {"dataset": (PREP, "dataset"), "checkpoint_dir": (wf, "checkpoint_dir")},
            kind="branch" if branch else "task",
        ),
        SandboxWorkflowNode(
            EVAL,
            EVAL_TASK,
            {"dataset": (PREP, "dataset"), "checkpoint_dir": (wf, "checkpoint_dir")},
            upstream=[TRAIN],
        ),
    ]


def _t(day: int, hh: int, mm: int, ss: int = 0) -> datetime:
    return datetime(2026, 10, day, hh, mm, ss, tzinfo=UTC)


def _pipeline(b: ScenarioBuilder, ref: ExecutionRef, start: datetime, branch: bool) -> None:
    """One execution: prep 1 h, train 6 h (signalled at its end), eval 1 h, all SUCCEEDED."""
    name, ns = ref.name, f"{ref.project}-{ref.domain}"
    ckpt = checkpoint_dir(ref)
    prep_end = start + timedelta(hours=1)
    signal = prep_end + timedelta(hours=6)
    train_end = signal + timedelta(seconds=7)
    eval_end = train_end + timedelta(hours=1)
    train_node = BRANCH_CHILD if branch else TRAIN
    train_pod = f"{name}-{train_node}-0"
    data = {"dataset": dataset(ref), "checkpoint_dir": ckpt}

    def attempt(
        node: str, task: SandboxTask, s: datetime, e: datetime, **kw: Any
    ) -> SandboxAttempt:
        return SandboxAttempt(0, "SUCCEEDED", s, e, [f"{name}-{node}-0"], task, **kw)

    nodes = [
        SandboxNode(PREP, "SUCCEEDED", [attempt(PREP, PREP_TASK, start, prep_end,
                    write_outputs=True, outputs={"dataset": dataset(ref)})],
                    inputs={"corpus": CORPUS}),
    ]  # fmt: skip
    train = SandboxNode(
        train_node,
        "SUCCEEDED",
        [attempt(train_node, TRAIN_TASK, prep_end + timedelta(minutes=1), train_end)],
        inputs=dict(data),
    )
    if branch:
        # propeller's branch handler runs the chosen case as a child node of the branch node.
        nodes.append(SandboxNode(TRAIN, "SUCCEEDED", is_parent=True, inputs=dict(data)))
        train.spec_node_id = f"{TRAIN}-n0"
        train.parent_unique_id = TRAIN
    nodes.append(train)
    nodes.append(
        SandboxNode(EVAL, "SUCCEEDED", [attempt(EVAL, EVAL_TASK, train_end + timedelta(seconds=30),
                    eval_end, write_outputs=True, outputs={"metrics": f"{ckpt}metrics.json"})],
                    inputs=dict(data))
    )  # fmt: skip
    lp = ("", "", "wf.branchy" if branch else "wf.staged", "v1")
    b.add(
        SandboxExecution(
            ref.project, ref.domain, name, "SUCCEEDED", start - timedelta(minutes=1),
            eval_end + timedelta(seconds=5), nodes=nodes, launch_plan=lp,
            inputs={"corpus": CORPUS, "checkpoint_dir": ckpt},
        )
    )  # fmt: skip
    b.signal_pod(signal, ns, train_pod, train_pod)
    b.checkpoint_objects(ckpt, [prep_end + timedelta(hours=h) for h in (2, 4, 6)])


def _recovered_copy(b: ScenarioBuilder, original: SandboxExecution, at: datetime) -> None:
    """RECOVERED_COPY: every node of `original` copied (attemptRecovery), its files written."""
    ref = RECOVERED_COPY
    copy = SandboxExecution(
        ref.project, ref.domain, ref.name, "SUCCEEDED", at, at + timedelta(seconds=20),
        launch_plan=original.launch_plan, inputs=dict(original.inputs), mode="RECOVERED",
        reference_execution=(original.project, original.domain, original.name),
    )  # fmt: skip
    for node in original.nodes:
        copy.nodes.append(SandboxNode(node.node_id, "RECOVERED", inputs=dict(node.inputs)))
        written = next((a.outputs for a in node.attempts if a.write_outputs), {})
        for name, body in (
            ("inputs.pb", inputs_pb(node.inputs)),
            ("0/outputs.pb", outputs_pb(written)),  # GetOutputs: missing -> empty
        ):
            bucket, key = split_uri(f"{copy.node_data_dir(node.node_id)}/{name}")
            b.scenario.objects.append(SandboxObject(bucket, key, body, at + timedelta(seconds=5)))
    b.add(copy)


def only_lost_scenario(recovered: bool = False) -> Scenario:
    """PIPELINE and BRANCHY (module docstring), their logs, checkpoints and launch plans; with
    `recovered`, RECOVERED_COPY too (a recovery of PIPELINE made the day after)."""
    b = ScenarioBuilder()
    b.scenario.buckets.add("exa-data")
    b.scenario.tasks += list(TASKS)
    for name, branch in (("wf.staged", False), ("wf.branchy", True)):
        b.scenario.launch_plans.append(
            SandboxLaunchPlan(
                PROJECT, DOMAIN, name, "v1",
                [(PREP, PREP_TASK), (TRAIN, TRAIN_TASK), (EVAL, EVAL_TASK)],
                created_at=_t(1, 0, 0), graph=graph(branch), inputs=("corpus", "checkpoint_dir"),
            )
        )  # fmt: skip
    _pipeline(b, PIPELINE, _t(5, 1, 0), branch=False)
    if recovered:
        _recovered_copy(b, b.scenario.executions[-1], _t(6, 9, 0))
    _pipeline(b, BRANCHY, _t(5, 12, 0), branch=True)
    b.routine_logs(WINDOW_START - timedelta(days=1), WINDOW_END + timedelta(days=1))
    b.scenario.log_lines += routine_events(
        [f"{PROJECT}-{DOMAIN}"], WINDOW_START, WINDOW_END, every=timedelta(minutes=10)
    )
    return b.build()
