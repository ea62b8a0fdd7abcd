"""Renderers of a scan Report: one module per format, each `render(report) -> str`."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from forensics.model import Report


def plain_text(draw: Callable[[Console], None], *, width: int = 100) -> str:
    """What `draw` prints, as plain text: no colour, no markup parsing (log lines contain
    `[container]`), no trailing spaces, at most `width` columns."""
    import io

    buf = io.StringIO()
    console = Console(
        file=buf, width=width, no_color=True, highlight=False, soft_wrap=False, markup=False
    )
    draw(console)
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())


def render(report: Report, fmt: str, *, width: int = 100) -> str:
    """The report as text in `fmt` (table, json, csv, markdown)."""
    if fmt == "json":
        from forensics.formats import json as mod
    elif fmt == "csv":
        from forensics.formats import csv as mod
    elif fmt == "markdown":
        from forensics.formats import markdown as mod
    else:
        from forensics.formats import table as mod
    return mod.render(report, width=width)


def short_time(t) -> str:  # noqa: ANN001
    """`2026-09-10 19:45:22Z` — compact but unambiguous UTC for tables."""
    return t.strftime("%Y-%m-%d %H:%M:%SZ") if t is not None else "—"


def checkpoint_summary(ck) -> str:  # noqa: ANN001
    """What a relaunch will find: `empty`, `present (12, newest …)`, `unknown: why`."""
    if ck.state == "present":
        return f"present ({ck.objects}, newest {short_time(ck.latest)})"
    if ck.state == "unknown":
        return f"unknown: {ck.reason}"
    return ck.state


def coverage_line(report: Report) -> str:
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
