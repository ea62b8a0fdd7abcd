"""The evidence timeline of one execution: pod lines, propeller lines, Admin phases, S3, verdicts.

The verdicts are the scan's own (`scan.examine`, which judges through `detect.decide`); this
module only gathers the events around them (docs/commands.md, "show EXECUTION").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import time as dtime

from forensics.detect import Cleared, Decision, Verdict, assert_never
from forensics.errors import FailureKind, SourceError
from forensics.evidence.envelopes import unwrap_runtime
from forensics.evidence.flyte_names import namespace_for
from forensics.evidence.logs import SIGNAL_LINE_REGEX, parse_propeller_line
from forensics.model import (
    RECOVERED_NOTE,
    UTC,
    AttemptRecord,
    Checkpoint,
    Disruption,
    ExecutionRecord,
    ExecutionRef,
    Gap,
    LogEntry,
    ObjectCheck,
    ShardRead,
    SignalHit,
    Window,
    recovered_note,
    rfc3339,
)
from forensics.scan.coverage import LOGS_ABSENT
from forensics.scan.examine import Examination, Examined, examine
from forensics.scan.resolve import owner_of
from forensics.scan.scope import pod_query
from forensics.scan.source_gaps import shard_gaps
from forensics.sources import Sources
from forensics.sources.logql import build_query, selector

# Pod lines worth showing: the death signal and what corroborates it.
POD_EVIDENCE_REGEX = (
    SIGNAL_LINE_REGEX
    + "|IgnoreOutputs received|Closing process [0-9]+ via signal|Elastic launch agent process"
)
MAX_LINE = 300


@dataclass(frozen=True)
class Event:
    """One line of the timeline."""

    at: datetime
    source: str  # "admin" | "pod" | "propeller" | "s3" | "k8s-events" | "admin-reasons"
    text: str
    attempt: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "at": rfc3339(self.at),
            "source": self.source,
            "attempt": self.attempt,
            "event": self.text,
        }


@dataclass(frozen=True)
class AttemptVerdict:
    """What the evidence says about one attempt of the execution."""

    attempt: AttemptRecord
    verdict: str  # "affected" | "suspected" | "not-affected" | "not-examined"
    reason: str | None
    signal: SignalHit | None
    outputs: ObjectCheck | None
    checkpoint: Checkpoint | None
    disruption: Disruption | None = None

    def as_dict(self) -> dict[str, object]:
        a = self.attempt
        return {
            "node_id": a.ref.node_id,
            "attempt": a.ref.attempt,
            "phase": a.phase,
            "task_type": a.task_type,
            "elastic": a.is_elastic,
            "pods": list(a.pods),
            "started_at": rfc3339(a.started_at),
            "ended_at": rfc3339(a.ended_at),
            "verdict": self.verdict,
            "reason": self.reason,
            "signal_at": rfc3339(self.signal.at) if self.signal else None,
            "outputs": self.outputs.state if self.outputs else None,
            "checkpoint": self.checkpoint.as_dict() if self.checkpoint else None,
            "disruption": self.disruption.as_dict() if self.disruption else None,
        }


@dataclass
class Timeline:
    """The execution, its events oldest first, a verdict per attempt, and coverage."""

    execution: ExecutionRecord
    events: list[Event] = field(default_factory=list)
    attempts: list[AttemptVerdict] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

    def add_gaps(self, gaps: list[Gap]) -> None:
        """Add the gaps not already listed: the signal, pod and propeller reads of one window
        fail alike when Loki does, and one failure is one gap."""
        self.gaps.extend(g for g in gaps if g not in self.gaps)

    @property
    def complete(self) -> bool:
        return not self.gaps

    @property
    def verdict(self) -> str:
        kinds = {a.verdict for a in self.attempts}
        for v in ("affected", "suspected", "not-affected"):
            if v in kinds:
                return v
        return "not-examined"

    def as_dict(self) -> dict[str, object]:
        ex = self.execution
        return {
            "execution": ex.ref.as_dict(),
            "phase": ex.phase,
            "created_at": rfc3339(ex.created_at),
            "updated_at": rfc3339(ex.updated_at),
            "verdict": self.verdict,
            "complete": self.complete,
            "gaps": [g.as_dict() for g in self.gaps],
            "attempts": [a.as_dict() for a in self.attempts],
            "timeline": [e.as_dict() for e in self.events],
        }


def _clip(line: str) -> str:
    line = line.replace("\n", " ").strip()
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def _tag(a: AttemptRecord) -> str:
    return f"{a.ref.node_id}/{a.ref.attempt}"


def build_timeline(
    sources: Sources, ref: ExecutionRef | str, *, now: datetime | None = None
) -> Timeline:
    """Gather every piece of evidence about one execution (NotFoundError if Admin has none).

    The verdicts are the scan's own (`examine`); the timeline reads the same window. `ref`: an
    ExecutionRef or a form the CLI takes (`project:domain:name`).
    """
    now = now or datetime.now(UTC)
    exam = examine(sources, ref, now=now)
    tl = Timeline(exam.execution)
    tl.add_gaps(exam.gaps)
    attempts = [e.attempt for e in exam.attempts]
    tl.events += _admin_events(exam.execution, attempts)
    tl.events += _pod_events(sources, exam, attempts, tl)
    tl.events += _propeller_events(sources, exam.execution.ref, exam.window, tl)
    tl.events += _disruption_events(exam)
    for e in exam.attempts:
        _judge(tl, e, now)
    tl.events += _recovery_events(sources, tl, now)
    tl.events.sort(key=lambda e: (e.at, e.source))
    return tl


def _recovery_events(sources: Sources, tl: Timeline, now: datetime) -> list[Event]:
    """RECOVERED copies (docs/verdicts.md, "Never recover"): this execution is one of an
    affected original, or an affected one was recovered. Said, never counted as the repair;
    an unanswered read leaves them unsaid (the verdicts do not rest on them)."""
    ex = tl.execution
    at = ex.created_at or now
    if ex.mode == "RECOVERED" and ex.reference_execution is not None:
        original = ex.reference_execution
        try:
            lying = [e for e in examine(sources, original, now=now).attempts if _found(e)]
        except SourceError:
            return []
        if not lying:
            return []
        nodes = ", ".join(dict.fromkeys(e.attempt.ref.node_id for e in lying))
        return [
            Event(
                at,
                "admin",
                f"a RECOVERED copy of {original}, whose node(s) {nodes} died silently green: "
                f"{RECOVERED_NOTE} (relaunch {original})",
            )
        ]
    if tl.verdict not in ("affected", "suspected") or ex.created_at is None:
        return []
    try:
        copies = sources.admin.reruns_of(ex.ref.project, ex.ref.domain, ex.created_at)
    except SourceError:
        return []
    return [Event(at, "admin", recovered_note(r)) for r in copies.recoveries.get(ex.ref, ())]


def _found(e: Examined) -> bool:
    return e.decision is not None and e.decision.is_finding


def _admin_events(ex: ExecutionRecord, attempts: list[AttemptRecord]) -> list[Event]:
    """The execution's and its attempts' phases as Admin records them."""
    events = []
    if ex.created_at:
        events.append(Event(ex.created_at, "admin", f"execution created ({ex.mode})"))
    for a in attempts:
        if a.started_at:
            events.append(
                Event(
                    a.started_at,
                    "admin",
                    f"attempt started ({a.task_type}, pods {', '.join(a.pods) or '?'})",
                    _tag(a),
                )
            )
        if a.ended_at:
            events.append(Event(a.ended_at, "admin", f"attempt {a.phase}", _tag(a)))
    if ex.updated_at:
        events.append(Event(ex.updated_at, "admin", f"execution {ex.phase}"))
    return events


def _pod_events(
    sources: Sources, exam: Examination, attempts: list[AttemptRecord], tl: Timeline
) -> list[Event]:
    """The attempts' pod lines worth showing: one filtered query per namespace."""
    settings, ref = sources.settings, exam.execution.ref
    lk = settings.loki
    pods_by_ns: dict[str, set[str]] = {}
    for a in attempts:
        ns = a.namespace or namespace_for(
            ref.project, ref.domain, settings.flyte.namespace_template
        )
        pods_by_ns.setdefault(ns, set()).update(a.pods)
    pod_owner = {p: a for a in attempts for p in a.pods}
    events = []
    for ns, pods in sorted(pods_by_ns.items()):
        if not pods:
            continue
        query = pod_query(settings, ns, pods, POD_EVIDENCE_REGEX)
        entries = _read(sources, query, exam.window, tl)
        if not entries:
            _check_coverage(sources, ns, exam.window, tl)
        for entry in entries:
            pod = entry.label(lk.pod_label) or "?"
            owner = owner_of(pod_owner, pod)
            tag = _tag(owner) if owner else None
            events.append(
                Event(entry.at, "pod", f"{pod}: {_clip(unwrap_runtime(entry.line))}", tag)
            )
    return events


