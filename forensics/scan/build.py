"""The report of a scan, built from what it collected and how each attempt was judged: a pure
function, everything in a stable order (docs/report.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from forensics import TOOL
from forensics.cost import totals
from forensics.detect import Cleared, Decision, Verdict, assert_never
from forensics.model import (
    Activity,
    AttemptRef,
    Finding,
    Gap,
    Pending,
    Report,
    Scope,
    Summary,
    Superseded,
    order_findings,
)
from forensics.scan.collect import Collected
from forensics.scan.evidence import Evidence


@dataclass(frozen=True, slots=True)
class Judged:
    """One examined attempt: its evidence, its decision, and its finding when it is one."""

    evidence: Evidence
    decision: Decision
    finding: Finding | None = None


def quiet(e: Evidence, decision: Decision) -> Cleared | None:
    """Why the attempt was cleared, when that is all the report says of it (no signal, nothing
    superseded): then its reason alone is what `build_report` needs."""
    cleared = decision.cleared
    if cleared is None or e.signal is not None or decision.rerun is not None:
        return None
    return cleared


def build_report(collected: Collected, judged: Iterable[Judged | Cleared]) -> Report:
    """The report: counts, findings, pending and superseded attempts, unresolved pods, gaps.

    An attempt of which the report says only why it was cleared (`quiet`) may come as that
    reason alone: a scan clears most of the attempts it examines so, and keeps nothing else of
    them."""
    window = collected.window
    summary = Summary()
    for cleared in collected.cleared:  # signalled pods cleared before any attempt was found
        _count(summary, cleared)
    summary.unparsed_lines = collected.unparsed
    summary.unparsed_example = collected.unparsed_example
    gaps = list(collected.gaps)
    findings: list[Finding] = []
    pending: list[Pending] = []
    superseded: list[Superseded] = []
    signals: dict[AttemptRef, datetime] = {}
    retried: list[datetime] = []
    for j in judged:
        if isinstance(j, Cleared):
            _count(summary, j)
            continue
        e, decision = j.evidence, j.decision
        att, signal = e.attempt, e.signal
        _count(summary, decision.outcome)
        if decision.outcome is Verdict.PENDING:
            assert signal is not None  # only a signalled attempt is pending
            pending.append(Pending(att.ref, att.phase, signal))
        if decision.rerun is not None:
            superseded.append(Superseded(att.ref, decision.rerun))
        if signal is not None:
            signals[att.ref] = signal.at
            if decision.cleared is Cleared.SIGNAL_FAILED_RETRIED and att.ended_at:
                retried.append(att.ended_at)
        if j.finding is None:
            continue
        outputs = decision.outputs
        # An S3 read that failed is a gap a rescan can close; a location Admin's record does
        # not give (inline raw-output policy) is not: the finding itself says why.
        if (
            outputs is not None
            and outputs.state == "unknown"
            and not att.outputs_unknown
            and not outputs.expired  # no rescan brings an expired folder back
        ):
            why = f"{att.output_dir}outputs.pb: {outputs.reason}"
            gaps.append(Gap("s3", att.ended_at, att.ended_at, why, failure=outputs.failure))
        findings.append(j.finding)
        # docs/report.md `summary.findings_by_disruption_reason`
        reason = j.finding.disruption.reason if j.finding.disruption else "none"
        by_reason = summary.by_disruption_reason
        by_reason[reason] = by_reason.get(reason, 0) + 1
    findings = order_findings(findings, window.end)
    summary.cost = totals(findings)
    scope = collected.scope
    return Report(
        TOOL,
        window,
        tuple(gaps),
        summary,
        tuple(findings),
        pending=tuple(pending),
        unresolved=tuple(collected.unresolved),
        superseded=tuple(superseded),
        activity=Activity(signals, tuple(sorted(retried))),
        scope=Scope(tuple(sorted(scope.projects)), tuple(sorted(scope.domains))),
    ).ordered()


def _count(summary: Summary, outcome: Verdict | Cleared) -> None:
    summary.attempts_examined += 1
    match outcome:
        case Verdict.PENDING:
            summary.pending += 1
        case Cleared() as cleared:
            summary.clear(cleared)
        case Verdict.AFFECTED:
            summary.affected += 1
        case Verdict.SUSPECTED:
            summary.suspected += 1
        case _:
            assert_never(outcome)
