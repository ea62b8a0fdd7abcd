"""The sandbox Admin's protobuf builders: a Scenario's executions, nodes, attempts, tasks,
launch plans and workflows as flyteadmin stores and returns them."""

from __future__ import annotations

import random
import re
import string
from datetime import datetime
from typing import Any

from flyteidl.admin import (
    execution_pb2,
    launch_plan_pb2,
    node_execution_pb2,
    task_execution_pb2,
    workflow_pb2,
)
from flyteidl.core import (
    catalog_pb2,
    compiler_pb2,
    identifier_pb2,
    interface_pb2,
    literals_pb2,
    tasks_pb2,
    types_pb2,
)
from flyteidl.core import execution_pb2 as core_execution_pb2
from flyteidl.core import (
    workflow_pb2 as core_workflow_pb2,
)
from flyteidl.event import event_pb2
from google.protobuf import json_format, struct_pb2
from google.protobuf import message as pb_message
from google.protobuf.timestamp_pb2 import Timestamp

from forensics.evidence.flyte_names import generated_name
from forensics.model import UTC
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLaunchPlan,
    SandboxNode,
    SandboxTask,
)

WfPhase = core_execution_pb2.WorkflowExecution.Phase
NodePhase = core_execution_pb2.NodeExecution.Phase
TaskPhase = core_execution_pb2.TaskExecution.Phase
Mode = execution_pb2.ExecutionMetadata.ExecutionMode


def timestamp(t: datetime | None) -> Timestamp | None:
    if t is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(t.astimezone(UTC))
    return ts


def set_time(msg: Any, name: str, t: datetime | None) -> None:
    if t is not None:
        getattr(msg, name).CopyFrom(timestamp(t))


def set_duration(msg: Any, start: datetime | None, end: datetime | None) -> None:
    if start is not None and end is not None:
        msg.duration.FromTimedelta(end - start)


def execution_identifier(p: str, d: str, n: str) -> identifier_pb2.WorkflowExecutionIdentifier:
    return identifier_pb2.WorkflowExecutionIdentifier(project=p, domain=d, name=n)


def task_key(t: SandboxTask) -> tuple[str, str, str, str]:
    return (t.project, t.domain, t.name, t.version)


def task_identifier(t: SandboxTask) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK,
        project=t.project,
        domain=t.domain,
        name=t.name,
        version=t.version,
    )


def lp_identifier(lp: SandboxLaunchPlan, resource_type: int) -> identifier_pb2.Identifier:
    return identifier_pb2.Identifier(
        resource_type=resource_type,
        project=lp.project,
        domain=lp.domain,
        name=lp.name,
        version=lp.version,
    )


def metadata_prefix(wf: identifier_pb2.WorkflowExecutionIdentifier) -> str:
    return f"s3://flyte-metadata/metadata/propeller/{wf.project}-{wf.domain}-{wf.name}"


def go_proto(msg: pb_message.Message) -> str:
    """Roughly how Go's `%v` prints a proto identifier in flyteadmin's messages."""
    return " ".join(f'{f.name}:"{v}"' for f, v in msg.ListFields())


def random_name() -> str:
    return random.choice(string.ascii_lowercase) + "".join(
        random.choices(string.ascii_lowercase + string.digits, k=19)
    )


def pod_generated_name(attempt: SandboxAttempt) -> str:
    """PyTorchJob pods are `<generated>-master-0` / `<generated>-worker-N`; plain pods are it."""
    first = attempt.pods[0] if attempt.pods else ""
    if attempt.task.task_type == "pytorch":
        m = re.fullmatch(r"(.+)-(master|worker)-\d+", first)
        if m:
            return m.group(1)
    return first


def literal_map(values: dict[str, str | list[str]]) -> literals_pb2.LiteralMap:
    """String literals; a list becomes a collection of them (a map task's per-subtask inputs)."""

    def one(v: str) -> literals_pb2.Literal:
        return literals_pb2.Literal(
            scalar=literals_pb2.Scalar(primitive=literals_pb2.Primitive(string_value=v))
        )

    literals = {}
    for k, v in values.items():
        if isinstance(v, list):
            literals[k] = literals_pb2.Literal(
                collection=literals_pb2.LiteralCollection(literals=[one(x) for x in v])
            )
        else:
            literals[k] = one(v)
    return literals_pb2.LiteralMap(literals=literals)


def proto_time(msg: Any, name: str) -> datetime | None:
    return getattr(msg, name).ToDatetime(tzinfo=UTC) if msg.HasField(name) else None