def _check_coverage(sources: Sources, ns: str, window: Window, tl: Timeline) -> None:
    """No evidence line in `ns`: whether Loki holds any log of it there at all, else a
    `logs_absent` gap (retention, max_query_lookback; docs/upstream.md, "Log coverage").

    Asked over the whole UTC days the window lies in, as the scan asks per shard: a quiet
    namespace during one short execution is no sign that Loki lost its logs."""
    lk = sources.settings.loki
    days = Window(
        datetime.combine(window.start.date(), dtime(0), UTC),
        datetime.combine(window.end.date(), dtime(0), UTC) + timedelta(days=1),
    )
    try:
        held = sources.loki.holds_any(selector([(lk.namespace_label, "=", ns)]), days)
    except SourceError as e:
        tl.gaps.append(
            Gap(
                "loki",
                window.start,
                window.end,
                f"log coverage not measured: {e.cause}",
                failure=e.kind,
            )
        )
        return
    if not held:
        tl.gaps.append(
            Gap(
                "loki",
                window.start,
                window.end,
                f"logs absent: Loki holds no log of namespace {ns} here (retention, "
                "max_query_lookback, a shipper outage or a label name that matches nothing); "
                "verdicts here rest on Admin and S3 only",
                kind=LOGS_ABSENT,
                failure=FailureKind.LOGS_ABSENT,
            )
        )


