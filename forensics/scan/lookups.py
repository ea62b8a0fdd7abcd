"""Every Admin and S3 read a scan (or one examination) makes, in one place: the sweep's, the
outputs.pb and checkpoint checks, the relaunch and cost reads, and those about known attempts
(cached). The Loki reads are `signals.SignalLines`, `coverage` and `disruptions`."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime

from forensics.checkpoints import (
    CheckpointLocation,
    checkpoint_from,
    checkpoint_location,
    needs_execution_inputs,
    needs_inputs,
)
from forensics.errors import NotFoundError, SourceError
from forensics.model import (
    AttemptRecord,
    Checkpoint,
    ExecutionRecord,
    ExecutionRef,
    KeyPage,
    ObjectCheck,
    SignalHit,
)
from forensics.sources import Sources
from forensics.sources.admin_types import Reruns, SkippedNode, SweptAttempts, TaskResources


class Lookups:
    """Cached reads through `sources`: an execution, its attempts and inputs are read once.

    Thread-safe; `slots` bounds the Admin calls in flight, whichever thread makes them, to
    `settings.workers` (the scan's pools take a slot per call too), except the sweep's
    (`execution_pages`, `sweep`): the scan's admin pool bounds those.
    """

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.slots = threading.BoundedSemaphore(sources.settings.workers)
        self._lock = threading.Lock()
        self._executions: dict[ExecutionRef, ExecutionRecord | None] = {}
        self._attempts: dict[ExecutionRef, list[AttemptRecord]] = {}
        self._inputs: dict[ExecutionRef, dict[str, str]] = {}
        self._ref_locks: dict[ExecutionRef, threading.Lock] = defaultdict(threading.Lock)

    # -- the sweep's reads, each made once by a scan (not cached) ------------------------------
    def execution_pages(
        self, project: str, domain: str, filters: str
    ) -> Iterator[list[ExecutionRecord]]:
        """One listing's pages, one ListExecutions each, for a caller that bounds the Admin
        calls in flight itself (the sweep: one call at a time per worker of the admin pool)."""
        return self.sources.admin.list_execution_pages(project, domain, filters=filters)

    def live(self, project: str, domain: str, filters: str) -> Iterator[ExecutionRecord]:
        """One listing's executions, for a caller that holds an Admin slot already (`resolve`)."""
        return self.sources.admin.list_executions(project, domain, filters=filters)

    def sweep(self, ex: ExecutionRecord) -> SweptAttempts:
        """The attempts of the execution's nodes that can run an elastic task, and the task
        nodes passed over; its calls are made one at a time, and the caller bounds how many
        sweeps run at once (the scan's admin pool), not `slots`."""
        return self.sources.admin.sweep_attempts(ex)

    def passed_over(self, ref: ExecutionRef, nodes: Sequence[SkippedNode]) -> list[AttemptRecord]:
        """The attempts of nodes the sweep passed over (one ListTaskExecutions each)."""
        with self.slots:
            return self.sources.admin.node_attempts(ref, nodes)

    def relaunches(self, project: str, domain: str, since: datetime) -> Reruns:
        """The RELAUNCH and RECOVERED executions in one project and domain since `since`."""
        with self.slots:
            return self.sources.admin.reruns_of(project, domain, since)

    def task_resources(self, task_id: tuple[str, str, str, str]) -> TaskResources:
        """A task's resource requests (its registered template)."""
        with self.slots:
            return self.sources.admin.task_resources(task_id)

    def list_from(self, bucket: str, prefix: str, after: str, keys: int) -> KeyPage | ObjectCheck:
        """A page of `bucket`'s keys under `prefix` after `after` (the failure as a check)."""
        return self.sources.store.list_from(bucket, prefix, after, keys)

    def judged(
        self, outputs: ObjectCheck, inputs_uri: str | None, witness: ObjectCheck | None
    ) -> ObjectCheck:
        """An outputs.pb state a listing page gave, judged as a HEAD's would be."""
        return self.sources.store.judged(outputs, inputs_uri, witness)

    # -- known attempts, cached ---------------------------------------------------------------
    def execution(self, ref: ExecutionRef) -> ExecutionRecord | None:
        """GetExecution once per execution (None: Admin does not know it)."""
        with self._ref_locks[ref]:
            if ref not in self._executions:
                try:
                    self._executions[ref] = self.sources.admin.get_execution(ref)
                except NotFoundError:
                    self._executions[ref] = None
            return self._executions[ref]

    def remember(self, ex: ExecutionRecord) -> None:
        """An execution a listing returned: no GetExecution needed for it later."""
        with self._lock:
            self._executions.setdefault(ex.ref, ex)

    def attempts(self, ref: ExecutionRef) -> list[AttemptRecord]:
        """The execution's task attempts, listed once."""
        with self._ref_locks[ref]:
            if ref not in self._attempts:
                self._attempts[ref] = self.sources.admin.list_attempts(ref)
            return self._attempts[ref]

    def execution_inputs(self, ref: ExecutionRef) -> dict[str, str]:
        """GetExecutionData once per execution, whatever the number of its findings."""
        # The Admin slot before the execution's lock, the order `resolve` takes them in.
        with self.slots, self._ref_locks[ref]:
            if ref not in self._inputs:
                self._inputs[ref] = self.sources.admin.get_inputs(ref)
            return self._inputs[ref]

    def outputs(self, att: AttemptRecord) -> ObjectCheck:
        """Whether the attempt's outputs.pb exists (unknown, with why, when Admin has no location)."""
        if att.outputs_unknown:
            return ObjectCheck("unknown", att.outputs_unknown)
        if not att.output_dir:
            return ObjectCheck("unknown", "Admin records no output location for this attempt")
        return self.sources.store.outputs_check(att.output_dir, att.inputs_uri)

    def checkpoint(
        self, ex: ExecutionRecord, att: AttemptRecord, signal: SignalHit | None
    ) -> Checkpoint:
        """Locate the attempt's checkpoint and list it (never `empty` for an error)."""
        located = self.checkpoint_location(ex, att)
        if isinstance(located, Checkpoint):
            return located
        return self.checkpoint_listed(located, signal)

    def checkpoint_location(
        self, ex: ExecutionRecord, att: AttemptRecord
    ) -> CheckpointLocation | Checkpoint:
        """Where the attempt's checkpoint is (the Admin reads it takes), or the `unknown`
        checkpoint a failed read leaves."""
        inputs = node_inputs = None
        ck = self.sources.settings.checkpoints
        if needs_inputs(ck):
            # The attempt's own node inputs first (a @dynamic sweep or a map passes each trial
            # its own prefix), then the execution's; the latter only when still needed.
            try:
                with self.slots:
                    node_inputs = self.sources.admin.get_node_inputs(
                        att.ref, array_node=att.array_node, array_index=att.array_index
                    )
            except SourceError as e:
                return Checkpoint(None, "unknown", reason=f"node inputs: {e.cause}")
            if needs_execution_inputs(ck, node_inputs):
                try:
                    inputs = self.execution_inputs(ex.ref)
                except SourceError as e:
                    return Checkpoint(None, "unknown", reason=f"execution inputs: {e.cause}")
        loc = checkpoint_location(ck, att, ex, inputs, node_inputs=node_inputs)
        if loc.source is None and not att.node_read:
            # Flyte's own location is on the node execution, which the sweep's direct listing
            # did not read (docs/performance.md, "What is called"): one GetNodeExecution.
            try:
                with self.slots:
                    att = self.sources.admin.with_node(att)
            except SourceError as e:
                return Checkpoint(None, "unknown", reason=f"node execution: {e.cause}")
            loc = checkpoint_location(ck, att, ex, inputs, node_inputs=node_inputs)
        return loc

    def checkpoint_listed(self, loc: CheckpointLocation, signal: SignalHit | None) -> Checkpoint:
        """The checkpoint at `loc`, listed (one S3 listing; none without a location)."""
        listing = self.sources.store.list_prefix(loc.uri) if loc.uri is not None else None
        return checkpoint_from(loc, listing, signal)
