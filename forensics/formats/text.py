"""Small text pieces several renderers share: times, checkpoint states, the coverage line."""

from __future__ import annotations

from datetime import datetime

from forensics.model import Checkpoint, Report


def short_time(t: datetime | None) -> str:
    """`2026-09-10T19:45:22Z`: RFC 3339 in UTC to the second, the one time format of every
    message (errors, -v, tables, reports)."""
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else "—"


def checkpoint_summary(ck: Checkpoint) -> str:
    """What a relaunch will find: `empty`, `present (12, newest …)`, `unknown: why`."""
    if ck.state == "present":
        return f"present ({ck.objects}, newest {short_time(ck.latest)})"
    if ck.state == "unknown":
        return f"unknown: {ck.reason}"
    return ck.state


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
        return head + "; coverage complete"
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
