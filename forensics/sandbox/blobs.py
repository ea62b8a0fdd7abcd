"""The files propeller and flytekit leave in the metadata bucket for a Scenario, and the blob store
the sandbox Admin reads and writes them through (flyteadmin's `storage.DataStore`).

`attempt_files` is what the sandbox S3 seeds; `MemoryBlobs` holds the same for an Admin server run
without S3 (the Admin-only tests). The stack gives Admin the S3 server itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Protocol

from flyteidl.core.errors_pb2 import ContainerError, ErrorDocument
from flyteidl.core.execution_pb2 import ExecutionError

from forensics.sandbox.admin_protos import literal_map
from forensics.sandbox.scenario import Scenario

OUTPUTS_FILE = "outputs.pb"
ERROR_FILE = "error.pb"
INPUTS_FILE = "inputs.pb"


class Blobs(Protocol):
    """Objects by `s3://bucket/key` URI, as flyteadmin's and propeller's data store reads them."""

    def read(self, uri: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""

    def write(self, uri: str, body: bytes) -> None:
        """Create or replace the object."""


def split_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key)."""
    rest = uri.removeprefix("s3://")
    bucket, _, key = rest.partition("/")
    return bucket, key


def attempt_files(scenario: Scenario) -> Iterable[tuple[str, str, bytes, datetime | None]]:
    """(bucket, key, body, last_modified) of each node's inputs.pb and each attempt's
    outputs.pb / error.pb."""
    for execution in scenario.executions:
        for node in execution.nodes:
            if node.expired:
                continue  # a lifecycle rule removed the whole node folder
            if node.attempts:
                # propeller writes the node's inputs before it runs (flytepropeller v1.16.8
                # `nodes/executor.go` preExecute: WriteProtobuf(GetInputsFile(dataDir))).
                bucket, key = split_uri(f"{execution.node_data_dir(node.node_id)}/{INPUTS_FILE}")
                first = min(a.started_at for a in node.attempts)
                yield bucket, key, inputs_pb(node.inputs), first
            for sub in node.subtasks:
                if sub.write_outputs:
                    bucket, prefix = split_uri(scenario.subtask_output_dir(execution, node, sub))
                    ended = max((a.ended_at for a in node.attempts if a.ended_at), default=None)
                    yield bucket, prefix + OUTPUTS_FILE, outputs_pb({}), ended
            for attempt in node.attempts:
                if attempt.inline_outputs and attempt.phase == "SUCCEEDED":
                    # flyteadmin's offloaded copy of the event's outputs (whatever the pod wrote).
                    uri = execution.offloaded_uri(node.node_id, attempt, "offloaded_outputs")
                    bucket, key = split_uri(uri)
                    yield bucket, key, outputs_pb(attempt.outputs), attempt.ended_at
                if not (attempt.write_outputs or attempt.write_error):
                    continue
                bucket, prefix = split_uri(scenario.output_dir(execution, node, attempt.attempt))
                when = attempt.ended_at
                if attempt.write_outputs:
                    yield bucket, prefix + OUTPUTS_FILE, outputs_pb(attempt.outputs), when
                if attempt.write_error:
                    yield (
                        bucket,
                        prefix + ERROR_FILE,
                        error_pb(attempt.phase, attempt.reason, when),
                        when,
                    )


def inputs_pb(values: dict[str, str | list[str]]) -> bytes:
    """A node's inputs.pb: the LiteralMap propeller resolved from its bindings."""
    return literal_map(values).SerializeToString()


def outputs_pb(values: dict[str, str]) -> bytes:
    """What flytekit writes on success: the task's outputs as a LiteralMap (empty, zero bytes, for
    a task that returns nothing)."""
    return literal_map(dict(values)).SerializeToString()


def error_pb(phase: str, reason: str, when: datetime | None) -> bytes:
    """An ErrorDocument as flytekit's entrypoint writes it (flytekit `bin/entrypoint.py`)."""
    recoverable = phase != "FAILED"
    error = ContainerError(
        code="USER:Recoverable" if recoverable else "USER:RuntimeError",
        message=reason or "task failed",
        kind=ContainerError.RECOVERABLE if recoverable else ContainerError.NON_RECOVERABLE,
        origin=ExecutionError.USER,
    )
    if when is not None:
        error.timestamp.FromDatetime(when.astimezone(timezone.utc))
    return ErrorDocument(error=error).SerializeToString()


class MemoryBlobs:
    """A dict of objects, seeded (on first use) with the scenario's objects and files."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario: Scenario | None = scenario
        self._objects: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def _seeded(self) -> dict[str, bytes]:
        if self._scenario is not None:
            for o in self._scenario.objects:
                self._objects[f"s3://{o.bucket}/{o.key}"] = o.body
            for bucket, key, body, _ in attempt_files(self._scenario):
                self._objects.setdefault(f"s3://{bucket}/{key}", body)
            self._scenario = None
        return self._objects

    def read(self, uri: str) -> bytes | None:
        with self._lock:
            return self._seeded().get(uri)

    def write(self, uri: str, body: bytes) -> None:
        with self._lock:
            self._seeded()[uri] = body
