"""Flyte Admin scenarios shared by the sandbox server's tests and the Admin client's: the
elastic, PyTorchJob and dynamic tasks, one execution of each shape, many executions in order."""

from __future__ import annotations

from datetime import datetime, timedelta

from forensics.model import UTC
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxNode,
    SandboxTask,
)

T0 = datetime(2026, 9, 10, 19, 0, tzinfo=UTC)
PROJECT, DOMAIN = "gs1", "production"
ELASTIC = SandboxTask(PROJECT, DOMAIN, "train.elastic", "v7")  # python-task, version 1
PYTORCH = SandboxTask(PROJECT, DOMAIN, "train.multinode", "v7", task_type="pytorch")
DYNAMIC = SandboxTask(PROJECT, DOMAIN, "sweep.fanout", "v7", task_type_version=0)


# -- scenario builders (also used by test_admin_client) ---------------------------------------


def attempt(
    name: str,
    node: str,
    n: int,
    phase: str = "SUCCEEDED",
    *,
    task: SandboxTask = ELASTIC,
    start: datetime = T0,
    minutes: int = 30,
    pods: list[str] | None = None,
    reason: str = "",
) -> SandboxAttempt:
    """One attempt whose pod is named as propeller names it: `<exec>-<node>-<attempt>`."""
    return SandboxAttempt(
        attempt=n,
        phase=phase,
        started_at=start,
        ended_at=start + timedelta(minutes=minutes) if phase != "RUNNING" else None,
        pods=pods if pods is not None else [f"{name}-{node}-{n}"],
        task=task,
        reason=reason,
    )


def execution(
    name: str,
    *,
    created: datetime = T0,
    updated: datetime | None = None,
    phase: str = "SUCCEEDED",
    nodes: list[SandboxNode] | None = None,
    mode: str = "MANUAL",
    inputs: dict[str, str] | None = None,
    reference: str | None = None,
    project: str = PROJECT,
) -> SandboxExecution:
    """An execution with, unless told otherwise, one elastic node `n0` that succeeded once."""
    if nodes is None:
        nodes = [SandboxNode("n0", "SUCCEEDED", [attempt(name, "n0", 0, start=created)])]
    return SandboxExecution(
        project=project,
        domain=DOMAIN,
        name=name,
        phase=phase,
        created_at=created,
        updated_at=updated or created + timedelta(hours=1),
        nodes=nodes,
        mode=mode,
        inputs=inputs or {},
        reference_execution=(project, DOMAIN, reference) if reference else None,
        labels={"team": "llm"},
    )


def dynamic_execution(name: str) -> SandboxExecution:
    """A `@dynamic` parent `n1` whose child `dn0` (unique id `n1-0-dn0`) failed once, then ran."""
    return execution(
        name,
        nodes=[
            SandboxNode("n0", "SUCCEEDED", [attempt(name, "n0", 0)]),
            SandboxNode(
                "n1",
                "SUCCEEDED",
                [attempt(name, "n1", 0, task=DYNAMIC, minutes=2)],
                is_parent=True,
                is_dynamic=True,
            ),
            SandboxNode(
                "n1-0-dn0",
                "SUCCEEDED",
                [
                    attempt(name, "n1-0-dn0", 0, "RETRYABLE_FAILED", minutes=5, reason="OOMKilled"),
                    attempt(name, "n1-0-dn0", 1, start=T0 + timedelta(minutes=6)),
                ],
                spec_node_id="dn0",
                parent_unique_id="n1",
                checkpoint_uri="s3://flyte-raw/ab/dyn-n1-0-dn0-1/_flytecheckpoints",
            ),
        ],
    )


def pytorch_execution(name: str) -> SandboxExecution:
    """A multi-node Elastic (PyTorchJob) attempt with two worker pods."""
    pods = [f"{name}-n0-0-worker-0", f"{name}-n0-0-worker-1"]
    node = SandboxNode("n0", "SUCCEEDED", [attempt(name, "n0", 0, task=PYTORCH, pods=pods)])
    return execution(name, nodes=[node])


def many(n: int, prefix: str = "x") -> list[SandboxExecution]:
    """`n` executions created a minute apart (names sort like their creation order)."""
    return [execution(f"{prefix}{i:04d}", created=T0 + timedelta(minutes=i)) for i in range(n)]
