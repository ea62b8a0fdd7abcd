"""What a scan run has found so far — counts, findings, pending, unresolved pods, gaps — and the
report it makes of them (docs/report.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from forensics import TOOL
from forensics.cost import totals
from forensics.detect import Cleared, Decision, Verdict, assert_never
from forensics.model import (
    Activity,
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    Finding,
    Gap,
    Pending,
    Report,
    SignalHit,
    Summary,
    Superseded,
    UnparsedLine,
    Unresolved,
    Window,
)


class Tally:
    """The run's results, appended to from any lane under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.summary = Summary()
        self.findings: list[Finding] = []
        self.pending: list[Pending] = []
        self.unresolved: list[Unresolved] = []
        self.superseded: list[Superseded] = []
        self.gaps: list[Gap] = []
        self.finding_executions: dict[ExecutionRef, ExecutionRecord] = {}
        # For the cost of each finding and the incident page's chart (model.Activity).
        self.finding_attempts: dict[AttemptRef, AttemptRecord] = {}
        self.signals: dict[AttemptRef, datetime] = {}
        self.retried: list[datetime] = []

    def add_gap(self, gap: Gap) -> None:
        """A part of the window a source could not read: the scan is incomplete."""
        with self._lock:
            self.gaps.append(gap)

    def add_gaps(self, gaps: list[Gap]) -> None:
        with self._lock:
            self.gaps.extend(gaps)

    def unresolve(self, hit: SignalHit, reason: str) -> None:
        """A signalled pod evidently Flyte's that resolves to nothing: never cleared, shown in
        the report's `unresolved` (and, like `pending`, never "nothing found")."""
        with self._lock:
            self.unresolved.append(Unresolved(hit, reason))

    def unparsed(self, count: int, example: UnparsedLine | None) -> None:
        """Lines the death-signal filter matched that could not be read (shown, never dropped)."""
        with self._lock:
            self.summary.unparsed_lines = count
            self.summary.unparsed_example = example

    def clear(self, cleared: Cleared, count: int = 1) -> None:
        """`count` examined attempts (or signalled pods) cleared for one reason."""
        with self._lock:
            for _ in range(count):
                self.summary.attempts_examined += 1
                self.summary.clear(cleared)

    def record(
        self,
        decision: Decision,
        ex: ExecutionRecord,
        att: AttemptRecord,
        signal: SignalHit | None,
        finding: Finding | None,
    ) -> None:
        """Count one decided attempt and keep what the report lists of it."""
        with self._lock:
            self._count(decision, att, signal)
            if decision.rerun is not None:
                self.superseded.append(Superseded(att.ref, decision.rerun))
            if signal is not None:
                self.signals[att.ref] = signal.at
                if decision.cleared is Cleared.SIGNAL_FAILED_RETRIED and att.ended_at:
                    self.retried.append(att.ended_at)
            if finding is None:
                return
            outputs = decision.outputs
            # An S3 read that failed is a gap a rescan can close; a location Admin's record
            # does not give (inline raw-output policy) is not: the finding itself says why.
            if (
                outputs is not None
                and outputs.state == "unknown"
                and not att.outputs_unknown
                and not outputs.expired  # no rescan brings an expired folder back
            ):
                self.gaps.append(
                    Gap(
                        "s3",
                        att.ended_at,
                        att.ended_at,
                        f"{att.output_dir}outputs.pb: {outputs.reason}",
                        failure=outputs.failure,
                    )
                )
            self.findings.append(finding)
            self.finding_executions[ex.ref] = ex
            self.finding_attempts[att.ref] = att
            # docs/report.md `summary.findings_by_disruption_reason`
            reason = finding.disruption.reason if finding.disruption else "none"
            by_reason = self.summary.by_disruption_reason
            by_reason[reason] = by_reason.get(reason, 0) + 1

    def _count(self, decision: Decision, att: AttemptRecord, signal: SignalHit | None) -> None:
        summary = self.summary
        summary.attempts_examined += 1
        match decision.outcome:
            case Verdict.PENDING:
                assert signal is not None  # only a signalled attempt is pending
                summary.pending += 1
                self.pending.append(Pending(att.ref, att.phase, signal))
            case Cleared() as cleared:
                summary.clear(cleared)
            case Verdict.AFFECTED:
                summary.affected += 1
            case Verdict.SUSPECTED:
                summary.suspected += 1
            case _:
                assert_never(decision.outcome)

    def report(
        self, window: Window, relaunched: Callable[[list[Finding]], list[Finding]]
    ) -> Report:
        """The report, everything in a stable order; `relaunched` fills `relaunched_as`."""
        findings = sorted(
            self.findings,
            key=lambda f: (
                f.signal.at
                if f.signal
                else f.disruption.at
                if f.disruption
                else f.succeeded_at or window.end,
                str(f.attempt),
            ),
        )
        findings = relaunched(findings)
        self.summary.cost = totals(findings)
        gaps = sorted(
            self.gaps,
            key=lambda g: (g.source, g.start or window.start, g.end or window.end, g.error),
        )
        pending = sorted(self.pending, key=lambda p: (p.signal.at, str(p.attempt)))
        unresolved = sorted(self.unresolved, key=lambda u: (u.signal.at, u.signal.pod))
        return Report(
            TOOL,
            window,
            tuple(gaps),
            self.summary,
            tuple(findings),
            pending=tuple(pending),
            unresolved=tuple(unresolved),
            superseded=tuple(sorted(self.superseded, key=lambda x: str(x.attempt))),
            activity=Activity(dict(self.signals), tuple(sorted(self.retried))),
        )