def duration_ns(closure: Any) -> int | None:
    return closure.duration.ToNanoseconds() if closure.HasField("duration") else None


def node_proto(
    ex: SandboxExecution,
    node_id: str,
    phase: str,
    start: datetime | None,
    end: datetime | None,
) -> node_execution_pb2.NodeExecution:
    """A node execution of `ex` with its phase and times, as propeller's events leave it."""
    closure = node_execution_pb2.NodeExecutionClosure(phase=NodePhase.Value(phase))
    set_time(closure, "started_at", start)
    set_time(closure, "created_at", start)
    set_time(closure, "updated_at", end or start)
    set_duration(closure, start, end)
    return node_execution_pb2.NodeExecution(
        id=identifier_pb2.NodeExecutionIdentifier(
            node_id=node_id, execution_id=execution_identifier(ex.project, ex.domain, ex.name)
        ),
        input_uri=f"{ex.node_data_dir(node_id)}/inputs.pb",
        closure=closure,
        metadata=node_execution_pb2.NodeExecutionMetaData(spec_node_id=node_id),
    )


def task_execution_proto(
    ex: SandboxExecution, node: SandboxNode, a: SandboxAttempt, namespace_template: str
) -> task_execution_pb2.TaskExecution:
    """One attempt's task execution as Admin records it (closure, pods, output location)."""
    closure = task_execution_pb2.TaskExecutionClosure(
        phase=TaskPhase.Value(a.phase), task_type=a.task.task_type, reason=a.reason
    )
    # The container plugin takes a single-pod attempt's end from the container's FinishedAt,
    # which Kubernetes keeps in whole seconds (flyteplugins `k8s/pod/plugin.go`,
    # `pod_helper.go`); for a PyTorchJob propeller stamps the end itself when it
    # observes the job's success, so the scenario's time stands.
    end = a.ended_at
    if end is not None and a.task.task_type != "pytorch":
        end = end.replace(microsecond=0)
    set_time(closure, "created_at", a.started_at)
    if a.never_running:
        # flyteadmin `transformers/task_execution.go`: StartedAt only from a RUNNING event,
        # Duration only after one ("task execution is missing StartedAt"); UpdatedAt is the
        # terminal event's reported_at, propeller's time.Now() (`nodes/task/transformer.go`).
        set_time(closure, "updated_at", a.ended_at or a.started_at)
    else:
        set_time(closure, "started_at", a.started_at)
        set_time(closure, "updated_at", end or a.started_at)
        set_duration(closure, a.started_at, end)
    for at, message in a.reasons:
        # flyteadmin appends each event's reasons (transformers/task_execution.go); propeller
        # sends the watched object's k8s events as EventReason{reason: note, occurred_at}
        # (flytepropeller pkg/controller/nodes/task/k8s/plugin_manager.go).
        closure.reasons.add(message=message).occurred_at.CopyFrom(timestamp(at))
    data_dir = ex.node_data_dir(node.node_id)
    input_uri = f"{data_dir}/inputs.pb"
    if a.inline_outputs:
        # Inline raw-output policy: inputs and outputs travel in the events and flyteadmin
        # offloads both under its own prefix (`transformers/task_execution.go`).
        input_uri = ex.offloaded_uri(node.node_id, a, "offloaded_inputs")
    if a.phase == "SUCCEEDED" and a.inline_outputs:
        closure.output_uri = ex.offloaded_uri(node.node_id, a, "offloaded_outputs")
    elif a.phase == "SUCCEEDED":
        # propeller reports OutputWriter.GetOutputPath() on success, whether or not the task
        # wrote the file — which is the whole incident.
        closure.output_uri = f"{data_dir}/{a.attempt}/outputs.pb"
    elif a.phase in ("FAILED", "RETRYABLE_FAILED"):
        closure.error.CopyFrom(
            core_execution_pb2.ExecutionError(
                code="USER:Unknown",
                message=a.reason,
                kind=core_execution_pb2.ExecutionError.USER,
            )
        )
    generated = pod_generated_name(a)
    container = "pytorch" if a.task.task_type == "pytorch" else generated
    closure.metadata.CopyFrom(
        event_pb2.TaskExecutionMetadata(
            generated_name=generated,
            plugin_identifier="pytorch" if a.task.task_type == "pytorch" else "container",
        )
    )
    if a.pods:
        namespace = namespace_template.format(project=ex.project, domain=ex.domain)
        closure.log_context.primary_pod_name = a.pods[0]
        for pod in a.pods:
            closure.log_context.pods.append(
                core_execution_pb2.PodLogContext(
                    namespace=namespace,
                    pod_name=pod,
                    primary_container_name=container,
                    containers=[core_execution_pb2.ContainerContext(container_name=container)],
                )
            )
    return task_execution_pb2.TaskExecution(
        id=identifier_pb2.TaskExecutionIdentifier(
            task_id=task_identifier(a.task),
            node_execution_id=identifier_pb2.NodeExecutionIdentifier(
                node_id=node.node_id,
                execution_id=execution_identifier(ex.project, ex.domain, ex.name),
            ),
            retry_attempt=a.attempt,
        ),
        input_uri=input_uri,
        closure=closure,
        is_parent=node.is_dynamic and ex.event_version == 0,
    )


