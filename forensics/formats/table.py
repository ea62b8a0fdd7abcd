"""The one table renderer every command's `-o table` uses, and the scan report drawn with it.

Rules: sized to the terminal (`COLUMNS`, else the terminal stdout is); piped, no width
limit — one line per row, so grep and copy see whole rows; identifiers (execution, node, file,
URI, status) are never cut, folded or wrapped: only free-text columns wrap, and only at spaces;
when even that cannot fit, the row runs past the edge rather than breaking a word. No colour,
no box, no trailing spaces.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from forensics.formats.text import (
    coverage_line,
    incomplete_headline,
    scope_line,
    scope_text,
    short_time,
)
from forensics.model import Checkpoint, Finding, Gap, Report

GAP = "  "  # between columns


@dataclass(frozen=True)
class Column:
    """A table column: `wrap` for free text that may wrap at spaces; identifiers never do."""

    header: str
    wrap: bool = False
    align_right: bool = False


def _longest_word_in(cells: list[list[str]], i: int) -> int:
    return max((len(w) for row in cells for w in row[i].split()), default=0)


def _fit(columns: Sequence[Column], cells: list[list[str]], width: int | None) -> list[int]:
    """Each column's width: natural when it fits; otherwise wrap columns give up room, each
    down to its longest word (a word is never broken)."""
    natural = [
        max(len(line) for row in cells for line in row[i].split("\n")) for i in range(len(columns))
    ]
    if width is None:
        return natural
    spare = width - sum(natural) - len(GAP) * (len(columns) - 1)
    if spare >= 0:
        return natural
    last = len(columns) - 1
    floors = [
        max(len(c.header), 8, _longest_word_in(cells, i)) if c.wrap else natural[i]
        for i, c in enumerate(columns)
    ]
    widths = _shrink(list(natural), floors, spare)
    if sum(widths) + len(GAP) * last > width and columns[last].wrap:
        # Still too wide: the last column may go narrower than its longest word (a URI); that
        # word then sits whole on a line of its own, past the edge, with nothing after it.
        floors[last] = max(len(columns[last].header), 8)
        widths = _shrink(widths, floors, width - sum(widths) - len(GAP) * last)
    return widths


def _shrink(widths: list[int], floors: list[int], spare: int) -> list[int]:
    """Take `-spare` columns of room from the widest shrinkable column, one at a time."""
    while spare < 0:
        candidates = [i for i in range(len(widths)) if widths[i] > floors[i]]
        if not candidates:
            break
        i = max(candidates, key=lambda k: widths[k])
        widths[i] -= 1
        spare += 1
    return widths


def cell_lines(text: str, width: int, wrap: bool) -> list[str]:
    """A cell's text as lines of `width`: wrapped at spaces only (`wrap`), else as given."""
    lines: list[str] = []
    for para in text.split("\n"):
        if wrap and len(para) > width:
            lines += textwrap.wrap(para, width, break_long_words=False, break_on_hyphens=False)
        else:
            lines.append(para)
    return lines or [""]


