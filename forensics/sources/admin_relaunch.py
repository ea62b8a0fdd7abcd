"""Flyte Admin's relaunch writes over the transport: RelaunchExecution, CreateExecution of a
launch plan version's request, and a single-task CreateExecution re-running one node
(`--only-lost`), each exactly once (docs/commands.md, relaunch).

Creating executions (flyteadmin v1.16.8 `execution_manager.go`; docs/upstream.md, "Creating
executions"): both run the launch plan's concurrency check before the row is inserted, and at
its limit answer ALREADY_EXISTS, the same code as a taken name, which is why ALREADY_EXISTS is
resolved by reading the name back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forensics.errors import AlreadyRelaunched, FailureKind, NotFoundError, SourceError, UsageError
from forensics.identifiers import EXECUTION_NAME_MAX, is_execution_name
from forensics.model import ExecutionRef
from forensics.sources.admin_types import Created, RerunRequest, VersionRequest, one_line

if TYPE_CHECKING:
    from forensics.sources.admin_transport import AdminTransport


def _check_name(name: str) -> None:
    if not is_execution_name(name.lower()):  # flyteadmin lower-cases the name first
        raise UsageError(
            f"relaunch name {name!r}: Flyte execution names match ^[a-z][a-z-0-9]*$ "
            f"and have at most {EXECUTION_NAME_MAX} characters"
        )


class AdminRelaunch:
    """The calls that create an execution. A taken name raises `AlreadyRelaunched` once
    GetExecution confirms the execution holding it is a relaunch (or re-run) of `ref`; anything
    else that holds it raises a SourceError carrying Admin's message."""

    _transport: AdminTransport

    def relaunch(
        self, ref: ExecutionRef, *, name: str, overwrite_cache: bool = True
    ) -> ExecutionRef:
        """RelaunchExecution (same spec and inputs, mode RELAUNCH) under the fixed `name`.

        `name` is mandatory because it is what makes the call exactly-once: when a response is
        lost (UNAVAILABLE / DEADLINE_EXCEEDED after Admin created the execution), the retry
        with the same name gets ALREADY_EXISTS instead of creating a second execution.
        RecoverExecution is never used: it copies the outputs of nodes marked SUCCEEDED —
        exactly the node that lied.
        """
        _check_name(name)
        created = self._transport.relaunch_execution(ref, name, overwrite_cache)
        return self._created("RelaunchExecution", ref, name, created)

    def version_request(
        self, ref: ExecutionRef, *, version: str, name: str, overwrite_cache: bool = True
    ) -> VersionRequest:
        """The CreateExecution request that relaunches `ref` on its launch plan at `version`.

        What RelaunchExecution would copy, minus the launch plan version: the original's inputs,
        labels, annotations, security context and raw output prefix, mode RELAUNCH and the
        reference to the original. Other per-execution overrides (interruptible, envs, max
        parallelism) are the new version's own; `parent_node_execution` is not sent, so the run
        is a top-level one. NotFoundError when the launch plan version does not exist.
        """
        _check_name(name)
        return self._transport.version_request(
            ref, version=version, name=name, overwrite_cache=overwrite_cache
        )

    def create_relaunch(self, ref: ExecutionRef, request: VersionRequest) -> ExecutionRef:
        """CreateExecution of a `version_request`, exactly once as `relaunch` is."""
        created = self._transport.create_execution(ref, request)
        return self._created("CreateExecution", ref, request.name, created)

    def rerun(self, request: RerunRequest) -> ExecutionRef:
        """A single-task CreateExecution re-running one node of `request.original`, exactly
        once: a taken name raises `AlreadyRelaunched` when the execution holding it re-runs that
        task for that original (docs/commands.md, "relaunch --only-lost")."""
        _check_name(request.name)
        created = self._transport.create_rerun(request)
        if created.ref is not None:
            return created.ref
        ref = request.original
        existing = ExecutionRef(ref.project, ref.domain, request.name)
        said = f"CreateExecution: ALREADY_EXISTS: {one_line(created.taken or '')}"
        try:
            record = self._transport.execution(existing)
        except NotFoundError:
            raise SourceError("admin", said, target=str(ref), kind=FailureKind.REJECTED) from None
        if record.reference_execution != ref or record.launch_plan != request.task:
            raise SourceError(
                "admin",
                f"{said} (the name {request.name} is taken by {existing}, which is not a re-run "
                f"of {ref} node {request.node})",
                target=str(ref),
                kind=FailureKind.REJECTED,
            )
        raise AlreadyRelaunched(existing, original=ref, after_retry=created.sent > 1)

    def _created(self, rpc: str, ref: ExecutionRef, name: str, created: Created) -> ExecutionRef:
        if created.ref is not None:
            return created.ref
        raise self._already_exists(rpc, ref, name, created.taken or "", created.sent)

    def _already_exists(
        self, rpc: str, ref: ExecutionRef, name: str, details: str, sent: int
    ) -> AlreadyRelaunched:
        """What an ALREADY_EXISTS means: the exactly-once name taken by a relaunch of `ref`, or
        something else (a launch plan's concurrency limit: "concurrency limit (N) reached for
        launch plan X; skipping execution"). Anything but our own relaunch raises a SourceError
        carrying Admin's message."""
        existing = ExecutionRef(ref.project, ref.domain, name)
        said = f"{rpc}: ALREADY_EXISTS: {one_line(details)}"
        try:
            record = self._transport.execution(existing)
        except NotFoundError:
            raise SourceError("admin", said, target=str(ref), kind=FailureKind.REJECTED) from None
        if record.mode != "RELAUNCH" or record.reference_execution != ref:
            raise SourceError(
                "admin",
                f"{said} (the name {name} is taken by {existing}, which is not a relaunch of "
                f"{ref}: mode {record.mode})",
                target=str(ref),
                kind=FailureKind.REJECTED,
            )
        return AlreadyRelaunched(existing, original=ref, after_retry=sent > 1)
