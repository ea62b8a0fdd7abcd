"""The domain's plain data: frozen dataclasses passed between sources, detection and formats.

One module on purpose: every type of the report and of its evidence
reads in one place, each a few lines, as docs/report.md describes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from enum import Enum

from forensics.failures import FailureKind

UTC = timezone.utc


def rfc3339(t: datetime | None) -> str | None:
    """RFC 3339 in UTC with a `Z` (never `+00:00`: flyteadmin splits filters on `+`)."""
    if t is None:
        return None
    t = t.astimezone(UTC)
    if t.microsecond:
        return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def from_ns(ns: int) -> datetime:
    """A datetime (UTC, microsecond precision) from nanoseconds since the epoch."""
    return datetime.fromtimestamp(ns // 1000 / 1_000_000, tz=UTC)


def to_ns(t: datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime, exactly (no float rounding)."""
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


@dataclass(frozen=True, order=True, slots=True)
class ExecutionRef:
    """One Flyte workflow execution, `project:domain:name`."""

    project: str
    domain: str
    name: str

    def __str__(self) -> str:
        return f"{self.project}:{self.domain}:{self.name}"

    def as_dict(self) -> dict[str, str]:
        return {"project": self.project, "domain": self.domain, "name": self.name}


@dataclass(frozen=True, order=True, slots=True)
class AttemptRef:
    """One task attempt: execution, Admin's unique node id (`n0`, `n0-0-dn1`), retry attempt."""

    execution: ExecutionRef
    node_id: str
    attempt: int

    def __str__(self) -> str:
        return f"{self.execution}/{self.node_id}/{self.attempt}"


@dataclass(frozen=True)
class Window:
    """A half-open time range `[start, end)` in UTC."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("Window times must be timezone-aware")

    def __contains__(self, t: datetime) -> bool:
        return self.start <= t < self.end

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    def split(self, size: timedelta) -> list[Window]:
        """Consecutive non-overlapping shards of at most `size`, covering the window exactly."""
        if size <= timedelta(0):
            raise ValueError("shard size must be positive")
        shards: list[Window] = []
        t = self.start
        while t < self.end:
            nxt = min(t + size, self.end)
            shards.append(Window(t, nxt))
            t = nxt
        return shards

    def as_dict(self) -> dict[str, str | None]:
        return {"start": rfc3339(self.start), "end": rfc3339(self.end)}


@dataclass(frozen=True)
class LogEntry:
    """One log line as Loki returned it: nanosecond timestamp, stream labels, the line."""

    ts_ns: int
    labels: tuple[tuple[str, str], ...]
    line: str

    @property
    def at(self) -> datetime:
        return from_ns(self.ts_ns)

    def label(self, name: str) -> str | None:
        for k, v in self.labels:
            if k == name:
                return v
        return None

    @staticmethod
    def make(ts_ns: int, labels: Mapping[str, str], line: str) -> LogEntry:
        return LogEntry(ts_ns, tuple(sorted(labels.items())), line)


@dataclass(frozen=True)
class Gap:
    """A part of the window that a source could not read; the scan is incomplete there.

    `kind`: `failed` (the source failed to answer for it) or `logs_absent` (Loki answered, but
    holds no log of the task pods there although Flyte Admin shows attempts ran: retention,
    max_query_lookback, a shipper outage or a selector that matches nothing; docs/report.md).
    `failure`: what the failure means, as the source's client mapped it (not in the report: the
    CLI's likely-cause line reads it).
    """

    source: str
    start: datetime | None
    end: datetime | None
    error: str
    kind: str = "failed"
    failure: FailureKind | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, str | None]:
        return {
            "source": self.source,
            "kind": self.kind,
            "start": rfc3339(self.start),
            "end": rfc3339(self.end),
            "error": self.error,
        }


@dataclass(frozen=True)
class FailedPart:
    """A part of a read that failed: its time range, why, and what the failure means."""

    start: datetime
    end: datetime
    error: str
    failure: FailureKind | None = None


@dataclass(frozen=True)
class ShardRead:
    """How one time shard of a log read ended: read completely (`failed` empty) or not, with
    the parts that could not be read (the whole shard, or pieces of a shard read in halves)."""

    window: Window
    requests: int
    entries: int
    failed: tuple[FailedPart, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def error(self) -> str | None:
        """The first failed part's error (None when the shard was read)."""
        return self.failed[0].error if self.failed else None


