"""Small text pieces several renderers share: times, checkpoint states, the coverage line."""

from __future__ import annotations

from datetime import datetime

from forensics.model import Checkpoint, Finding, Report


def short_time(t: datetime | None) -> str:
    """`2026-09-10T19:45:22Z`: RFC 3339 in UTC to the second, the one time format of every
    message (errors, -v, tables, reports)."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "—"


def checkpoint_summary(ck: Checkpoint) -> str:
    """What a relaunch will find: `empty`, `present (12, newest …)`, `unknown: why`."""
    if ck.state == "present":
        # as the table says it: a checkpoint written while the pod was torn down may be partial
        after = ", written AFTER the signal (may be partial)" if ck.written_after_signal else ""
        return f"present ({ck.objects}, newest {short_time(ck.latest)}){after}"
    if ck.state == "unknown":
        return f"unknown: {ck.reason}"
    return ck.state


def evidence_text(f: Finding) -> str:
    """The evidence of a finding's verdict in one cell: its death signal, else the disruption
    Kubernetes recorded (a finding proved by an event alone), else `—`."""
    if f.signal is not None:
        return f"{f.signal.signal} {short_time(f.signal.at)}"
    if f.disruption is not None:
        return f"{f.disruption.reason} {short_time(f.disruption.at)}"
    return "—"


def coverage_line(report: Report) -> str:
    """The report's counts in one sentence, ending in whether its coverage is complete."""
    s = report.summary
    head = (
        f"{s.affected} affected, {s.suspected} suspected, {s.not_affected} not affected "
        f"of {s.attempts_examined} attempts examined"
    )
    if s.pending:
        head += f"; {s.pending} pending (signalled, not finished yet: rescan once they end)"
    if report.unresolved:
        head += (
            f"; {len(report.unresolved)} signalled Flyte pod(s) resolved to no attempt "
            "(configuration problem)"
        )
    if s.unparsed_lines:
        # Read completely, yet some matched lines said nothing: their attempts may be missing.
        head += f"; {s.unparsed_lines} matched death-signal line(s) could not be read"
    if report.complete:
        if report.scope is None:  # a saved report from before the scope was recorded
            return head + "; coverage complete (scope not recorded)"
        narrowed = scope_text(report)
        return head + "; coverage complete" + (f" ({narrowed} only)" if narrowed else "")
    return head + f"; INCOMPLETE: {len(report.gaps)} gap(s) — findings may be missing"


SOURCE_NAMES = {
    "loki": "Loki",
    "admin": "Flyte Admin",
    "s3": "S3",
    "k8s-events": "Kubernetes events (Loki)",
    "prometheus": "Prometheus",
}


def incomplete_headline(report: Report) -> str:
    """What an incomplete scan says first: that it is incomplete, and which sources failed."""
    failed = list(dict.fromkeys(SOURCE_NAMES.get(g.source, g.source) for g in report.gaps))
    what = ", ".join(failed) or "a source"
    return (
        f"INCOMPLETE SCAN: {what} could not be read for part of the window "
        f"({len(report.gaps)} gap(s), listed below); findings may be missing."
    )


def scope_text(report: Report) -> str | None:
    """The report's scope when it is not everything (`project gs1; all domains`), or what a
    saved report without one is; None for a scan of every project and domain."""
    if report.scope is None:
        return "scope not recorded"
    return str(report.scope) if report.scope.narrowed else None


def scope_line(report: Report) -> str | None:
    """`Scope: project gs1; domain development (nothing else was scanned)` for a narrowed
    report (docs/report.md `scope`); None for one of every project and domain."""
    text = scope_text(report)
    if text is None:
        return None
    if report.scope is None:
        return "Scope: not recorded (a report saved before elastic-audit recorded it)"
    return f"Scope: {text} (nothing else was scanned)"
