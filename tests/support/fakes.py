"""In-process fakes of the evidence sources (`forensics.sources.interfaces`), for unit tests of
the scan, the guard and the relauncher that run in milliseconds.

They answer as the real services do, not as the library expects: Loki's LogQL is evaluated by
the sandbox's parser (matchers, line filters), shards are `[start, end)` and entries come in
time order within a shard; Admin's list filters are flyteadmin's (the sandbox's evaluator),
listings are paged and read lazily page by page, archived executions are left out unless the
filters name `state`, unknown executions raise NotFoundError; the object store answers HEAD
and ListObjectsV2 questions over the keys it holds. The loopback sandbox (forensics.sandbox)
stays the end-to-end test of the real clients.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from forensics.config import Settings
from forensics.errors import AlreadyRelaunched, FailureKind, NotFoundError, SourceError
from forensics.model import (
    UTC,
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    FailedPart,
    KeyPage,
    LogEntry,
    ObjectCheck,
    PrefixListing,
    ShardRead,
    Window,
    to_ns,
)
from forensics.sandbox.admin_query import EXECUTION, Abort, Column, parse_filters
from forensics.sandbox.loki_logql import parse_log_query, parse_selector_only
from forensics.sources import Sources
from forensics.sources.admin_filters import (
    EXECUTION_MODES,
    join_filters,
)
from forensics.sources.admin_reads import rerun_filters, reruns_from
from forensics.sources.admin_types import (
    Literals,
    NodeData,
    NodeRecord,
    RerunRequest,
    Reruns,
    SkippedNode,
    SweptAttempts,
    WorkflowGraph,
)
from forensics.sources.expiry import judge_outputs
from forensics.sources.loki_answers import INDEX_STATS, LABELS, QUERY_RANGE
from forensics.sources.loki_limits import reading_length
from forensics.sources.s3_uri import OUTPUTS_FILE

# -- Loki ------------------------------------------------------------------------------------


class FakeLoki:
    """Loki holding lines per stream (labels -> time-sorted entries).

    `fail(start, end, cause)` makes every shard overlapping `[start, end)` fail as a shard whose
    retries ran out does (its entries are not returned, its ShardRead carries the cause as
    the whole shard's failed part). `calls` counts the requests by API path.
    """

    def __init__(self) -> None:
        self._streams: dict[tuple[tuple[str, str], ...], list[tuple[int, str]]] = {}
        self._failing: list[tuple[datetime, datetime, str]] = []
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.queries: list[str] = []

    def push(self, labels: dict[str, str], at: datetime, line: str) -> None:
        """One log line of the stream `labels` (Loki keeps one copy of an exact duplicate)."""
        key = tuple(sorted(labels.items()))
        entries = self._streams.setdefault(key, [])
        item = (to_ns(at), line)
        if item not in entries:
            entries.append(item)
            entries.sort()

    def fail(self, start: datetime, end: datetime, cause: str = "HTTP 502 after 5 retries") -> None:
        self._failing.append((start, end, cause))

    def _failure(self, w: Window) -> str | None:
        return next((c for s, e, c in self._failing if s < w.end and w.start < e), None)

    def _count(self, path: str) -> None:
        with self._lock:
            self.calls[path] += 1

    def read_shards(
        self, query: str, window: Window, *, shard: timedelta, max_query_length: timedelta
    ) -> Iterator[LogEntry | ShardRead]:
        parsed = parse_log_query(query)
        self.queries.append(query)
        for w in window.split(reading_length(shard, max_query_length)):
            self._count(QUERY_RANGE)
            cause = self._failure(w)
            if cause is not None:
                failed = FailedPart(w.start, w.end, cause, FailureKind.UNREACHABLE)
                yield ShardRead(w, 1, 0, (failed,))
                continue
            lo, hi = to_ns(w.start), to_ns(w.end)
            found: list[LogEntry] = []
            for key, entries in self._streams.items():
                labels = dict(key)
                if not parsed.selects(labels) or not parsed.passes(labels):
                    continue
                start = bisect_left(entries, (lo, ""))
                for ts, line in entries[start:]:
                    if ts >= hi:
                        break
                    if all(f.keep(line) for f in parsed.filters):
                        found.append(LogEntry(ts, key, line))
            found.sort(key=lambda e: (e.ts_ns, e.labels, e.line))
            yield from found
            yield ShardRead(w, 1, len(found))

    def holds_any(self, stream_selector: str, window: Window) -> bool:
        self._count(INDEX_STATS)
        cause = self._failure(window)
        if cause is not None:
            raise SourceError("loki", cause, window=(window.start, window.end))
        matchers = parse_selector_only(stream_selector)
        lo, hi = to_ns(window.start), to_ns(window.end)
        for key, entries in self._streams.items():
            labels = dict(key)
            if all(m.matches(labels.get(m.name, "")) for m in matchers):
                i = bisect_left(entries, (lo, ""))
                if i < len(entries) and entries[i][0] < hi:
                    return True
        return False

    def label_names(self, window: Window) -> list[str]:
        self._count(LABELS)
        lo, hi = to_ns(window.start), to_ns(window.end)
        names: set[str] = set()
        for key, entries in self._streams.items():
            if any(lo <= ts < hi for ts, _ in entries):
                names.update(k for k, _ in key)
        return sorted(names)

    def close(self) -> None:
        pass


# -- Flyte Admin -----------------------------------------------------------------------------

ACTIVE, ARCHIVED = 0, 1  # flyteidl admin.ExecutionState


@dataclass
class _Row:
    """One executions-table row: the record, its attempts, and what only the table knows."""

    record: ExecutionRecord
    attempts: list[AttemptRecord] = field(default_factory=list)
    state: int = ACTIVE
    inputs: dict[str, str] = field(default_factory=dict)


_COLUMNS = {
    "execution_project": Column("str", lambda r: r.record.ref.project),
    "execution_domain": Column("str", lambda r: r.record.ref.domain),
    "execution_name": Column("str", lambda r: r.record.ref.name),
    "phase": Column("str", lambda r: r.record.phase),
    "mode": Column("int", lambda r: EXECUTION_MODES[r.record.mode]),
    "state": Column("int", lambda r: r.state),
    "execution_created_at": Column("time", lambda r: r.record.created_at),
    "execution_updated_at": Column("time", lambda r: r.record.updated_at),
    "created_at": Column("time", lambda r: r.record.created_at),
    "updated_at": Column("time", lambda r: r.record.updated_at),
}


class FakeAdmin:
    """Flyte Admin holding executions (in creation order, as `asc(id)` lists them) and each
    one's attempts as the library's records.

    The sweep reads the "compiled closure" as Admin would let it: a node whose attempts are
    all of tasks that cannot be elastic is passed over (a `SkippedNode`) unless the evidence
    points at it. `fail(rpc, cause)` makes every call of `rpc` fail as an unreachable Admin
    does after its retries; `calls` counts the calls per RPC.
    """

    endpoint = "dns:///fake-admin"

    def __init__(self, projects: dict[str, tuple[str, ...]] | None = None) -> None:
        self.projects = dict(projects or {})
        self._rows: list[_Row] = []
        self._by_ref: dict[ExecutionRef, _Row] = {}
        self.tasks: dict[tuple[str, str, str, str], Any] = {}  # task id -> TaskResources/facts
        self.workflows: dict[tuple[str, str, str, str], Any] = {}  # launch plan -> WorkflowFacts
        self.failing: dict[str, tuple[str, str]] = {}
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        self.page_size = 100
        self.graphs: dict[tuple[str, str, str, str], WorkflowGraph] = {}  # workflow -> graph
        self.node_io: dict[tuple[ExecutionRef, str], NodeData] = {}  # (execution, node) -> data
        self.outputs: dict[ExecutionRef, Literals] = {}  # execution -> its outputs
        self.reruns: list[RerunRequest] = []  # single-task executions created, in order
        self.lose_response = False  # the next CreateExecution's answer is lost

    # seeding
    def add(
        self,
        record: ExecutionRecord,
        attempts: Iterable[AttemptRecord] = (),
        *,
        archived: bool = False,
        inputs: dict[str, str] | None = None,
    ) -> None:
        ref = record.ref
        self.projects.setdefault(ref.project, ())
        if ref.domain not in self.projects[ref.project]:
            self.projects[ref.project] = (*self.projects[ref.project], ref.domain)
        row = _Row(record, list(attempts), ARCHIVED if archived else ACTIVE, dict(inputs or {}))
        with self._lock:
            self._rows.append(row)
            self._by_ref[ref] = row

    def fail(
        self, rpc: str, cause: str = "UNAVAILABLE: failed to connect", target: str = ""
    ) -> None:
        """Every call of `rpc` on a target starting with `target` fails with `cause`."""
        self.failing[rpc] = (target, cause)

    def _call(self, rpc: str, target: str) -> None:
        with self._lock:
            self.calls[rpc] += 1
        prefix, cause = self.failing.get(rpc, (None, ""))
        if prefix is not None and target.startswith(prefix):
            raise SourceError("admin", f"{rpc}: {cause}", target=target)

    def _row(self, rpc: str, ref: ExecutionRef) -> _Row:
        self._call(rpc, str(ref))
        row = self._by_ref.get(ref)
        if row is None:
            raise NotFoundError("admin", f"{rpc}: NOT_FOUND: entry not found", target=str(ref))
        return row

    def close(self) -> None:
        pass

    # reads
    def project_domains(self) -> dict[str, tuple[str, ...]]:
        self._call("ListProjects", "projects")
        return dict(self.projects)

    def list_executions(
        self,
        project: str,
        domain: str,
        *,
        filters: str | Sequence[Any] | None = None,
        sort_by: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[ExecutionRecord]:
        for page in self.list_execution_pages(
            project, domain, filters=filters, sort_by=sort_by, page_size=page_size
        ):
            yield from page

    def list_execution_pages(
        self,
        project: str,
        domain: str,
        *,
        filters: str | Sequence[Any] | None = None,
        sort_by: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[list[ExecutionRecord]]:
        text = join_filters(filters)
        try:
            predicates = parse_filters(text, EXECUTION, _COLUMNS) if text else []
        except Abort as e:
            raise SourceError("admin", f"ListExecutions: {e.code.name}: {e.details}") from None
        if "state" not in text:  # flyteadmin's addStateFilter
            predicates.append(lambda r: r.state == ACTIVE)
        limit = page_size or self.page_size
        offset, seen = 0, set()
        while True:
            self._call("ListExecutions", f"{project}/{domain}")
            with self._lock:  # each page is a query of its own: rows added meanwhile shift it
                rows = [
                    r
                    for r in self._rows
                    if r.record.ref.project == project
                    and r.record.ref.domain == domain
                    and all(p(r) for p in predicates)
                ]
            page = rows[offset : offset + limit]
            fresh = []
            for r in page:
                if r.record.ref not in seen:
                    seen.add(r.record.ref)
                    fresh.append(r.record)
            yield fresh
            if len(page) < limit:
                return
            offset += limit

    def get_execution(self, ref: ExecutionRef) -> ExecutionRecord:
        return self._row("GetExecution", ref).record

    def list_attempts(self, ref: ExecutionRef) -> list[AttemptRecord]:
        row = self._row("ListNodeExecutions", ref)
        return list(row.attempts)

    def sweep_attempts(self, ex: ExecutionRecord) -> SweptAttempts:
        row = self._row("ListNodeExecutions", ex.ref)
        listed: list[AttemptRecord] = []
        skipped: list[SkippedNode] = []
        for node_id, attempts in _by_node(row.attempts):
            if any(a.is_elastic for a in attempts):
                self._call("ListTaskExecutions", f"{ex.ref}/{node_id}")
                listed.extend(attempts)
            else:
                skipped.append(SkippedNode(_node(node_id), attempts[0].parent_node))
        return SweptAttempts(listed, tuple(skipped), True)

    def node_attempts(self, ref: ExecutionRef, nodes: Sequence[SkippedNode]) -> list[AttemptRecord]:
        row = self._by_ref[ref]
        out: list[AttemptRecord] = []
        for n in nodes:
            self._call("ListTaskExecutions", f"{ref}/{n.node_id}")
            out.extend(a for a in row.attempts if a.ref.node_id == n.node_id)
        return out

    def with_node(self, att: AttemptRecord) -> AttemptRecord:
        if att.node_read:
            return att
        self._row("GetNodeExecution", att.ref.execution)
        return replace(att, node_read=True)

    def get_inputs(self, ref: ExecutionRef) -> dict[str, str]:
        return dict(self._row("GetExecutionData", ref).inputs)

    def get_node_inputs(
        self, ref: AttemptRef, *, array_node: str | None = None, array_index: int | None = None
    ) -> dict[str, str]:
        return dict(self._row("GetNodeExecutionData", ref.execution).inputs)

    def task_resources(self, task_id: tuple[str, str, str, str]) -> Any:
        self._call("GetTask", ":".join(task_id))
        if task_id not in self.tasks:
            raise NotFoundError("admin", "GetTask: NOT_FOUND", target=":".join(task_id))
        return self.tasks[task_id]

    task_facts = task_resources

    def workflow_facts(self, launch_plan: tuple[str, str, str, str]) -> Any:
        self._call("GetLaunchPlan", ":".join(launch_plan))
        if launch_plan not in self.workflows:
            raise NotFoundError("admin", "GetLaunchPlan: NOT_FOUND", target=":".join(launch_plan))
        return self.workflows[launch_plan]

    def launch_plan_versions(self, project: str, domain: str, name: str) -> list[str]:
        self._call("ListLaunchPlans", f"{project}:{domain}:{name}")
        lps = [r.record.launch_plan for r in self._rows if r.record.launch_plan]
        return list(
            dict.fromkeys(lp[3] for lp in reversed(lps) if lp[:3] == (project, domain, name))
        )

    def reruns_of(self, project: str, domain: str, since: datetime) -> Reruns:
        return reruns_from(self.list_executions(project, domain, filters=rerun_filters(since)))

    def relaunches_of(
        self, project: str, domain: str, since: datetime
    ) -> dict[ExecutionRef, ExecutionRef]:
        return self.reruns_of(project, domain, since).relaunches

    # `relaunch --only-lost`: the graph, the recorded data, single-task executions
    def workflow_graph(self, workflow: tuple[str, str, str, str]) -> WorkflowGraph:
        self._call("GetWorkflow", ":".join(workflow))
        if workflow not in self.graphs:
            raise NotFoundError("admin", "GetWorkflow: NOT_FOUND", target=":".join(workflow))
        return self.graphs[workflow]

    def node_data(self, ref: ExecutionRef, node_id: str) -> NodeData:
        self._call("GetNodeExecutionData", f"{ref}/{node_id}")
        if (ref, node_id) not in self.node_io:
            raise NotFoundError("admin", "GetNodeExecutionData: NOT_FOUND", target=str(ref))
        return self.node_io[(ref, node_id)]

    def execution_outputs(self, ref: ExecutionRef) -> Literals:
        self._row("GetExecutionData", ref)
        return self.outputs.get(ref, Literals({}, {}))

    def rerun(self, request: RerunRequest) -> ExecutionRef:
        """A single-task CreateExecution: a new execution (mode MANUAL, the original as its
        reference, the task as its launch plan) QUEUED until `finish`. `lose_response` makes the
        next one be created and its answer lost, as the real client's retry then reports."""
        ref = request.original
        self._call("CreateExecution", str(ref))
        new = ExecutionRef(ref.project, ref.domain, request.name)
        with self._lock:
            existing = self._by_ref.get(new)
            lost, self.lose_response = self.lose_response, False
        if existing is not None:
            rec = existing.record
            if rec.reference_execution == ref and rec.launch_plan == request.task:
                raise AlreadyRelaunched(new, original=ref, after_retry=False)
            raise SourceError("admin", "CreateExecution: ALREADY_EXISTS", target=str(ref))
        now = datetime.now(UTC)
        record = ExecutionRecord(
            new, "QUEUED", now, now, "MANUAL", ref, launch_plan=request.task, workflow=None
        )
        with self._lock:
            if new in self._by_ref:  # another thread created it between the check and here
                raise AlreadyRelaunched(new, original=ref, after_retry=False)
            self.reruns.append(request)
        self.add(record)
        if lost:
            self._call("CreateExecution", str(ref))  # the retry, answered ALREADY_EXISTS
            raise AlreadyRelaunched(new, original=ref, after_retry=True)
        return new

    def finish(
        self, ref: ExecutionRef, phase: str = "SUCCEEDED", outputs: dict[str, str] | None = None
    ) -> None:
        """The execution ends in `phase` with `outputs` (name -> text, served as literals)."""
        row = self._by_ref[ref]
        row.record = replace(row.record, phase=phase)
        if outputs is not None:
            self.outputs[ref] = literals(outputs)

    # the one write
    def relaunch(
        self, ref: ExecutionRef, *, name: str, overwrite_cache: bool = True
    ) -> ExecutionRef:
        original = self._row("RelaunchExecution", ref).record
        new = ExecutionRef(ref.project, ref.domain, name)
        existing = self._by_ref.get(new)
        if existing is not None:
            if existing.record.mode == "RELAUNCH" and existing.record.reference_execution == ref:
                raise AlreadyRelaunched(new, original=ref, after_retry=False)
            raise SourceError("admin", "RelaunchExecution: ALREADY_EXISTS", target=str(ref))
        now = datetime.now(UTC)
        self.add(
            replace(
                original,
                ref=new,
                phase="QUEUED",
                created_at=now,
                updated_at=now,
                mode="RELAUNCH",
                reference_execution=ref,
            )
        )
        return new

    def version_request(self, ref: ExecutionRef, **kw: Any) -> Any:
        raise NotFoundError("admin", "GetLaunchPlan: NOT_FOUND", target=str(ref))

    def create_relaunch(self, ref: ExecutionRef, request: Any) -> ExecutionRef:
        raise SourceError("admin", "CreateExecution: not served by the fake", target=str(ref))


def literals(values: dict[str, str]) -> Literals:
    """Literals as Admin would serve them: each value's bytes stand for its serialized form."""
    return Literals({k: v.encode() for k, v in values.items()}, dict(values))


def _by_node(attempts: list[AttemptRecord]) -> list[tuple[str, list[AttemptRecord]]]:
    nodes: dict[str, list[AttemptRecord]] = {}
    for a in attempts:
        nodes.setdefault(a.ref.node_id, []).append(a)
    return list(nodes.items())


def _node(node_id: str) -> NodeRecord:
    """A passed-over task node as the sweep records it."""
    return NodeRecord(node_id, node_id, "", "", "SUCCEEDED", False, False, False, False, True)


# -- the object store ------------------------------------------------------------------------


class FakeStore:
    """S3 holding objects (URI -> LastModified); `fail(prefix, cause)` makes every request
    under `prefix` fail as an unreachable bucket does."""

    endpoint = "https://fake-s3"

    def __init__(self) -> None:
        self.objects: dict[str, datetime] = {}
        self.failing: dict[str, str] = {}
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def put(self, uri: str, at: datetime | None = None) -> None:
        self.objects[uri] = at or datetime(2026, 1, 1, tzinfo=UTC)

    def fail(self, prefix: str, cause: str = "HTTP 503 SlowDown") -> None:
        self.failing[prefix] = cause

    def _call(self, op: str, uri: str) -> str | None:
        with self._lock:
            self.calls[op] += 1
        return next((c for p, c in self.failing.items() if uri.startswith(p)), None)

    def _head(self, uri: str) -> ObjectCheck:
        cause = self._call("HeadObject", uri)
        if cause is not None:
            return ObjectCheck("unknown", cause)
        return ObjectCheck("present" if uri in self.objects else "missing")

    def judged(
        self, outputs: ObjectCheck, inputs_uri: str | None, witness: ObjectCheck | None = None
    ) -> ObjectCheck:
        if outputs.state != "missing" or inputs_uri is None:
            return outputs
        judged = judge_outputs(outputs, witness or self._head(inputs_uri), inputs_uri)
        if judged.expired:
            why = "no lifecycle rule of the bucket expires it: it was deleted"
            judged = ObjectCheck(judged.state, f"{judged.reason}; {why}", expired=True)
        return judged

    def outputs_check(self, output_dir: str, inputs_uri: str | None = None) -> ObjectCheck:
        if not output_dir.endswith("/"):
            output_dir += "/"
        return self.judged(self._head(output_dir + OUTPUTS_FILE), inputs_uri)

    def list_from(
        self, bucket: str, prefix: str, start_after: str, max_keys: int = 1000
    ) -> KeyPage | ObjectCheck:
        root = f"s3://{bucket}/"
        cause = self._call("ListObjectsV2", root + prefix)
        if cause is not None:
            return ObjectCheck("unknown", cause)
        keys = sorted(
            k[len(root) :]
            for k in self.objects
            if k.startswith(root + prefix) and k[len(root) :] > start_after
        )
        page = keys[:max_keys]
        return KeyPage(
            start_after, frozenset(page), page[-1] if len(keys) > max_keys else None, prefix
        )

    def list_prefix(self, uri: str) -> PrefixListing:
        prefix = uri if uri.endswith("/") else uri + "/"
        cause = self._call("ListObjectsV2", prefix)
        if cause is not None:
            return PrefixListing(prefix, "unknown", reason=cause)
        times = [t for k, t in self.objects.items() if k.startswith(prefix)]
        if not times:
            return PrefixListing(prefix, "empty")
        return PrefixListing(prefix, "present", objects=len(times), latest=max(times))


# -- all three -------------------------------------------------------------------------------


def fake_sources(
    settings: Settings | None = None,
    *,
    loki: FakeLoki | None = None,
    admin: FakeAdmin | None = None,
    store: FakeStore | None = None,
) -> Sources:
    """`Sources` over the three fakes (fresh ones unless given)."""
    return Sources(
        settings or Settings(workers=4),
        loki or FakeLoki(),
        admin or FakeAdmin(),
        store or FakeStore(),
    )


# -- records as Admin returns them -------------------------------------------------------------

T0 = datetime(2026, 9, 10, 12, 0, tzinfo=UTC)  # a time inside WINDOW
WINDOW = Window(datetime(2026, 9, 10, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))


def execution(
    name: str,
    *,
    project: str = "gs1",
    domain: str = "production",
    phase: str = "SUCCEEDED",
    created: datetime = T0 - timedelta(hours=2),
    updated: datetime | None = T0 + timedelta(minutes=1),
    mode: str = "MANUAL",
    reference: ExecutionRef | None = None,
    launch_plan: tuple[str, str, str, str] | None = None,
) -> ExecutionRecord:
    return ExecutionRecord(
        ExecutionRef(project, domain, name),
        phase,
        created,
        updated,
        mode,
        reference,
        launch_plan=launch_plan or (project, domain, "train", "v1"),
        workflow=(project, domain, "train", "v1"),
    )


def attempt(
    ex: ExecutionRecord,
    node: str = "n0",
    n: int = 0,
    *,
    phase: str = "SUCCEEDED",
    ended: datetime | None = T0,
    task_type: str = "pytorch",
    version: int | None = 0,
    declared: bool = False,
) -> AttemptRecord:
    """An attempt of `ex` whose pod is Flyte's `<execution>-<node>-<attempt>` in the project's
    namespace, its outputs under `s3://meta/<execution>/<node>/<attempt>/`."""
    ref = ex.ref
    data = f"s3://meta/{ref.name}/{node}/"
    return AttemptRecord(
        ref=AttemptRef(ref, node, n),
        phase=phase,
        task_type=task_type,
        task_type_version=version,
        is_array=False,
        started_at=(ended or T0) - timedelta(hours=1),
        ended_at=ended,
        output_dir=f"{data}{n}/",
        pods=(f"{ref.name}-{node}-{n}",),
        namespace=f"{ref.project}-{ref.domain}",
        checkpoint_uri=None,
        node_phase=phase,
        task_id=(ref.project, ref.domain, "train.step", "v1"),
        outputs_declared=declared,
        inputs_uri=f"{data}inputs.pb",
        end_from="duration",
    )


def signal_line(at: datetime, pid: int = 7) -> str:
    """torch's elastic agent logging the SIGTERM it got (glog format)."""
    return (
        f"W{at:%m%d} {at:%H:%M:%S.%f} {pid} torch/distributed/elastic/agent/server/api.py:753] "
        "Received 15 death signal, shutting down workers"
    )


def pod_labels(att: AttemptRecord, container: str = "train") -> dict[str, str]:
    return {"namespace": att.namespace or "", "pod": att.pods[0], "container": container}


def wrote_outputs(store: FakeStore, att: AttemptRecord, outputs: bool) -> None:
    """The node's inputs.pb (propeller writes it before the node runs) and, if `outputs`, the
    attempt's outputs.pb."""
    assert att.inputs_uri is not None and att.output_dir is not None
    store.put(att.inputs_uri)
    if outputs:
        store.put(att.output_dir + OUTPUTS_FILE)


SIG_AT = T0 - timedelta(seconds=7)  # the incident's SIGTERM, seven seconds before its success


def signalled(loki: FakeLoki, att: AttemptRecord, at: datetime = SIG_AT) -> None:
    """The attempt's pod logging torch's SIGTERM line at `at`."""
    loki.push(pod_labels(att), at, signal_line(at))


def silent_green(sources: Sources, name: str = "azvg5f9v9974m78fvlf7") -> AttemptRecord:
    """An elastic success whose pod logged SIGTERM before it ended and wrote no outputs.pb:
    affected."""
    ex = execution(name)
    att = attempt(ex)
    sources.admin.add(ex, [att])  # type: ignore[attr-defined]
    signalled(sources.loki, att)  # type: ignore[arg-type]
    wrote_outputs(sources.store, att, outputs=False)  # type: ignore[arg-type]
    return att


def healthy(sources: Sources, name: str = "k5l9z3x7c1v5b9n3m7q1") -> AttemptRecord:
    """An elastic success that wrote its outputs.pb: cleared."""
    ex = execution(name)
    att = attempt(ex)
    sources.admin.add(ex, [att])  # type: ignore[attr-defined]
    wrote_outputs(sources.store, att, outputs=True)  # type: ignore[arg-type]
    return att
