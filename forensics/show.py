"""The evidence timeline of one execution: pod lines, propeller lines, Admin phases, S3, verdicts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from forensics.detect import classify_signalled, classify_unsignalled, earliest
from forensics.evidence import (
    SIGNAL_LINE_REGEX,
    namespace_for,
    parse_propeller_line,
    parse_signal,
    unwrap_runtime,
)
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
from forensics.scan import Scanner
from forensics.sources.loki import ShardOutcome, build_query, regex_escape, selector

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
    """Gather every piece of evidence about one execution (NotFoundError if Admin has none)."""
    admin, loki, settings = scanner.admin, scanner.loki, scanner.settings
    ex = admin.get_execution(ref)
    attempts = scanner.attempts(ref)
    tl = Timeline(ex)
    if ex.created_at:
        tl.events.append(Event(ex.created_at, "admin", f"execution created ({ex.mode})"))
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

    now = now or datetime.now(UTC)
    start = (ex.created_at or now) - timedelta(minutes=5)
    end = min((ex.updated_at or now) + timedelta(minutes=10), now + timedelta(minutes=1))
    window = Window(start, max(end, start + timedelta(minutes=1)))

    # Pod lines: one filtered query per namespace for the attempts' pods.
    lk = settings.loki
    pods_by_ns: dict[str, set[str]] = {}
    for a in attempts:
        ns = a.namespace or namespace_for(
            ref.project, ref.domain, settings.flyte.namespace_template
        )
        pods_by_ns.setdefault(ns, set()).update(a.pods)
    hits: dict[str, list[SignalHit]] = {}
    pod_owner = {p: a for a in attempts for p in a.pods}
    for ns, pods in sorted(pods_by_ns.items()):
        if not pods:
            continue
        pods_re = "(" + "|".join(regex_escape(p) for p in sorted(pods)) + ")"
        sel = selector(
            [
                (lk.namespace_label, "=", ns),
                (lk.pod_label, "=~", pods_re + "(-(worker|master)-[0-9]+)?"),
            ]
        )
        for entry in _read(loki, build_query(sel, [("|~", POD_EVIDENCE_REGEX)]), window, lk, tl):
            pod = entry.label(lk.pod_label) or "?"
            hit = parse_signal(
                entry,
                namespace_label=lk.namespace_label,
                pod_label=lk.pod_label,
                container_label=lk.container_label,
            )
            owner = pod_owner.get(pod) or pod_owner.get(re.sub(r"-(worker|master)-\d+$", "", pod))
            tag = f"{owner.ref.node_id}/{owner.ref.attempt}" if owner else None
            if hit is not None and owner is not None:
                hits.setdefault(tag, []).append(hit)
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

    # Verdict per attempt, with S3.
    for a in attempts:
        tag = f"{a.ref.node_id}/{a.ref.attempt}"
        signal = earliest(hits.get(tag, []))
        outputs = scanner.outputs(a) if a.phase == "SUCCEEDED" else None
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
        if signal is not None:
            later = [b for b in attempts if b.ref.node_id == a.ref.node_id]
            v = classify_signalled(a, ex, signal, outputs, later_attempts=later)
        elif a.is_elastic and a.phase == "SUCCEEDED" and outputs is not None:
            v = classify_unsignalled(a, outputs)
        else:
            tl.attempts.append(
                AttemptVerdict(
                    a,
                    "not-examined",
                    "not an elastic success with a death signal",
                    signal,
                    outputs,
                    None,
                )
            )
            continue
        checkpoint = (
            scanner.checkpoint(ex, a, signal) if v.verdict in ("affected", "suspected") else None
        )
        if checkpoint is not None:
            when = checkpoint.latest or a.ended_at or ex.updated_at or now
            tl.events.append(
                Event(
                    when,
                    "s3",
                    f"checkpoint {checkpoint.uri or '(unknown location)'}: "
                    f"{checkpoint.state}, {checkpoint.objects} object(s)"
                    + (f" ({checkpoint.reason})" if checkpoint.reason else ""),
                    tag,
                )
            )
        tl.attempts.append(
            AttemptVerdict(
                a, v.verdict or "not-affected", v.cleared or v.note, signal, outputs, checkpoint
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
