"""`show`'s evidence timeline of one execution: a table, or JSON (docs/report.md)."""

from __future__ import annotations

import json

from forensics.formats import OutputFormat, Renderers
from forensics.formats.table import Column, gap_line, prose, render_table
from forensics.formats.text import checkpoint_summary, short_time
from forensics.timeline import Timeline

SHOW_COLUMNS = (
    Column("time (UTC)"),
    Column("source"),
    Column("attempt"),
    Column("event", wrap=True),
)


def render_timeline(tl: Timeline, width: int | None = None) -> str:
    """The timeline as the shared table renderer draws it, sized to `width` (None: unbounded)."""
    ex = tl.execution
    lines = [prose(f"Execution {ex.ref} — {ex.phase} — verdict: {tl.verdict.upper()}", width)]
    rows = [(short_time(e.at), e.source, e.attempt or "", e.text) for e in tl.events]
    lines.append(render_table(SHOW_COLUMNS, rows, width=width).rstrip("\n"))
    for a in tl.attempts:
        line = f"{a.attempt.ref.node_id}/{a.attempt.ref.attempt}: {a.verdict}"
        if a.reason:
            line += f" ({a.reason})"
        if a.checkpoint is not None:
            line += f"; checkpoint {checkpoint_summary(a.checkpoint)}"
        lines.append(prose(line, width))
    lines += [prose(gap_line(g), width) for g in tl.gaps]
    return "\n".join(lines) + "\n"


def _html(tl: Timeline) -> str:
    from forensics.formats.html_show import render_timeline_page

    return render_timeline_page(tl)


RENDERERS: Renderers = {
    Timeline: {
        OutputFormat.table: render_timeline,
        OutputFormat.json: lambda tl, _: json.dumps(tl.as_dict(), indent=2) + "\n",
        OutputFormat.html: lambda tl, _: _html(tl),
    }
}