@dataclass(frozen=True, slots=True)
class SignalHit:
    """Evidence that a pod's elastic agent received a death signal (parsed from one log line)."""

    signal: str  # "SIGTERM"
    number: int  # 15
    at: datetime
    namespace: str
    pod: str
    container: str | None
    kind: str  # "agent" | "exit_barrier" | "flytekit"
    line: str
    # Where `at` comes from (docs/report.md `signal.at_source`): the line's own time — "cri" (the
    # container runtime's prefix), "glog" (torch's glog prefix), "logging" (a Python logging
    # prefix) — or "loki", the entry's timestamp (what the shipper pushed) when the line has none.
    at_source: str = "loki"
    # Loki's timestamp for the entry (None: same as `at`): which window's query read the line,
    # so that a window boundary between the two times neither drops nor repeats it.
    loki_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Disruption:
    """Kubernetes' own record that a pod was disrupted (docs/report.md `disruption`): an event
    naming the pod (Loki, Admin's `reasons`) or its `DisruptionTarget` condition (Prometheus)."""

    source: str  # "k8s-events" | "admin-reasons" | "prometheus"
    reason: str  # the event's reason ("Preempted", "Disrupted", ...) or the condition's
    initiator: str | None  # who disrupted it: "karpenter", "default-scheduler", "kubelet", ...
    at: datetime
    namespace: str | None
    pod: str | None
    text: str  # the event's own message, as recorded
    # `at` is the last of several occurrences (Alloy stamps an aggregated event, count > 1, with
    # its lastTimestamp): the first is unknown, so it cannot place the disruption after an end.
    last_only: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "reason": self.reason,
            "initiator": self.initiator,
            "at": rfc3339(self.at),
            "namespace": self.namespace,
            "pod": self.pod,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One task attempt as Flyte Admin records it (plain data, no protobuf)."""

    ref: AttemptRef
    phase: str  # TaskExecution.Phase name: "SUCCEEDED", "FAILED", "RETRYABLE_FAILED", ...
    task_type: str  # "python-task", "pytorch", ...
    task_type_version: int | None
    is_array: bool
    started_at: datetime | None
    ended_at: datetime | None  # started_at + duration; the attempt's end as Admin records it
    output_dir: (
        str | None
    )  # `<node data dir>/<attempt>/`, ends with "/": outputs.pb, error.pb live here
    pods: tuple[str, ...]  # generated name and any log_context pod names
    namespace: str | None
    checkpoint_uri: str | None  # node's task_node_metadata.checkpoint_uri
    node_phase: str | None = None  # the node execution's phase
    task_id: tuple[str, str, str, str] | None = None  # project, domain, name, version
    # The task's interface declares outputs (False when unknown): propeller then fails any success
    # whose outputs.pb is missing ("OutputsNotFound"), so this attempt cannot be a silent one.
    outputs_declared: bool = False
    # Why Admin's record gives no way to check this attempt's own outputs.pb (e.g. an output_uri
    # that flyteadmin offloaded under propeller's inline raw-output policy): outputs `unknown`.
    outputs_unknown: str | None = None
    # A subtask of an array (map) node: the array node's Admin id and the subtask's index. The
    # subtask's own `ref.node_id` is propeller's unique id for it (`n0-0-n3`, GenerateUniqueID).
    array_node: str | None = None
    array_index: int | None = None
    # Kubernetes events about the attempt's pod that Admin keeps in `closure.reasons`
    # (propeller's `send-object-events`): the disruptions among them (docs/report.md `disruption`).
    disruptions: tuple[Disruption, ...] = ()
    # `<node data dir>/inputs.pb`, which propeller writes before the node runs: the witness that
    # tells an expired node folder from outputs never written (`expiry.judge_outputs`).
    inputs_uri: str | None = None
    # Which Admin field `ended_at` comes from (docs/verdicts.md, "The attempt's end"): "duration"
    # (started_at + duration) or "updated_at" — the terminal event's report time, for an attempt
    # propeller never saw RUNNING (flyteadmin sets StartedAt and Duration only from a RUNNING
    # event, `pkg/repositories/transformers/task_execution.go`); None while it has not ended.
    end_from: str | None = None
    # A nested node: its parent's unique id and its own spec id (`metadata.spec_node_id`), so a
    # trial of a retried dynamic parent can be told from its re-run (`detect.rerun_of`).
    parent_node: str | None = None
    spec_node_id: str | None = None
    # False: listed without its node execution (the sweep's direct listing, docs/performance.md):
    # `checkpoint_uri` and `node_phase` are not read; GetNodeExecution reads them when needed.
    node_read: bool = True

    @property
    def is_elastic(self) -> bool:
        """`pytorch`, or `python-task` with task_type_version 1 outside an array node."""
        return elastic_task(self.task_type, self.task_type_version) and not (
            self.is_array and self.task_type != "pytorch"
        )


def elastic_task(task_type: str, task_type_version: int | None) -> bool:
    """Whether a task template of this type and version runs torch elastic: `pytorch`, or a
    `python-task` of task_type_version 1 (flytekitplugins-kfpytorch's single-node Elastic)."""
    return task_type == "pytorch" or (task_type == "python-task" and task_type_version == 1)


@dataclass(frozen=True, slots=True)
class ParentNode:
    """The node of a parent execution that launched a child execution (a launch-plan node)."""

    execution: ExecutionRef
    node_id: str

    def __str__(self) -> str:
        return f"{self.execution} node {self.node_id}"

    def as_dict(self) -> dict[str, object]:
        return {"execution": self.execution.as_dict(), "node_id": self.node_id}


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """One workflow execution as Flyte Admin records it (plain data, no protobuf)."""

    ref: ExecutionRef
    phase: str  # WorkflowExecution.Phase name
    created_at: datetime | None
    updated_at: datetime | None
    mode: str  # "MANUAL", "SCHEDULED", "SYSTEM", "RELAUNCH", "CHILD_WORKFLOW", "RECOVERED"
    reference_execution: ExecutionRef | None
    labels: Mapping[str, str] = field(default_factory=dict)
    # `spec.metadata.parent_node_execution` of a child execution (mode CHILD_WORKFLOW): relaunching
    # the child alone does not re-run what the parent did after that node (docs/verdicts.md).
    parent: ParentNode | None = None
    # spec.launch_plan: (project, domain, name, version) of the launch plan it ran.
    launch_plan: tuple[str, str, str, str] | None = None
    # closure.workflow_id: (project, domain, name, version) of the workflow it runs (flyteadmin
    # `transformers/execution.go::CreateExecutionModel` sets it); None when Admin left it empty.
    workflow: tuple[str, str, str, str] | None = None

    @property
    def running(self) -> bool:
        """Not in a terminal phase yet (flyteadmin's terminal phases, `common/executions.go`)."""
        return self.phase not in TERMINAL_EXECUTION_PHASES


TERMINAL_EXECUTION_PHASES = frozenset({"SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"})


@dataclass(frozen=True, slots=True)
class ObjectCheck:
    """Whether one object exists: `present`, `missing` or `unknown` (with the reason and what
    the failure means)."""

    state: str
    reason: str | None = None
    # An `unknown` outputs.pb whose node folder has expired (its inputs.pb, written before the
    # node ran, is gone too): written or never, S3 can no longer tell (docs/verdicts.md).
    expired: bool = False
    failure: FailureKind | None = field(default=None, compare=False)


# A listing page's answers, shared (a check is immutable): one per key of 20,000 otherwise.
_PRESENT = ObjectCheck("present")
_MISSING = ObjectCheck("missing")


@dataclass(frozen=True, slots=True)
class KeyPage:
    """One ListObjectsV2 page of a bucket: the keys under `prefix` after `start_after`.

    The page covers the keys from `start_after` (excluded) to `last` (included), or to the end of
    the prefix when `last` is None (the listing was complete): any key in that range the page
    does not hold does not exist.
    """

    start_after: str
    keys: frozenset[str]
    last: str | None  # the page's last key when the listing goes on; None: it reached the end
    prefix: str = ""

    def covers(self, key: str) -> bool:
        """Whether `key` lies in the range this page answers for."""
        return (
            key > self.start_after
            and key.startswith(self.prefix)
            and (self.last is None or key <= self.last)
        )

    def check(self, key: str) -> ObjectCheck:
        """`present` or `missing` for a key the page `covers`."""
        return _PRESENT if key in self.keys else _MISSING


@dataclass(frozen=True)
class PrefixListing:
    """What lies under an object-store prefix: count and newest LastModified, or why unknown."""

    uri: str
    state: str  # "empty" | "present" | "unknown"
    objects: int = 0
    latest: datetime | None = None
    reason: str | None = None
    failure: FailureKind | None = field(default=None, compare=False)  # what an unknown means


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint location of a finding and what a relaunch will find there."""

    uri: str | None
    state: str  # "empty" | "present" | "unknown"
    objects: int = 0
    latest: datetime | None = None
    reason: str | None = None
    source: str | None = None  # "input:<name>" | "template" | "flyte-checkpoint"
    written_after_signal: bool | None = None
    failure: FailureKind | None = field(default=None, compare=False)  # what an unknown means

    def as_dict(self) -> dict[str, object]:
        return {
            "uri": self.uri,
            "state": self.state,
            "objects": self.objects,
            "latest": rfc3339(self.latest),
            "reason": self.reason,
            "source": self.source,
            "written_after_signal": self.written_after_signal,
        }


@dataclass(frozen=True)
class Cost:
    """What one finding cost (docs/report.md `cost`): the attempt's run time times the GPUs and
    CPUs its task template requests, and the age of the newest checkpoint at the signal.

    A number the template does not give is None, and `unknown` says why; `source` says where
    the numbers come from (`forensics/cost.py`).
    """

    run_seconds: float | None
    pods: int | None
    gpus_per_pod: float | None
    cpus_per_pod: float | None
    accelerator: str | None
    gpu_hours: float | None
    cpu_hours: float | None
    checkpoint_age_seconds: float | None
    source: str | None
    unknown: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "run_seconds": self.run_seconds,
            "pods": self.pods,
            "gpus_per_pod": self.gpus_per_pod,
            "cpus_per_pod": self.cpus_per_pod,
            "accelerator": self.accelerator,
            "gpu_hours": self.gpu_hours,
            "cpu_hours": self.cpu_hours,
            "checkpoint_age_seconds": self.checkpoint_age_seconds,
            "source": self.source,
            "unknown": list(self.unknown),
        }


@dataclass(frozen=True)
class Finding:
    """One affected or suspected task attempt, with everything the report says about it."""

    attempt: AttemptRef
    verdict: str  # "affected" | "suspected"
    execution_phase: str
    signal: SignalHit | None
    succeeded_at: datetime | None
    outputs_written: bool | None  # None: unknown (no readable location of the attempt's own)
    checkpoint: Checkpoint
    relaunched_as: ExecutionRef | None = None
    links: Mapping[str, str] = field(default_factory=dict)
    evidence: tuple[
        str, ...
    ] = ()  # docs/report.md `evidence`: why the finding is weaker, late signals
    parent: ParentNode | None = None  # the parent execution's node, for a child execution
    cost: Cost | None = None  # None: not priced (docs/report.md `cost`)
    # Kubernetes' record of the disruption (docs/report.md `disruption`), and what made the
    # success silent (docs/verdicts.md "Causes").
    disruption: Disruption | None = None
    cause: str | None = None
    # Guard runs only (docs/report.md `new`): True when no earlier run reported it; None: not
    # a guard run, and the key is not in the JSON.
    new: bool | None = None
    # RECOVERED executions of this one (docs/report.md `recovered_as`): copies of the false
    # success, never the repair; the key is in the JSON only when there is one.
    recovered_as: tuple[ExecutionRef, ...] = ()

    def as_dict(self) -> dict[str, object]:
        sig = signal_dict(self.signal) if self.signal is not None else None
        doc: dict[str, object] = {
            "execution": self.attempt.execution.as_dict(),
            "node_id": self.attempt.node_id,
            "attempt": self.attempt.attempt,
            "verdict": self.verdict,
            "execution_phase": self.execution_phase,
            "signal": sig,
            "succeeded_at": rfc3339(self.succeeded_at),
            "outputs_written": self.outputs_written,
            "checkpoint": self.checkpoint.as_dict(),
            "relaunched_as": self.relaunched_as.as_dict() if self.relaunched_as else None,
            "parent": self.parent.as_dict() if self.parent else None,
            "links": dict(self.links),
            "notes": list(self.evidence),
            "cost": self.cost.as_dict() if self.cost else None,
            "disruption": self.disruption.as_dict() if self.disruption else None,
            "cause": self.cause,
        }
        if self.new is not None:
            doc["new"] = self.new
        if self.recovered_as:
            doc["recovered_as"] = [r.as_dict() for r in self.recovered_as]
        return doc


# What a RECOVERED execution of an affected original is (docs/verdicts.md, "Never recover").
RECOVERED_NOTE = (
    "RecoverExecution copied the false success (the lost node's outputs became an empty "
    "outputs.pb, and the nodes after it ran on nothing); it is not a repair"
)


def recovered_note(ref: ExecutionRef) -> str:
    """The note a finding (and a relaunch plan) carries for one RECOVERED copy."""
    return f"recovered as {ref}: {RECOVERED_NOTE}"


def signal_dict(hit: SignalHit) -> dict[str, object]:
    """A death signal as the report shows it (docs/report.md `signal`)."""
    return {
        "name": hit.signal,
        "number": hit.number,
        "at": rfc3339(hit.at),
        "at_source": hit.at_source,
        "namespace": hit.namespace,
        "pod": hit.pod,
    }


@dataclass(frozen=True)
class Pending:
    """A signalled attempt that has not finished yet (docs/report.md `pending`): rescan once it ends."""

    attempt: AttemptRef
    phase: str
    signal: SignalHit

    def as_dict(self) -> dict[str, object]:
        return {
            "execution": self.attempt.execution.as_dict(),
            "node_id": self.attempt.node_id,
            "attempt": self.attempt.attempt,
            "phase": self.phase,
            "signal": signal_dict(self.signal),
        }


@dataclass(frozen=True)
class Superseded:
    """A trial of a retried dynamic parent whose re-run under the parent's later attempt
    succeeded (docs/report.md `superseded`): cleared, and named with the attempt that re-ran it."""

    attempt: AttemptRef
    rerun: AttemptRef

    def as_dict(self) -> dict[str, object]:
        return {
            "execution": self.attempt.execution.as_dict(),
            "node_id": self.attempt.node_id,
            "attempt": self.attempt.attempt,
            "rerun": {"node_id": self.rerun.node_id, "attempt": self.rerun.attempt},
        }


@dataclass(frozen=True)
class Unresolved:
    """A signalled pod that is evidently Flyte's but resolves to no attempt: a configuration
    problem (namespace template, domains) the report shows instead of clearing it (docs/verdicts.md)."""

    signal: SignalHit
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "namespace": self.signal.namespace,
            "pod": self.signal.pod,
            "signal": signal_dict(self.signal),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class UnparsedLine:
    """A line Loki's death-signal filter matched that the parser could not read (an example)."""

    at: datetime
    labels: tuple[tuple[str, str], ...]
    line: str  # as Loki returned it, cut to MAX_CHARS

    MAX_CHARS = 500

    def as_dict(self) -> dict[str, object]:
        return {"at": rfc3339(self.at), "labels": dict(self.labels), "line": self.line}


@dataclass
class Summary:
    """Counts over every attempt examined; `cleared` says why each non-finding was cleared.

    `unparsed_lines` counts lines Loki matched as death signals that the parser could not read
    (an unknown shipper envelope, a stream without the configured pod label, ...), with the
    earliest as `unparsed_example`: shown, never dropped silently (docs/report.md `summary`).
    """

    attempts_examined: int = 0
    affected: int = 0
    suspected: int = 0
    not_affected: int = 0
    cleared: dict[str, int] = field(default_factory=dict)
    pending: int = 0  # signalled attempts not finished yet (in attempts_examined too)
    unparsed_lines: int = 0
    unparsed_example: UnparsedLine | None = None
    cost: Mapping[str, object] | None = None  # the findings' cost totals (`forensics/cost.py`)
    # findings per disruption reason ("none": no disruption evidence but the signal line or
    # the missing outputs.pb alone), docs/report.md `summary`
    by_disruption_reason: dict[str, int] = field(default_factory=dict)

    def clear(self, reason: str) -> None:
        """Count one attempt cleared for `reason` (a `detect.Cleared`, kept as its value)."""
        key = str(reason)
        self.not_affected += 1
        self.cleared[key] = self.cleared.get(key, 0) + 1

    def as_dict(self) -> dict[str, object]:
        return {
            "attempts_examined": self.attempts_examined,
            "affected": self.affected,
            "suspected": self.suspected,
            "not_affected": self.not_affected,
            "pending": self.pending,
            "cleared": dict(sorted(self.cleared.items())),
            "unparsed_lines": self.unparsed_lines,
            "unparsed_example": self.unparsed_example.as_dict() if self.unparsed_example else None,
            "cost": dict(self.cost) if self.cost is not None else None,
            "findings_by_disruption_reason": dict(sorted(self.by_disruption_reason.items())),
        }


@dataclass(frozen=True)
class Activity:
    """When the scan saw what, for the incident page's hourly chart and timelines; kept in
    memory only (the JSON report lists findings, not every signalled attempt)."""

    signals: Mapping[AttemptRef, datetime] = field(default_factory=dict)  # signalled attempts
    retried: tuple[datetime, ...] = ()  # ends of signalled attempts that failed and were retried


@dataclass(frozen=True)
class Scope:
    """Which projects and domains a report covers (docs/report.md `scope`; `--project`,
    `--domain`): empty means every project (every domain of each)."""

    projects: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()

    @property
    def narrowed(self) -> bool:
        return bool(self.projects or self.domains)

    def __str__(self) -> str:
        def part(names: tuple[str, ...], one: str, many: str, every: str) -> str:
            if not names:
                return every
            return f"{one if len(names) == 1 else many} {', '.join(names)}"

        return (
            part(self.projects, "project", "projects", "all projects")
            + "; "
            + part(self.domains, "domain", "domains", "all domains")
        )

    def as_dict(self) -> dict[str, list[str]]:
        return {"projects": list(self.projects), "domains": list(self.domains)}


@dataclass(frozen=True)
class Report:
    """The result of a scan (docs/report.md)."""

    tool: str
    window: Window
    gaps: tuple[Gap, ...]
    summary: Summary
    findings: tuple[Finding, ...]
    pending: tuple[Pending, ...] = ()
    unresolved: tuple[Unresolved, ...] = ()
    activity: Activity = field(default_factory=Activity)  # not in the JSON: the page's chart
    superseded: tuple[Superseded, ...] = ()
    # What the scan covered; None: a saved report written before the scope was recorded.
    scope: Scope | None = field(default_factory=Scope)

    @property
    def complete(self) -> bool:
        return not self.gaps

    def ordered(self) -> Report:
        """This report with every list in the report's one order (`order_findings`, `order_gaps`,
        ...): what the scan, `merge` and every format show."""
        return replace(
            self,
            gaps=tuple(order_gaps(self.gaps, self.window)),
            findings=tuple(order_findings(self.findings, self.window.end)),
            pending=tuple(order_pending(self.pending)),
            unresolved=tuple(order_unresolved(self.unresolved)),
            superseded=tuple(order_superseded(self.superseded)),
        )

    @property
    def to_act_on(self) -> bool:
        """Findings, pending attempts (signalled, not finished yet: rescan) or signalled Flyte
        pods that resolve to no attempt (a configuration problem)."""
        return bool(self.findings or self.pending or self.unresolved)

    @property
    def status(self) -> ReportStatus:
        """What this result means for whoever ran the scan (docs/exit-codes.md; the CLI's exit
        code is chosen from it, `cli/exits.py`)."""
        return report_status(complete=self.complete, to_act_on=self.to_act_on)

    def as_dict(self) -> dict[str, object]:
        return {
            "schema_version": 1,
            "tool": self.tool,
            "window": self.window.as_dict(),
            "scope": self.scope.as_dict() if self.scope is not None else None,
            "complete": self.complete,
            "gaps": [g.as_dict() for g in self.gaps],
            "summary": self.summary.as_dict(),
            "findings": [f.as_dict() for f in self.findings],
            "pending": [p.as_dict() for p in self.pending],
            "unresolved": [u.as_dict() for u in self.unresolved],
            "superseded": [s.as_dict() for s in self.superseded],
        }

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.findings)