def array_shape(
    te: task_execution_pb2.TaskExecution, ex: SandboxExecution, node: SandboxNode, a: SandboxAttempt
) -> None:
    """An array node's one task execution as propeller's ArrayNode reports it: task type
    `container_array`, plugin `k8s-array`, no pod of its own, one ExternalResourceInfo per
    subtask retry with `external_id` = `<array generated name>-n<index>-<retry>`, sorted by index
    then retry (docs/upstream.md, "Flyte Admin" under "The sandbox servers")."""
    c = te.closure
    c.task_type = "container_array"
    c.ClearField("log_context")
    array_name = generated_name([ex.name, node.node_id, a.attempt])
    # `finalize` sets only the external resources and the plugin: the array has no pod itself.
    c.metadata.CopyFrom(event_pb2.TaskExecutionMetadata(plugin_identifier="k8s-array"))
    for sub in sorted(node.subtasks, key=lambda s: (s.index, s.retry_attempt)):
        c.metadata.external_resources.append(
            event_pb2.ExternalResourceInfo(
                external_id=f"{array_name}-n{sub.index}-{sub.retry_attempt}",
                index=sub.index,
                retry_attempt=sub.retry_attempt,
                phase=TaskPhase.Value(sub.phase),
                cache_status=catalog_pb2.CACHE_DISABLED,
            )
        )


def task_template(t: SandboxTask) -> tasks_pb2.TaskTemplate:
    """The task template flytekit would have registered for `t`."""
    outputs = _variables(t.outputs or (("o0",) if t.has_outputs else ()))
    metadata = tasks_pb2.TaskMetadata(
        runtime=tasks_pb2.RuntimeMetadata(
            type=tasks_pb2.RuntimeMetadata.FLYTE_SDK, version=t.runtime_version, flavor="python"
        ),
        discoverable=t.cacheable,
        discovery_version=t.cache_version,
    )
    if t.interruptible is not None:
        metadata.interruptible = t.interruptible
    if t.retries is not None:
        metadata.retries.retries = t.retries
    tpl = tasks_pb2.TaskTemplate(
        id=task_identifier(t),
        type=t.task_type,
        task_type_version=t.task_type_version,
        interface=interface_pb2.TypedInterface(inputs=_variables(t.inputs), outputs=outputs),
        metadata=metadata,
        # flytekit serializes both single-node and PyTorchJob tasks with a container
        container=tasks_pb2.Container(
            image=t.image, args=["pyflyte-execute"], resources=_resources(t)
        ),
    )
    if t.pod_template:
        _as_pod_template(tpl)
    if t.accelerator:  # flytekit core/resources.py `construct_extended_resources`
        tpl.extended_resources.gpu_accelerator.device = t.accelerator
    if t.worker_replicas is not None:
        tpl.custom.CopyFrom(_elastic_job(t.worker_replicas))
    return tpl


def _variables(names: tuple[str, ...]) -> interface_pb2.VariableMap:
    """`str` variables, as flytekit declares a `str` input or output."""
    out = interface_pb2.VariableMap()
    for name in names:
        out.variables[name].CopyFrom(
            interface_pb2.Variable(type=types_pb2.LiteralType(simple=types_pb2.STRING))
        )
    return out


def _resources(t: SandboxTask) -> tasks_pb2.Resources:
    """`container.resources` as flytekit core/utils.py `_get_container_definition` writes it."""
    name = tasks_pb2.Resources.ResourceName
    return tasks_pb2.Resources(
        requests=[tasks_pb2.Resources.ResourceEntry(name=name.Value(k.upper()), value=v)
                  for k, v in t.requests],
        limits=[tasks_pb2.Resources.ResourceEntry(name=name.Value(k.upper()), value=v)
                for k, v in t.limits],
    )  # fmt: skip


