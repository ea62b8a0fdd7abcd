"""Scenario model: plain dataclasses from which the sandbox's Loki, Admin and S3 are seeded.

The protocol servers only translate requests against this state (as moto's models/responses
split does); what a scenario contains — the reference incident and its neighbours — is built by
`forensics.sandbox.incident`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class SandboxLogLine:
    """One log line in one Loki stream."""

    ts_ns: int
    labels: dict[str, str]
    line: str


@dataclass
class SandboxTask:
    """A registered task template (what GetTask returns)."""

    project: str
    domain: str
    name: str
    version: str
    task_type: str = "python-task"  # "pytorch" for multi-node elastic
    task_type_version: int = 1  # 1: single-node Elastic (and map tasks); 0: plain python task
    has_outputs: bool = False  # whether the interface declares outputs (one, `o0`)
    image: str = "ghcr.io/exa-labs/train:2026.09.01"  # the container image
    runtime_version: str = "1.16.31"  # metadata.runtime.version: flytekit that serialized it
    cacheable: bool = False  # metadata.discoverable
    cache_version: str = ""  # metadata.discovery_version
    interruptible: bool | None = None  # metadata.interruptible
    # What flytekit serializes of `@task(resources=..., accelerator=...)` and of a torch-elastic
    # PyTorchJob (sources/task_resources.py cites the upstream files): (name, quantity) entries.
    requests: tuple[tuple[str, str], ...] = ()  # container.resources.requests: ("gpu", "4")
    limits: tuple[tuple[str, str], ...] = ()  # container.resources.limits
    accelerator: str | None = None  # extended_resources.gpu_accelerator.device
    worker_replicas: int | None = None  # custom workerReplicas.replicas (`pytorch` only)
    # A pod-template task: kfpytorch's Elastic mounts shared memory through one by default, and
    # flytekit then writes `k8s_pod` (the primary container, its resources) and no `container`.
    pod_template: bool = False
    # The interface's variables by name (all `str` in the sandbox); `outputs` overrides
    # `has_outputs`' single `o0` when given.
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    retries: int | None = None  # metadata.retries.retries (None: unset)


@dataclass
class SandboxAttempt:
    """One task execution (retry attempt) of a node."""

    attempt: int
    phase: str  # TaskExecution.Phase name: SUCCEEDED, FAILED, RETRYABLE_FAILED, RUNNING, ...
    started_at: datetime
    ended_at: datetime | None
    pods: list[str]  # first is the generated name / primary pod
    task: SandboxTask
    write_outputs: bool = False  # seed <output_dir>/outputs.pb in S3
    write_error: bool = False  # seed <output_dir>/error.pb in S3
    reason: str = ""
    # propeller's inline raw-output policy: the outputs travel in the event and flyteadmin
    # offloads them under its own prefix, so Admin's output_uri is not <output_dir>/outputs.pb.
    inline_outputs: bool = False
    # Kubernetes events about the attempt's pod that propeller's `send-object-events` passes on
    # and Admin keeps in `closure.reasons`: (occurred_at, message) each.
    reasons: list[tuple[datetime, str]] = field(default_factory=list)
    # Propeller never saw the pod RUNNING (Pending -> Succeeded between two rounds): flyteadmin
    # then records no started_at and no duration, and `updated_at` is the terminal event's
    # report time (`transformers/task_execution.go`); `ended_at` is that report time.
    never_running: bool = False
    # What its outputs.pb holds (`write_outputs`), string literals; empty: what a task returning
    # nothing writes.
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class SandboxSubtask:
    """One subtask retry of an array (map) node: an `ExternalResourceInfo` of the array's task
    execution (propeller's default ArrayNode event version 0)."""

    index: int
    phase: str  # TaskExecution.Phase name
    retry_attempt: int = 0
    write_outputs: bool = False  # seed <array output dir>/<index>/<retry>/outputs.pb in S3


@dataclass
class SandboxNode:
    """One node execution; `node_id` is Admin's unique id (e.g. `n0`, `n0-0-dn1`)."""

    node_id: str
    phase: str  # NodeExecution.Phase name
    attempts: list[SandboxAttempt] = field(default_factory=list)
    spec_node_id: str | None = None  # defaults to node_id
    parent_unique_id: str | None = None  # unique id of the parent node for nested nodes
    is_parent: bool = False
    is_dynamic: bool = False
    is_array: bool = False
    checkpoint_uri: str | None = None
    # The node's own inputs (GetNodeExecutionData); a list is a collection literal (map inputs).
    inputs: dict[str, str | list[str]] = field(default_factory=dict)
    subtasks: list[SandboxSubtask] = field(default_factory=list)  # array nodes (is_array)
    child_execution: tuple[str, str, str] | None = None  # a launch-plan node's child execution
    # A bucket lifecycle rule expired the node's folder: its inputs.pb (which propeller writes
    # before the node runs, `nodes/executor.go` preExecute) and every outputs.pb are gone.
    expired: bool = False


@dataclass
class SandboxExecution:
    """One workflow execution with its nodes."""

    project: str
    domain: str
    name: str
    phase: str  # WorkflowExecution.Phase name
    created_at: datetime
    updated_at: datetime
    nodes: list[SandboxNode] = field(default_factory=list)
    mode: str = "MANUAL"
    reference_execution: tuple[str, str, str] | None = None  # (project, domain, name)
    inputs: dict[str, str] = field(default_factory=dict)  # string literals only
    labels: dict[str, str] = field(default_factory=dict)
    launch_plan: tuple[str, str, str, str] = (
        "",
        "",
        "wf.train",
        "v1",
    )  # project, domain, name, version
    metadata_bucket: str = "flyte-metadata"
    # A child execution: the parent's (project, domain, name, node_id) that launched it.
    parent: tuple[str, str, str, str] | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    service_account: str = ""  # spec.security_context.run_as.k8s_service_account
    raw_output_prefix: str = ""  # spec.raw_output_data_config.output_location_prefix
    # Archived in the console / `flytectl update execution --archive` (flyteadmin
    # UpdateExecution: closure.state_change_details, the `state` column EXECUTION_ARCHIVED).
    archived: bool = False
    # The event version propeller reports with (flyteadmin's `eventVersion`, 2 by default,
    # `runtime/application_config_provider.go`). Under 0 a `@dynamic` node's children name their
    # parent task execution (propeller `nodes/transformers.go` ParentTaskMetadata), so flyteadmin
    # answers that task execution with `is_parent` (`transformers/task_execution.go`); from 1 on
    # they name their parent node instead, and no task execution is a parent.
    event_version: int = 2

    def node_data_dir(self, node_id: str) -> str:
        """`s3://<bucket>/metadata/propeller/<project>-<domain>-<name>/<node>/data` (no slash)."""
        return (
            f"s3://{self.metadata_bucket}/metadata/propeller/"
            f"{self.project}-{self.domain}-{self.name}/{node_id}/data"
        )

    def offloaded_uri(self, node_id: str, attempt: SandboxAttempt, suffix: str) -> str:
        """Where flyteadmin offloads an event's inline data (`common.OffloadLiteralMap`, nested
        keys from `transformers/task_execution.go`): `offloaded_outputs` / `offloaded_inputs`."""
        t = attempt.task
        keys = [self.project, self.domain, self.name, node_id, t.project, t.domain, t.name]
        keys += [t.version, str(attempt.attempt), suffix]
        return f"s3://{self.metadata_bucket}/metadata/" + "/".join(keys)


@dataclass
class SandboxObject:
    """One S3 object to seed; `last_modified` backdates it (None: seeding time)."""

    bucket: str
    key: str
    body: bytes = b""
    last_modified: datetime | None = None


@dataclass
class SandboxWorkflowNode:
    """One node of a registered workflow's graph, as flytekit declares it and the compiler keeps
    it (`core.Node`): its task, its input bindings and its explicit upstream nodes.

    `bindings` maps an input of the task to `(node id, output)`: `("start-node", name)` is a
    workflow input. `upstream` holds the nodes it waits for without a data binding (`>>`).
    `kind` is `task`, `branch` (a conditional whose one case runs `task`) or `subworkflow`
    (`children` are the sub-workflow's nodes).
    """

    node_id: str
    task: SandboxTask | None = None
    bindings: dict[str, tuple[str, str]] = field(default_factory=dict)
    upstream: list[str] = field(default_factory=list)
    kind: str = "task"
    children: list[SandboxWorkflowNode] = field(default_factory=list)


@dataclass
class SandboxLaunchPlan:
    """A registered launch plan version and its workflow (same name and version).

    `nodes` are the workflow's task nodes (node id, task); `launch_plan_nodes` the ids of nodes
    that launch other launch plans (child executions). `concurrency_max` sets the launch plan's
    concurrency policy (behaviour SKIP). Launch plans the executions name but the scenario does
    not list are derived from those executions' top-level nodes.
    """

    project: str
    domain: str
    name: str
    version: str
    nodes: list[tuple[str, SandboxTask]] = field(default_factory=list)
    launch_plan_nodes: list[str] = field(default_factory=list)
    concurrency_max: int | None = None
    created_at: datetime | None = None
    # The workflow's declared graph (its inputs are `inputs`, all `str`): when given, GetWorkflow
    # compiles it with bindings and connections as flytepropeller's compiler does, instead of
    # deriving the nodes from the executions.
    graph: list[SandboxWorkflowNode] = field(default_factory=list)
    inputs: tuple[str, ...] = ()


@dataclass
class Scenario:
    """Everything the sandbox serves."""

    executions: list[SandboxExecution] = field(default_factory=list)
    log_lines: list[SandboxLogLine] = field(default_factory=list)
    objects: list[SandboxObject] = field(default_factory=list)
    buckets: set[str] = field(default_factory=set)
    tasks: list[SandboxTask] = field(default_factory=list)
    launch_plans: list[SandboxLaunchPlan] = field(default_factory=list)
    # flyteadmin's configured domains, which ListProjects lists for every project
    # (`project_manager.go`); deployments rename them (`dev`, `prod`, ...).
    domains: list[str] = field(default_factory=lambda: ["development", "staging", "production"])

    def output_dir(self, execution: SandboxExecution, node: SandboxNode, attempt: int) -> str:
        return f"{execution.node_data_dir(node.node_id)}/{attempt}/"

    def subtask_output_dir(
        self, execution: SandboxExecution, node: SandboxNode, subtask: SandboxSubtask
    ) -> str:
        """propeller `constructOutputReferences`: `<array output dir>/<index>/<retry>/` (the
        array node itself never retries: its output dir is attempt 0's)."""
        base = self.output_dir(execution, node, 0)
        return f"{base}{subtask.index}/{subtask.retry_attempt}/"
