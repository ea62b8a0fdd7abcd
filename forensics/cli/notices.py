"""The library's notices on stderr: one line per retry, only on a terminal.

Piped or logged stderr gets the final one-line failure, not a line per retry.
"""

from __future__ import annotations

import sys

from forensics import notices


def to_terminal(notice: notices.Retrying) -> None:
    """`elastic-audit: Loki at http://host:3100 refused, retrying (2/5)` on a terminal."""
    try:
        if not sys.stderr.isatty():
            return
    except (AttributeError, ValueError):  # a closed or replaced stream
        return
    n = notice
    sys.stderr.write(
        f"elastic-audit: {n.source} at {n.address} {n.why}, retrying ({n.number}/{n.of})\n"
    )
    sys.stderr.flush()


def install() -> None:
    """The command line's listener for the library's notices."""
    notices.listen(to_terminal)
