"""The evidence timeline of one execution: pod lines, propeller lines, Admin phases, S3, verdicts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from forensics.evidence.envelopes import unwrap_runtime
from forensics.evidence.flyte_names import namespace_for
from forensics.evidence.logs import SIGNAL_LINE_REGEX, parse_propeller_line
from forensics.model import (
    UTC,
    AttemptRecord,
    Checkpoint,
    ExecutionRecord,
    ExecutionRef,
    Gap,
    LogEntry,
    ObjectCheck,
    SignalHit,
    Window,
    rfc3339,
)
from forensics.scan import Scanner, pod_query
from forensics.sources.logql import build_query
from forensics.sources.loki import ShardOutcome

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
    source: str  # "admin" | "pod" | "propeller" | "s3"
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
        }


@dataclass
class Timeline:
    """The execution, its events oldest first, a verdict per attempt, and coverage."""

    execution: ExecutionRecord
    events: list[Event] = field(default_factory=list)
    attempts: list[AttemptVerdict] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

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


def build_timeline(scanner: Scanner, ref: ExecutionRef, *, now: datetime | None = None) -> Timeline:
    """Gather every piece of evidence about one execution (NotFoundError if Admin has none).

    The verdicts are the scan's own (`Scanner.examine`); the timeline reads the same window.
    """
    loki, settings = scanner.loki, scanner.settings
    now = now or datetime.now(UTC)
    exam = scanner.examine(ref, now=now)
    ex, window = exam.execution, exam.window
    tl = Timeline(ex, gaps=list(exam.gaps))
    if ex.created_at:
        tl.events.append(Event(ex.created_at, "admin", f"execution created ({ex.mode})"))
    attempts = [e.attempt for e in exam.attempts]
    for a in attempts:
        tag = f"{a.ref.node_id}/{a.ref.attempt}"
        if a.started_at:
            tl.events.append(
                Event(
                    a.started_at,
                    "admin",
                    f"attempt started ({a.task_type}, pods {', '.join(a.pods) or '?'})",
                    tag,
                )
            )
        if a.ended_at:
            tl.events.append(Event(a.ended_at, "admin", f"attempt {a.phase}", tag))
    if ex.updated_at:
        tl.events.append(Event(ex.updated_at, "admin", f"execution {ex.phase}"))

    # Pod lines: one filtered query per namespace for the attempts' pods.
    lk = settings.loki
    pods_by_ns: dict[str, set[str]] = {}
    for a in attempts:
        ns = a.namespace or namespace_for(
            ref.project, ref.domain, settings.flyte.namespace_template
        )
        pods_by_ns.setdefault(ns, set()).update(a.pods)
    pod_owner = {p: a for a in attempts for p in a.pods}
    for ns, pods in sorted(pods_by_ns.items()):
        if not pods:
            continue
        query = pod_query(settings, ns, pods, POD_EVIDENCE_REGEX)
        for entry in _read(loki, query, window, lk, tl):
            pod = entry.label(lk.pod_label) or "?"
            owner = pod_owner.get(pod) or pod_owner.get(re.sub(r"-(worker|master)-\d+$", "", pod))
            tag = f"{owner.ref.node_id}/{owner.ref.attempt}" if owner else None
            tl.events.append(
                Event(entry.at, "pod", f"{pod}: {_clip(unwrap_runtime(entry.line))}", tag)
            )

    # Propeller lines that name this execution (corroboration: logged on every success).
    propeller_query = build_query(lk.propeller_selector, [("|=", ref.name)])
    for entry in _read(loki, propeller_query, window, lk, tl):
        ev = parse_propeller_line(unwrap_runtime(entry.line))
        if ev is None:
            tl.events.append(Event(entry.at, "propeller", _clip(unwrap_runtime(entry.line))))
        elif ev.exec_id in (None, ref.name):
            where = f" (node {ev.node})" if ev.node else ""
            tl.events.append(Event(entry.at, "propeller", _clip(f"{ev.msg}{where}")))

    # Verdict per attempt (the scan's), with S3.
    for e in exam.attempts:
        a, outputs, checkpoint = e.attempt, e.outputs, e.checkpoint
        tag = f"{a.ref.node_id}/{a.ref.attempt}"
        at = a.ended_at or ex.updated_at or now
        if outputs is not None and outputs.state == "unknown" and a.output_dir:
            # S3 could not answer: the timeline is incomplete (exit 3), as when Loki fails.
            tl.gaps.append(Gap("s3", at, at, f"{a.output_dir}outputs.pb: {outputs.reason}"))
        if checkpoint is not None and checkpoint.state == "unknown" and checkpoint.uri:
            tl.gaps.append(Gap("s3", at, at, f"checkpoint {checkpoint.uri}: {checkpoint.reason}"))
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
        if e.verdict is None:
            tl.attempts.append(
                AttemptVerdict(
                    a,
                    "not-examined",
                    "not an elastic success with a death signal",
                    e.signal,
                    outputs,
                    None,
                )
            )
            continue
        if checkpoint is not None:
            when = checkpoint.latest or a.ended_at or ex.updated_at or now
            tl.events.append(
                Event(
                    when,
                    "s3",
                    f"checkpoint {checkpoint.uri or '(unknown location)'}: "
                    + (
                        f"unknown ({checkpoint.reason})"
                        if checkpoint.state == "unknown"
                        else f"{checkpoint.state}, {checkpoint.objects} object(s)"
                        + (f" ({checkpoint.reason})" if checkpoint.reason else "")
                    ),
                    tag,
                )
            )
        v = e.verdict
        tl.attempts.append(
            AttemptVerdict(
                a, v.verdict or "not-affected", v.cleared or v.note, e.signal, outputs, checkpoint
            )
        )
    tl.events.sort(key=lambda e: (e.at, e.source))
    return tl


def _read(loki, query: str, window: Window, lk, tl: Timeline) -> list[LogEntry]:  # noqa: ANN001
    out: list[LogEntry] = []
    for item in loki.scan(query, window, shard=lk.shard, max_query_length=lk.max_query_length):
        if isinstance(item, ShardOutcome):
            for part, error in item.failures:
                tl.gaps.append(Gap("loki", part.start, part.end, error))
        else:
            out.append(item)
    return out
