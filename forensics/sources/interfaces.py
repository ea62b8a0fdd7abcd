"""What the library calls on each evidence source, as small protocols.

`LokiClient`, `AdminClient` and `ObjectStore` implement them against the real services; the
unit tests' in-process fakes (tests/support/fakes.py) implement them against data held in
memory. Each protocol lists only what the scan, `examine`, the timeline and the relauncher
call; a method added here must be added to the fakes too.

Every method takes and returns our own types (the model's, `admin_types.py`'s): no protobuf,
no lock or callback from the caller; concurrency is the caller's to bound. Every client counts
the requests it sends in `calls` (by kind, retries included). Every read raises
`forensics.errors.SourceError` (or its `NotFoundError`) when the source cannot answer; the object
store answers `ObjectCheck("unknown", reason)` / `PrefixListing("unknown")` instead for a single
object or prefix. Only the scan turns failures into report gaps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from forensics.model import (
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    KeyPage,
    LogEntry,
    ObjectCheck,
    PrefixListing,
    ShardRead,
    Window,
)

if TYPE_CHECKING:  # the record types only
    from forensics.sources.admin_types import (
        Literals,
        NodeData,
        RerunRequest,
        Reruns,
        SkippedNode,
        SweptAttempts,
        TaskFacts,
        TaskResources,
        VersionRequest,
        WorkflowFacts,
        WorkflowGraph,
    )


class LokiReader(Protocol):
    """Loki's query API as the scan reads it."""

    @property
    def calls(self) -> Counter[str]:
        """HTTP requests sent so far, by API path (retries included)."""
        ...

    def read_shards(
        self, query: str, window: Window, *, shard: timedelta, max_query_length: timedelta
    ) -> Iterator[LogEntry | ShardRead]:
        """`window` read in shards: entries as pages arrive (time-ordered within a shard), one
        `ShardRead` per shard when it ends (its failed parts, if any); a failing shard does not
        stop the others. Closing the iterator stops the reads."""
        ...

    def holds_any(self, stream_selector: str, window: Window) -> bool:
        """Whether Loki serves at least one entry of `stream_selector` in `window`."""
        ...

    def label_names(self, window: Window) -> list[str]:
        """The label names of the streams Loki holds in `window`, sorted."""
        ...

    def close(self) -> None: ...


class AdminReader(Protocol):
    """Flyte Admin as the scan, `examine` and the timeline read it."""

    @property
    def endpoint(self) -> str:
        """Where Admin is (shown in the scan's call log line)."""
        ...

    @property
    def calls(self) -> Counter[str]:
        """Admin calls sent so far, by RPC (retries included)."""
        ...

    def project_domains(self) -> dict[str, tuple[str, ...]]:
        """Every project with the domains ListProjects lists for it."""
        ...

    def list_executions(
        self,
        project: str,
        domain: str,
        *,
        filters: str | Sequence[str] | None = None,
    ) -> Iterator[ExecutionRecord]:
        """The executions matching flyteadmin `filters`, page by page, each once (a page read
        when the iterator advances to it; a failed page raises from `next`)."""
        ...

    def list_execution_pages(
        self, project: str, domain: str, *, filters: str | Sequence[str] | None = None
    ) -> Iterator[list[ExecutionRecord]]:
        """`list_executions` one page per `next` (its one Admin call sent inside it): the scan
        holds its slot around each `next`, not around each execution handed on."""
        ...

    def get_execution(self, ref: ExecutionRef) -> ExecutionRecord:
        """One execution; `NotFoundError` when Admin does not know it."""
        ...

    def list_attempts(self, ref: ExecutionRef) -> list[AttemptRecord]:
        """Every task attempt of every node of `ref`, nested nodes included."""
        ...

    def sweep_attempts(self, ex: ExecutionRecord) -> SweptAttempts:
        """The attempts of the nodes whose task can be elastic, and the task nodes passed over
        (the caller lists those the evidence points at with `node_attempts`)."""
        ...

    def node_attempts(self, ref: ExecutionRef, nodes: Sequence[SkippedNode]) -> list[AttemptRecord]:
        """The attempts of nodes a sweep passed over."""
        ...

    def with_node(self, att: AttemptRecord) -> AttemptRecord:
        """An attempt listed without its node execution, with what that holds (its checkpoint
        location); the attempt itself when it was listed with it."""
        ...

    def get_inputs(self, ref: ExecutionRef) -> dict[str, str]:
        """The execution's inputs as text."""
        ...

    def get_node_inputs(
        self, ref: AttemptRef, *, array_node: str | None = None, array_index: int | None = None
    ) -> dict[str, str]:
        """The inputs of the attempt's own node as text."""
        ...

    def task_resources(self, task_id: tuple[str, str, str, str]) -> TaskResources:
        """What one registered task requests; `NotFoundError` if it is not registered."""
        ...

    def relaunches_of(
        self, project: str, domain: str, since: datetime
    ) -> dict[ExecutionRef, ExecutionRef]:
        """Existing relaunches created at or after `since`: original -> its first relaunch."""
        ...

    def reruns_of(self, project: str, domain: str, since: datetime) -> Reruns:
        """`relaunches_of` and the RECOVERED executions (original -> its recoveries), in the
        same one listing."""
        ...

    def close(self) -> None: ...


