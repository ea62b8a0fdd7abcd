"""`show`'s evidence timeline of one execution: a table, or JSON (docs/report.md)."""

from __future__ import annotations

import json

from forensics.formats import OutputFormat, Renderers
from forensics.formats.table import (
    GAP,
    Column,
    cell_lines,
    gap_line,
    last_column_room,
    prose,
    render_table,
)
from forensics.formats.text import checkpoint_summary, short_time
from forensics.timeline import Timeline

SHOW_COLUMNS = (
    Column("time (UTC)"),
    Column("source"),
    Column("attempt"),
    Column("event", wrap=True),
)
# Less room than this for the event text, and each event is a block instead (time, source and
# attempt on a line, the text under them), as the scan's table turns into a block per finding:
# below it, a log line wraps into a word or two per line. 80 columns keep the table.
EVENT_ROOM = 30


def render_timeline(tl: Timeline, width: int | None = None) -> str:
    """The timeline as the shared table renderer draws it, sized to `width` (None: unbounded)."""
    ex = tl.execution
    lines = [prose(f"Execution {ex.ref} — {ex.phase} — verdict: {tl.verdict.upper()}", width)]
    rows = [(short_time(e.at), e.source, e.attempt or "", e.text) for e in tl.events]
    if width is not None and last_column_room(SHOW_COLUMNS, rows, width) < EVENT_ROOM:
        lines += _event_blocks(rows, width)
    else:
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


def _event_blocks(rows: list[tuple[str, str, str, str]], width: int) -> list[str]:
    """A block per event: its time, source and attempt on one line, then its text indented and
    wrapped at spaces (an identifier longer than the line stays whole)."""
    out: list[str] = []
    for at, source, attempt, text in rows:
        out.append(GAP.join(p for p in (at, source, attempt) if p))
        out += [f"  {line}".rstrip() for line in cell_lines(text, max(width - 2, 20), True)]
    return out


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
