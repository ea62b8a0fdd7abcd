"""What Flyte Admin answers, as our own plain records (no protobuf): the Admin protocol's types.

`admin_transport.py` builds them from flyteidl's messages; the reads (`admin_reads.py`), the
relaunch writes (`admin_relaunch.py`), the scan and the relauncher only ever see these.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple, TypeVar

from forensics.model import AttemptRecord, ExecutionRef
from forensics.secrets import mask
from forensics.sources.admin_closures import NodePlan

TaskId = tuple[str, str, str, str]  # project, domain, name, version
TERMINAL_TASK_PHASES = frozenset({"SUCCEEDED", "FAILED", "ABORTED", "RETRYABLE_FAILED"})

H = TypeVar("H", bound=Hashable)


@lru_cache(maxsize=50_000)
def shared(value: H) -> H:
    """The one object equal to `value` that records share: identifiers many records repeat (a
    project, a namespace, a node id, a task type, a task's id), so a scan's candidates do not
    hold a copy each (docs/performance.md, "Memory grows with the number of candidates").
    Bounded, so a long `watch` meeting new versions forgets old ones."""
    return value


def one_line(text: str, limit: int = 300) -> str:
    """An answer's text for an error line: one line, secrets masked, at most `limit` long."""
    text = mask(" ".join(text.split()), loose=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class NodeRecord(NamedTuple):
    """One node execution: what the sweep and an attempt record read of it."""

    node_id: str  # Admin's unique node id (`n0`, `n0-0-dn1`)
    spec_node_id: str
    input_uri: str
    checkpoint_uri: str  # "" when none
    phase: str
    is_array: bool
    is_dynamic: bool
    is_parent_node: bool
    start_or_end: bool  # `start-node` / `end-node`: never a task
    may_have_tasks: bool  # Admin can hold task executions for it


class Subtask(NamedTuple):
    """One array subtask retry, as the array's task execution lists it (ExternalResourceInfo)."""

    index: int
    retry_attempt: int
    phase: str
    external_id: str


class TaskRun(NamedTuple):
    """One task execution: its attempt record as listed (the task template not yet applied),
    whether it spawned nodes, its array subtasks, and what `subtask_records` reads."""

    attempt: AttemptRecord
    is_parent: bool
    subtasks: tuple[Subtask, ...]
    own_pods: tuple[str, ...]  # the attempt's pods without its array subtasks'
    updated_at: datetime | None


class TaskTemplate(NamedTuple):
    """What the scan needs of a task template: its type, version and whether it has outputs."""

    type: str
    version: int
    outputs_declared: bool


class TaskFacts(NamedTuple):
    """What a task template says about the code a relaunch would run (plain data)."""

    id: TaskId
    type: str
    image: str | None  # the container's image (None: no container in the template)
    runtime: str | None  # metadata.runtime: flytekit's version that serialized the task
    interruptible: bool | None  # metadata.interruptible (None: not set)
    cacheable: bool  # metadata.discoverable
    cache_version: str


class WorkflowFacts(NamedTuple):
    """A launch plan version's compiled workflow: its tasks and the nodes that run them."""

    launch_plan: TaskId
    workflow: TaskId
    tasks: dict[TaskId, TaskFacts]
    task_nodes: tuple[tuple[str, TaskId], ...]  # (node id, task id)
    launch_plan_nodes: tuple[str, ...]  # nodes that launch other executions (caches unseen)


class DynamicWorkflow(NamedTuple):
    """A `@dynamic` parent's compiled workflow: its children's plan and its tasks' templates."""

    plan: NodePlan
    templates: dict[TaskId, TaskTemplate]


class SkippedNode(NamedTuple):
    """A task node a sweep passed over (its task cannot be elastic) and its parent's id."""

    node: NodeRecord
    parent: str | None
    dynamic: str | None = None  # the nearest dynamic ancestor (where its template lives)

    @property
    def node_id(self) -> str:
        return self.node.node_id


class SweptAttempts(NamedTuple):
    """`sweep_attempts`' answer: the attempts listed, the nodes passed over, whether a plan was
    read, and whether the nodes were listed directly (no ListNodeExecutions: a `@dynamic` node's
    children, if any, were not seen)."""

    attempts: list[AttemptRecord]
    skipped: tuple[SkippedNode, ...]
    planned: bool
    direct: bool = False


@dataclass(frozen=True)
class VersionRequest:
    """A CreateExecution that relaunches `original` on its launch plan at another version.

    `data` is the request as JSON (protobuf field names), shown in plans and audit lines;
    `payload` its serialized message, which only the Admin transport reads.
    """

    original: ExecutionRef
    name: str
    launch_plan: TaskId  # the version the new execution runs
    data: dict[str, object] = field(compare=False)
    payload: bytes = field(repr=False, compare=False)


class Created(NamedTuple):
    """What a create request got: the new execution, or ALREADY_EXISTS with Admin's details;
    `sent` is how many times the request went out (more than one: an answer was lost)."""

    ref: ExecutionRef | None
    taken: str | None
    sent: int


@dataclass(frozen=True)
class PodResources:
    """One kind of pod of a task: how many, and what each requests (None: not said)."""

    role: str  # "task" | "worker" | "master"
    count: int
    gpus: float | None
    cpus: float | None


@dataclass(frozen=True)
class TaskResources:
    """A task template's requests, where each number comes from, and what it does not say."""

    task: str  # project:domain:name:version
    pods: tuple[PodResources, ...]
    accelerator: str | None
    source: str
    unknown: tuple[str, ...] = ()

    @property
    def pod_count(self) -> int:
        return sum(p.count for p in self.pods)

    @property
    def gpus(self) -> float | None:
        """GPUs of all pods together; None when any pod's count is not said."""
        return _total(self.pods, "gpus")

    @property
    def cpus(self) -> float | None:
        """CPUs of all pods together; None when any pod's count is not said."""
        return _total(self.pods, "cpus")


def _total(pods: tuple[PodResources, ...], what: str) -> float | None:
    values = [getattr(p, what) for p in pods]
    if any(v is None for v in values):
        return None
    return float(sum(v * p.count for v, p in zip(values, pods, strict=True)))


# -- re-running only what was lost (docs/commands.md, "relaunch --only-lost") -----------------


class Binding(NamedTuple):
    """One input binding of a workflow node: where its value `var` comes from."""

    var: str
    node: str | None  # the promise's node (`start-node`: a workflow input); None: a static value
    output: str | None  # the promised output's name
    plain: bool  # a scalar or one promise; False: a collection or map holding promises


class GraphNode(NamedTuple):
    """One node of a workflow's primary template, as its compiled closure holds it."""

    node_id: str
    kind: str  # task / branch / sub-workflow / launch-plan / gate / array / other
    task: TaskId | None  # the task of a task node
    upstream: tuple[str, ...]  # the nodes it runs after (`connections.upstream`)
    bindings: tuple[Binding, ...]


class WorkflowGraph(NamedTuple):
    """A workflow version's top-level nodes (in the closure's order) and its tasks' facts."""

    workflow: TaskId
    nodes: tuple[GraphNode, ...]
    tasks: dict[TaskId, TaskFacts]

    def node(self, node_id: str) -> GraphNode | None:
        return next((n for n in self.nodes if n.node_id == node_id), None)


@dataclass(frozen=True)
class Literals:
    """A literal map as Admin recorded it: each value serialized (`payload`, read only by the
    transport) and as text (`texts`, shown in plans and the audit log)."""

    payload: dict[str, bytes] = field(repr=False, compare=False)
    texts: dict[str, str]


class NodeData(NamedTuple):
    """GetNodeExecutionData of one node: its recorded inputs and outputs (None: not recorded)."""

    inputs: Literals
    outputs: Literals | None


@dataclass(frozen=True)
class RerunRequest:
    """A single-task CreateExecution (flyteadmin `launchSingleTaskExecution`): `task` run under
    `name` with `inputs`, a re-run of node `node` of `original`. `data` is the request as JSON."""

    original: ExecutionRef
    node: str
    task: TaskId
    name: str
    inputs: Literals
    data: dict[str, object] = field(compare=False)
    overwrite_cache: bool = False  # the task is cacheable: recompute, never serve the cache


def rerun_labels(original: ExecutionRef, node: str) -> dict[str, str]:
    """The labels a re-run carries: which execution and node it re-runs (Kubernetes label
    values: at most 63 characters of `[A-Za-z0-9_.-]`, which execution names and node ids are)."""
    return {"elastic-audit-rerun-of": original.name, "elastic-audit-rerun-node": node[:63]}


class Reruns(NamedTuple):
    """One listing of the RELAUNCH and RECOVERED executions of a project and domain: original
    -> its first relaunch, and original -> its recoveries (copies of its false success, never a
    repair: docs/verdicts.md, "Never recover")."""

    relaunches: dict[ExecutionRef, ExecutionRef]
    recoveries: dict[ExecutionRef, tuple[ExecutionRef, ...]]