class RelaunchAdmin(AdminReader, Protocol):
    """Flyte Admin as the relauncher uses it: the reads above, the facts its refusals rest on,
    and the calls that create an execution — a relaunch, a relaunch at another version, a
    single-task re-run of one node — each exactly once: a taken name raises `AlreadyRelaunched`
    when the execution holding it is that relaunch (or re-run) of `ref`."""

    def task_facts(self, task_id: tuple[str, str, str, str]) -> TaskFacts: ...

    def workflow_facts(self, launch_plan: tuple[str, str, str, str]) -> WorkflowFacts: ...

    def launch_plan_versions(self, project: str, domain: str, name: str) -> list[str]: ...

    def version_request(
        self, ref: ExecutionRef, *, version: str, name: str, overwrite_cache: bool = True
    ) -> VersionRequest: ...

    def relaunch(
        self, ref: ExecutionRef, *, name: str, overwrite_cache: bool = True
    ) -> ExecutionRef: ...

    def create_relaunch(self, ref: ExecutionRef, request: VersionRequest) -> ExecutionRef: ...

    # `relaunch --only-lost` (docs/commands.md): the graph, the recorded data, one task re-run.
    def workflow_graph(self, workflow: tuple[str, str, str, str]) -> WorkflowGraph: ...

    def node_data(self, ref: ExecutionRef, node_id: str) -> NodeData: ...

    def execution_outputs(self, ref: ExecutionRef) -> Literals: ...

    def rerun(self, request: RerunRequest) -> ExecutionRef: ...


class ObjectReader(Protocol):
    """The object store (S3) as the scan reads it: outputs.pb and checkpoint prefixes."""

    @property
    def endpoint(self) -> str:
        """Where the store is (shown in the scan's call log line)."""
        ...

    @property
    def calls(self) -> Counter[str]:
        """Requests sent so far, by S3 operation (each listing page is one)."""
        ...

    def outputs_check(self, output_dir: str, inputs_uri: str | None = None) -> ObjectCheck:
        """Whether `<output_dir>outputs.pb` exists; a missing one is judged by the node's
        `inputs_uri` (expired folder or never written)."""
        ...

    def list_from(
        self, bucket: str, prefix: str, start_after: str, max_keys: int = 1000
    ) -> KeyPage | ObjectCheck:
        """One listing page: the keys under `prefix` after `start_after`, in S3's order, or an
        `unknown` check with why."""
        ...

    def judged(
        self, outputs: ObjectCheck, inputs_uri: str | None, witness: ObjectCheck | None = None
    ) -> ObjectCheck:
        """`outputs_check`'s answer from an outputs.pb known otherwise (a listing): a missing
        one judged by the node's inputs.pb (`witness` when a listing already says)."""
        ...

    def list_prefix(self, uri: str) -> PrefixListing:
        """Count and newest LastModified under a prefix, or why unknown."""
        ...