def render_table(
    columns: Sequence[Column], rows: Sequence[Sequence[object]], *, width: int | None = None
) -> str:
    """`rows` under `columns` as plain text lines fitting `width` (None: as wide as needed)."""
    cells = [[c.header for c in columns]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = _fit(columns, cells, width)
    out: list[str] = []
    for row in cells:
        wrapped = [cell_lines(row[i], widths[i], columns[i].wrap) for i in range(len(columns))]
        for k in range(max(len(w) for w in wrapped)):
            parts = []
            for i, w in enumerate(wrapped):
                text = w[k] if k < len(w) else ""
                parts.append(
                    text.rjust(widths[i]) if columns[i].align_right else text.ljust(widths[i])
                )
            out.append(GAP.join(parts).rstrip())
    return "\n".join(out) + "\n"


def gap_line(g: Gap) -> str:
    """`GAP source start → end: error`, as every table-printing command writes a gap."""
    return f"GAP {g.source} {short_time(g.start)} → {short_time(g.end)}: {g.error}"


def prose(text: str, width: int | None) -> str:
    """A line of text around a table, wrapped at spaces to `width` (None: left whole)."""
    if width is None or len(text) <= width:
        return text
    return "\n".join(
        textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
    )


def render_pairs(title: str, pairs: Sequence[tuple[str, str]], *, width: int | None = None) -> str:
    """A title line and `key  value` rows (fix check, fix apply) through the same renderer."""
    body = render_table([Column(""), Column("", wrap=True)], pairs, width=width)
    return title + "\n" + body.split("\n", 1)[1]  # no header row for key/value pairs


# -- the scan report --------------------------------------------------------------------------


def _checkpoint(ck: Checkpoint) -> str:
    if ck.state == "present":
        # Seconds, as the signal column: a checkpoint written after the signal must read so.
        newest = f", newest {ck.latest:%m-%d %H:%M:%S}" if ck.latest else ""
        after = ", written AFTER the signal (may be partial)" if ck.written_after_signal else ""
        return f"present, {ck.objects} object(s){newest}{after}"
    if ck.state == "unknown":
        return "unknown location" if ck.uri is None else f"unknown: {ck.reason}"
    return "EMPTY"


def _when(f: Finding) -> tuple[str, str]:
    """Signal time and how long after it Flyte said SUCCEEDED (the lie, in seconds)."""
    if f.signal is None and f.disruption is not None:
        # proved by Kubernetes' record alone (docs/report.md `disruption`)
        d = f.disruption
        ev = f"{d.reason} {d.at:%m-%d %H:%M:%S}"
        if f.succeeded_at is None:
            return ev, "—"
        return ev, f"+{int((f.succeeded_at - d.at).total_seconds())}s"
    if f.signal is None:
        return "—", f"ended {f.succeeded_at:%m-%d %H:%M}" if f.succeeded_at else "—"
    sig = f"{f.signal.signal} {f.signal.at:%m-%d %H:%M:%S}"
    if f.succeeded_at is None:
        return sig, "—"
    return sig, f"+{int((f.succeeded_at - f.signal.at).total_seconds())}s"


SCAN_COLUMNS = (
    Column("verdict"),
    Column("execution"),
    Column("node"),
    Column("signal (UTC)"),
    Column("success"),
    Column("checkpoint", wrap=True),
)


def _rows(report: Report) -> list[tuple[str, ...]]:
    rows = []
    for f in report.findings:
        sig, ok = _when(f)
        ck = _checkpoint(f.checkpoint)
        if f.relaunched_as:
            ck += f"; relaunched as {f.relaunched_as.name}"
        for r in f.recovered_as:  # a copy of the false success (docs/verdicts.md)
            ck += f"; recovered as {r.name}: a copy of the false success, not a repair"
        node = f"{f.attempt.node_id}/{f.attempt.attempt}"
        rows.append((f.verdict, str(f.attempt.execution), node, sig, ok, ck))
    return rows


def last_column_room(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> int:
    """What a table of `rows` leaves its last column at `width`, the others whole."""
    fixed = [max(len(c.header), *(len(r[i]) for r in rows)) for i, c in enumerate(columns[:-1])]
    return width - sum(fixed) - len(GAP) * (len(columns) - 1)


def _too_narrow(rows: list[tuple[str, ...]], width: int | None) -> bool:
    """The table's rows (without wrapping the checkpoint) do not fit `width`."""
    if width is None:
        return False
    # too little left for the checkpoint to read
    return last_column_room(SCAN_COLUMNS, rows, width) < len("unknown location")


def _blocks(rows: list[tuple[str, ...]], width: int | None) -> list[str]:
    """A block per finding, as `kubectl describe` and `gh` print for narrow terminals: the verdict
    and execution on one line (whole, even past the edge), then one indented `key  value` line
    per column, the values wrapped at spaces only."""
    out: list[str] = []
    keys = [c.header for c in SCAN_COLUMNS[2:]]
    pad = max(len(k) for k in keys)
    for r in rows:
        out.append(f"{r[0]}  {r[1]}")
        for key, value in zip(keys, r[2:], strict=True):
            room = None if width is None else max(width - pad - 4, 20)
            lines = cell_lines(value, room, True) if room else [value]
            out.append(f"  {key:<{pad}}  {lines[0]}".rstrip())
            out += [f"  {'':<{pad}}  {line}".rstrip() for line in lines[1:]]
    return out


def nothing_found(report: Report) -> str:
    """What a report without findings says: never more than its scope and coverage allow."""
    narrowed = scope_text(report) if report.scope is not None else None
    if report.complete:
        return "No affected or suspected attempts" + (f" in {narrowed}." if narrowed else ".")
    of = f" of {narrowed}" if narrowed else ""
    if report.summary.attempts_examined == 0:  # e.g. every source failed: not an all-clear
        return f"No attempt was examined{of}; the GAP lines below say what could not be read."
    return f"No affected or suspected attempts in what could be read{of}."


def render(report: Report, *, width: int | None = None, narrow: bool = False) -> str:
    """The scan report as a table; `execution` is `project:domain:name`, as show/relaunch take.

    `narrow`: when the table cannot fit `width`, a block per finding instead (`-o table` on a
    narrow terminal; `-o wide` keeps the table whatever the width)."""
    w = report.window
    lines = [f"Window {short_time(w.start)} → {short_time(w.end)} (end exclusive)"]
    scope = scope_line(report)
    if scope:
        lines.append(prose(scope, width))
    if not report.complete:
        lines.append(prose(incomplete_headline(report), width))
    if report.findings:
        rows = _rows(report)
        if narrow and _too_narrow(rows, width):
            lines += _blocks(rows, width)
        else:
            lines.append(render_table(SCAN_COLUMNS, rows, width=width).rstrip("\n"))
        for f in report.findings:
            if f.parent is not None:
                text = (
                    f"CHILD {f.attempt.execution} of {f.parent}: relaunching it alone will "
                    "not re-run the parent's later steps (relaunch --parent)"
                )
                lines.append(prose(text, width))
    else:
        lines.append(prose(nothing_found(report), width))
    for g in report.gaps:
        lines.append(prose(gap_line(g), width))
    for p in report.pending:
        lines.append(
            prose(
                f"PENDING {p.attempt} ({p.phase}): {p.signal.signal} at "
                f"{short_time(p.signal.at)} in pod {p.signal.pod}; rescan once it ends",
                width,
            )
        )
    for u in report.unresolved:
        lines.append(
            prose(f"UNRESOLVED pod {u.signal.namespace}/{u.signal.pod}: {u.reason}", width)
        )
    lines.append(prose(coverage_line(report), width))
    cleared = report.summary.cleared
    if cleared:
        text = "Cleared: " + ", ".join(f"{k} {v}" for k, v in sorted(cleared.items()))
        lines.append(prose(text, width))
    by_reason = report.summary.by_disruption_reason
    if set(by_reason) - {"none"}:  # only when some disruption evidence was found
        text = "Findings by disruption: " + ", ".join(
            f"{k} {v}" for k, v in sorted(by_reason.items())
        )
        lines.append(prose(text, width))
    return "\n".join(lines) + "\n"
