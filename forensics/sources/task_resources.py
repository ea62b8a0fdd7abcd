"""What a task template requests of the cluster: pods, GPUs and CPUs per pod, read from its
protobuf into `TaskResources` (a plain record of `admin_types.py`); part of the Admin transport.

How flytekit writes them (flytekit 1.16 `core/utils.py::_get_container_definition`,
`core/resources.py`): `@task(resources=Resources(cpu="8", gpu="4"))` becomes
`container.resources.requests` entries `CPU "8"`, `GPU "4"` (a single value sets only the
request; a `(request, limit)` pair sets both); `requests=`/`limits=` set each list.
`accelerator=GPUAccelerator("nvidia-tesla-a100")` becomes `extended_resources.gpu_accelerator`
(`construct_extended_resources`). Kubernetes runs a pod with a limit and no request at the limit
(for `nvidia.com/gpu` request and limit must be equal), so a missing request falls back to the
limit.

A task with a pod template (`k8s_pod`; kfpytorch's `Elastic` and `PyTorch` configs make one to
mount shared memory) carries the primary container's resources in the pod spec instead.
A PyTorchJob (`task_type` `pytorch`, flytekitplugins-kfpytorch `task.py`) carries
`DistributedPyTorchTrainingTask` (flyteidl `plugins/kubeflow/pytorch.proto`) in `custom` as
`MessageToDict` JSON: `workerReplicas.replicas` pods (torch elastic: `max_nodes`, no master),
and for the non-elastic `PyTorch` config one `masterReplicas` pod more; a replica spec's own
`resources` replace the container's for its pods (flyteplugins `kfoperators/common`
`OverrideContainerSpec`).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from flyteidl.core import tasks_pb2
from google.protobuf.json_format import MessageToDict

from forensics.sources.admin_types import PodResources, TaskResources

__all__ = ["PodResources", "TaskResources", "primary_container", "quantity", "resources_of"]

_NAMES = tasks_pb2.Resources.ResourceName


def quantity(text: str) -> float | None:
    """A Kubernetes CPU or GPU quantity (`"8"`, `"500m"`, `"1.5"`) as a number; None if not one."""
    text = text.strip()
    scale = Decimal(1)
    if text.endswith("m"):
        text, scale = text[:-1], Decimal("0.001")
    try:
        value = Decimal(text) * scale
    except InvalidOperation:
        return None
    return float(value) if value >= 0 else None


Entries = dict[str, dict[str, str]]  # "requests" | "limits" -> resource name -> quantity


def _entries(res: tasks_pb2.Resources) -> Entries:
    out: Entries = {"requests": {}, "limits": {}}
    for kind in ("requests", "limits"):
        for e in getattr(res, kind):
            out[kind][_NAMES.Name(e.name).lower()] = e.value
    return out


def _k8s_name(name: str) -> str:
    """`nvidia.com/gpu`, `amd.com/gpu` and flytekit's `gpu` all count as GPUs."""
    return "gpu" if name == "gpu" or name.endswith("/gpu") else name


def _pod_entries(tpl: tasks_pb2.TaskTemplate) -> tuple[Entries, str]:
    """The primary container's resources of a pod-template task (`k8s_pod`): flytekit then
    writes them into the pod spec as Kubernetes does, `{"requests": {"gpu": "8"}}`
    (`core/utils.py::_serialize_pod_spec`), and names the container in
    `config["primary_container_name"]`."""
    where = "k8s_pod.pod_spec primary container resources"
    c = primary_container(tpl)
    if c is None:
        return {"requests": {}, "limits": {}}, where
    res = c.get("resources") or {}
    entries = {
        kind: {_k8s_name(k): str(v) for k, v in (res.get(kind) or {}).items()}
        for kind in ("requests", "limits")
    }
    return entries, where