# -- the report's one order (docs/report.md): the scan's report, `merge` and every format ------


def order_findings(findings: Iterable[Finding], end: datetime) -> list[Finding]:
    """By the signal's time, else the disruption's, else the attempt's end (`end`, the window's
    end, when it has none); then by attempt."""

    def key(f: Finding) -> tuple[datetime, str]:
        at = f.signal.at if f.signal else f.disruption.at if f.disruption else f.succeeded_at
        return (at or end, str(f.attempt))

    return sorted(findings, key=key)


def order_gaps(gaps: Iterable[Gap], window: Window) -> list[Gap]:
    """By source, then start and end (an open end is the window's), then error."""
    return sorted(
        gaps, key=lambda g: (g.source, g.start or window.start, g.end or window.end, g.error)
    )


def order_pending(pending: Iterable[Pending]) -> list[Pending]:
    """By the signal's time, then by attempt."""
    return sorted(pending, key=lambda p: (p.signal.at, str(p.attempt)))


def order_unresolved(unresolved: Iterable[Unresolved]) -> list[Unresolved]:
    """By the signal's time, then by pod."""
    return sorted(unresolved, key=lambda u: (u.signal.at, u.signal.pod))


def order_superseded(superseded: Iterable[Superseded]) -> list[Superseded]:
    """By attempt."""
    return sorted(superseded, key=lambda x: str(x.attempt))


class ReportStatus(str, Enum):
    """A scan's result in one word: `incomplete` (a source failed for part of the window) wins
    over `to-act-on` (findings, pending attempts or unresolved pods); else `clean`."""

    INCOMPLETE = "incomplete"
    TO_ACT_ON = "to-act-on"
    CLEAN = "clean"

    def __str__(self) -> str:
        return self.value


def report_status(*, complete: bool, to_act_on: bool) -> ReportStatus:
    """The status of a scan's result in any form (a `Report`, `merge`'s document)."""
    if not complete:
        return ReportStatus.INCOMPLETE
    return ReportStatus.TO_ACT_ON if to_act_on else ReportStatus.CLEAN
