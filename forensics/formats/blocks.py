"""A table that fits the terminal, or a block per row where it cannot (`relaunch`, `config`).

The scan's table turns into a block per finding on a terminal too narrow for it (formats/
table.py); this is the same rule for any other table drawn with `render_table`. A table fits
when its identifier columns at their natural width, and each free-text column at its floor —
its longest word (the last one excepted: a URI there may run past the edge), at least
MIN_TEXT characters unless its text is shorter — fit `width`. Otherwise each row is a block,
as `kubectl describe` and `gh` print them: the first column's header and value on one line
(the identifier whole, even past the edge), then one indented `header  value` line per other
column, values wrapped at spaces only. Piped (no width), it is always the table.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from forensics.formats.table import GAP, Column, render_table

MIN_TEXT = 20  # the least room a free-text column is worth reading in


def _floor(column: Column, texts: list[str], last: bool) -> int:
    natural = max(len(line) for t in texts for line in t.split("\n"))
    if not column.wrap:
        return natural
    longest_word = 0 if last else max((len(w) for t in texts for w in t.split()), default=0)
    return min(natural, max(len(column.header), MIN_TEXT, longest_word))


def fits(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None) -> bool:
    """Whether the table of `rows` under `columns` can be read at `width` (see above)."""
    if width is None:
        return True
    last = len(columns) - 1
    needed = sum(
        _floor(c, [c.header, *(r[i] for r in rows)], i == last) for i, c in enumerate(columns)
    )
    return needed + len(GAP) * last <= width


def render_blocks(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None
) -> str:
    """A block per row (see above); each starts at the margin."""
    keys = [c.header for c in columns]
    pad = max(len(k) for k in keys)
    room = None if width is None else max(width - pad - 4, MIN_TEXT)
    out: list[str] = []
    for row in rows:
        out.append(f"{keys[0]:<{pad + 2}}  {row[0]}".rstrip())  # values aligned below
        for key, value in zip(keys[1:], row[1:], strict=True):
            lines = _wrapped(value, room)
            out.append(f"  {key:<{pad}}  {lines[0]}".rstrip())
            out += [f"  {'':<{pad}}  {line}".rstrip() for line in lines[1:]]
    return "\n".join(out) + "\n"


def _wrapped(text: str, room: int | None) -> list[str]:
    lines: list[str] = []
    for para in text.split("\n"):
        if room is not None and len(para) > room:
            lines += textwrap.wrap(para, room, break_long_words=False, break_on_hyphens=False)
        else:
            lines.append(para)
    return lines or [""]


def render_fitted(
    columns: Sequence[Column], rows: Sequence[Sequence[object]], width: int | None
) -> str:
    """`render_table` when the table fits `width`, else a block per row."""
    cells = [["" if v is None else str(v) for v in r] for r in rows]
    if fits(columns, cells, width):
        return render_table(columns, cells, width=width)
    return render_blocks(columns, cells, width)