def primary_container(tpl: tasks_pb2.TaskTemplate) -> dict[str, Any] | None:
    """The primary container of a pod-template task (`k8s_pod`) as a dict of the pod spec, the
    one `config["primary_container_name"]` names (flytekit `core/utils.py::_serialize_pod_spec`,
    default `primary`); None when the template has no pod spec or no such container."""
    if not tpl.HasField("k8s_pod"):
        return None
    spec = MessageToDict(tpl.k8s_pod.pod_spec)
    primary = tpl.config.get("primary_container_name", "primary")
    return next((c for c in spec.get("containers", []) if c.get("name") == primary), None)


def _task_entries(tpl: tasks_pb2.TaskTemplate) -> tuple[Entries, str]:
    if tpl.HasField("k8s_pod"):
        return _pod_entries(tpl)
    return _entries(tpl.container.resources), "container.resources"


def _one(
    entries: Entries, name: str, where: str, unknown: list[str]
) -> tuple[float | None, str | None]:
    """One resource per pod: the request, else the limit; (None, None) when neither names it."""
    for kind in ("requests", "limits"):
        raw = entries[kind].get(name)
        if raw is not None:
            value = quantity(raw)
            if value is None:
                unknown.append(f"{name} {kind} {raw!r} in {where} is not a quantity")
            return value, f"{where}.{kind}"
    return None, None


def _pod(
    role: str, count: int, entries: Entries, where: str, unknown: list[str], said: list[str]
) -> PodResources:
    gpus, gpu_from = _one(entries, "gpu", where, unknown)
    cpus, cpu_from = _one(entries, "cpu", where, unknown)
    any_named = any(entries.values())
    if gpu_from is None:
        if any_named:
            gpus = 0.0  # the author set resources and named no GPU: a GPU pod must name one
        else:
            unknown.append(f"{role} pods: the template requests no resources (platform defaults)")
    if cpu_from is None and any_named:
        unknown.append(f"{role} pods: the template names no CPU (a platform default applies)")
    said += [s for s in (gpu_from, cpu_from) if s]
    return PodResources(role, count, gpus, cpus)


def _replica(custom: dict[str, Any], key: str) -> tuple[int, Entries | None]:
    spec = custom.get(key) or {}
    replicas = int(spec.get("replicas", 1 if key == "masterReplicas" else 0) or 0)
    res = spec.get("resources")
    if not res:
        return replicas, None
    parsed = tasks_pb2.Resources()
    for kind in ("requests", "limits"):
        for e in res.get(kind, []):
            entry = getattr(parsed, kind).add()
            entry.name = _NAMES.Value(e.get("name", "UNKNOWN"))
            entry.value = str(e.get("value", ""))
    return replicas, _entries(parsed)


def resources_of(tpl: tasks_pb2.TaskTemplate) -> TaskResources:
    """What `tpl` requests per pod and how many pods one attempt runs (module docstring)."""
    t = tpl.id
    task = f"{t.project}:{t.domain}:{t.name}:{t.version}"
    unknown: list[str] = []
    said: list[str] = []
    container, container_where = _task_entries(tpl)
    accelerator = None
    if tpl.HasField("extended_resources") and tpl.extended_resources.HasField("gpu_accelerator"):
        accelerator = tpl.extended_resources.gpu_accelerator.device or None
        said.append("extended_resources.gpu_accelerator")
    pods: list[PodResources] = []
    custom = MessageToDict(tpl.custom) if tpl.type == "pytorch" and tpl.HasField("custom") else {}
    if custom:
        for role, key in (("worker", "workerReplicas"), ("master", "masterReplicas")):
            if key == "masterReplicas" and "elasticConfig" in custom:
                continue  # torch elastic runs workers only (kfpytorch `PytorchElasticFunctionTask`)
            count, own = _replica(custom, key)
            if count:
                where = f"custom.{key}.resources" if own is not None else container_where
                pods.append(_pod(role, count, own or container, where, unknown, said))
                said.append(f"custom.{key}.replicas")
        if not pods:
            unknown.append("the PyTorchJob names no replicas")
            pods.append(PodResources("worker", 1, None, None))
    else:
        pods.append(_pod("task", 1, container, container_where, unknown, said))
    source = f"task template {task}: " + (", ".join(dict.fromkeys(said)) or "no resources")
    return TaskResources(task, tuple(pods), accelerator, source, tuple(unknown))
