"""How wide stdout is, and whether it is a terminal: what the renderers fit their output to."""

from __future__ import annotations

import os
import sys

from forensics import formats
from forensics.formats import OutputFormat


def terminal_width() -> int | None:
    """Columns to fit: `COLUMNS` if set, else stdout's terminal; None (unbounded) when piped."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        pass
    return None


def render(result: object, fmt: OutputFormat | str) -> str:
    """`result` in `fmt` as stdout shows it (tables fitted to the terminal)."""
    return formats.render(result, fmt, terminal_width())


def coloured_diff(diff: str) -> str:
    """A unified diff as rich prints it on this terminal (plain when stdout is not one)."""
    if not sys.stdout.isatty():
        return diff
    from rich.console import Console
    from rich.text import Text

    from forensics.formats.pinbump import DIFF_STYLES

    console = Console(soft_wrap=True, highlight=False)
    with console.capture() as captured:
        for line in diff.splitlines():
            style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
            console.print(Text(line, style=style))
    return captured.get()