def _propeller_events(
    sources: Sources, ref: ExecutionRef, window: Window, tl: Timeline
) -> list[Event]:
    """Propeller lines that name this execution (corroboration: logged on every success)."""
    query = build_query(sources.settings.loki.propeller_selector, [("|=", ref.name)])
    events = []
    for entry in _read(sources, query, window, tl):
        ev = parse_propeller_line(unwrap_runtime(entry.line))
        if ev is None:
            events.append(Event(entry.at, "propeller", _clip(unwrap_runtime(entry.line))))
        elif ev.exec_id in (None, ref.name):
            where = f" (node {ev.node})" if ev.node else ""
            events.append(Event(entry.at, "propeller", _clip(f"{ev.msg}{where}")))
    return events


def _disruption_events(exam: Examination) -> list[Event]:
    """Kubernetes' record of each attempt's pods' disruptions (events in Loki, Admin's reasons)."""
    events = []
    for e in exam.attempts:
        for d in e.disruptions:
            by = f" by {d.initiator}" if d.initiator else ""
            text = f"{d.reason}{by} for pod {d.namespace}/{d.pod}: {_clip(d.text)}"
            events.append(Event(d.at, d.source, text, _tag(e.attempt)))
    return events


def _judge(tl: Timeline, e: Examined, now: datetime) -> None:
    """The scan's verdict on one attempt, with what S3 said (an S3 that could not answer makes
    the timeline incomplete, exit 3, as when Loki fails)."""
    ex = tl.execution
    a, outputs, checkpoint = e.attempt, e.outputs, e.checkpoint
    tag = _tag(a)
    at = a.ended_at or ex.updated_at or now
    if outputs is not None and outputs.state == "unknown" and a.output_dir and not outputs.expired:
        tl.gaps.append(
            Gap(
                "s3", at, at, f"{a.output_dir}outputs.pb: {outputs.reason}", failure=outputs.failure
            )
        )
    if checkpoint is not None and checkpoint.state == "unknown" and checkpoint.uri:
        tl.gaps.append(
            Gap(
                "s3",
                at,
                at,
                f"checkpoint {checkpoint.uri}: {checkpoint.reason}",
                failure=checkpoint.failure,
            )
        )
    if outputs is not None and a.ended_at:
        tl.events.append(
            Event(
                a.ended_at,
                "s3",
                f"outputs.pb {outputs.state}"
                + (f" ({outputs.reason})" if outputs.reason else "")
                + (f" at {a.output_dir}outputs.pb" if a.output_dir else ""),
                tag,
            )
        )
    if e.decision is None:
        tl.attempts.append(
            AttemptVerdict(
                a,
                "not-examined",
                "not an elastic success, and no death signal or disruption of its pods",
                e.signal,
                outputs,
                None,
                e.disruption,
            )
        )
        return
    if checkpoint is not None:
        tl.events.append(_checkpoint_event(checkpoint, checkpoint.latest or at, tag))
    label, reason = _label(e.decision)
    tl.attempts.append(
        AttemptVerdict(a, label, reason, e.signal, outputs, checkpoint, e.disruption)
    )


def _label(decision: Decision) -> tuple[str, str | None]:
    """The timeline's verdict word for a decision, and its reason (a cleared class or a note)."""
    match decision.outcome:
        case Verdict.AFFECTED | Verdict.SUSPECTED | Verdict.PENDING as verdict:
            return str(verdict), decision.note
        case Cleared() as cleared:
            # a superseded trial names its re-run (decision.note)
            return "not-affected", f"{cleared}: {decision.note}" if decision.note else str(cleared)
        case _:
            assert_never(decision.outcome)


def _checkpoint_event(checkpoint: Checkpoint, when: datetime, tag: str) -> Event:
    state = (
        f"unknown ({checkpoint.reason})"
        if checkpoint.state == "unknown"
        else f"{checkpoint.state}, {checkpoint.objects} object(s)"
        + (f" ({checkpoint.reason})" if checkpoint.reason else "")
    )
    return Event(when, "s3", f"checkpoint {checkpoint.uri or '(unknown location)'}: {state}", tag)


def _read(sources: Sources, query: str, window: Window, tl: Timeline) -> list[LogEntry]:
    """The entries of `query` in `window`; the parts Loki could not read become gaps."""
    lk = sources.settings.loki
    out: list[LogEntry] = []
    for item in sources.loki.read_shards(
        query, window, shard=lk.shard, max_query_length=lk.max_query_length
    ):
        if isinstance(item, ShardRead):
            tl.add_gaps(shard_gaps(item))
        else:
            out.append(item)
    return out