def _as_pod_template(tpl: tasks_pb2.TaskTemplate) -> None:
    """Move the container into `k8s_pod` as flytekit core/utils.py `_serialize_pod_spec` does:
    the primary container named by `config["primary_container_name"]`, its resources keyed by
    lower-case names (`{"requests": {"gpu": "8"}}`), plus kfpytorch's shared-memory volume."""
    c = tpl.container
    name = tasks_pb2.Resources.ResourceName

    def kind(entries: Any) -> dict[str, str]:
        return {name.Name(e.name).lower().replace("_", "-"): e.value for e in entries}

    primary = {
        "name": "primary",
        "image": c.image,
        "args": list(c.args),
        "resources": {"requests": kind(c.resources.requests), "limits": kind(c.resources.limits)},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    spec = {"containers": [primary], "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]}
    tpl.k8s_pod.pod_spec.update(spec)
    tpl.config["primary_container_name"] = "primary"
    tpl.ClearField("container")


def _elastic_job(nodes: int) -> struct_pb2.Struct:
    """`custom` of a torch-elastic PyTorchJob with `nnodes=nodes` (flytekitplugins-kfpytorch
    `PytorchElasticFunctionTask.get_custom`: MessageToDict of DistributedPyTorchTrainingTask)."""
    from flyteidl.plugins.kubeflow import pytorch_pb2

    job = pytorch_pb2.DistributedPyTorchTrainingTask(
        worker_replicas=pytorch_pb2.DistributedPyTorchTrainingReplicaSpec(replicas=nodes),
        elastic_config=pytorch_pb2.ElasticConfig(
            rdzv_backend="c10d", min_replicas=nodes, max_replicas=nodes, nproc_per_node=8
        ),
    )
    custom = struct_pb2.Struct()
    custom.update(json_format.MessageToDict(job))
    return custom


def launch_plan_proto(lp: SandboxLaunchPlan) -> launch_plan_pb2.LaunchPlan:
    """A launch plan version (its workflow has the same name and version in the sandbox)."""
    ident = lp_identifier(lp, identifier_pb2.LAUNCH_PLAN)
    # the launch plan's workflow has the same name and version in the sandbox
    spec = launch_plan_pb2.LaunchPlanSpec(workflow_id=lp_identifier(lp, identifier_pb2.WORKFLOW))
    if lp.concurrency_max is not None:
        spec.concurrency_policy.max = lp.concurrency_max
        spec.concurrency_policy.behavior = (
            launch_plan_pb2.ConcurrencyLimitBehavior.CONCURRENCY_LIMIT_BEHAVIOR_SKIP
        )
    closure = launch_plan_pb2.LaunchPlanClosure(state=launch_plan_pb2.ACTIVE)
    set_time(closure, "created_at", lp.created_at)
    return launch_plan_pb2.LaunchPlan(id=ident, spec=spec, closure=closure)


def workflow_proto(lp: SandboxLaunchPlan) -> workflow_pb2.Workflow:
    """The launch plan's workflow, compiled: its task nodes, launch-plan nodes and templates."""
    wf_id = launch_plan_proto(lp).spec.workflow_id
    nodes = [
        core_workflow_pb2.Node(
            id=node_id,
            task_node=core_workflow_pb2.TaskNode(reference_id=task_identifier(t)),
        )
        for node_id, t in lp.nodes
    ]
    for node_id in lp.launch_plan_nodes:
        ref = identifier_pb2.Identifier(
            resource_type=identifier_pb2.LAUNCH_PLAN,
            project=lp.project,
            domain=lp.domain,
            name=f"{lp.name}.{node_id}",
            version=lp.version,
        )
        nodes.append(
            core_workflow_pb2.Node(
                id=node_id, workflow_node=core_workflow_pb2.WorkflowNode(launchplan_ref=ref)
            )
        )
    tasks = {task_key(t): t for _, t in lp.nodes}
    compiled = compiler_pb2.CompiledWorkflowClosure(
        primary=compiler_pb2.CompiledWorkflow(
            template=core_workflow_pb2.WorkflowTemplate(id=wf_id, nodes=nodes)
        ),
        tasks=[compiler_pb2.CompiledTask(template=task_template(t)) for t in tasks.values()],
    )
    return workflow_pb2.Workflow(
        id=wf_id, closure=workflow_pb2.WorkflowClosure(compiled_workflow=compiled)
    )
