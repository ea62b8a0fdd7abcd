"""One line on a terminal while a source is being retried, so a failing source is never silent.

Without it a scan against a Loki that refuses connections said nothing for the ~17 s its
retries take (docs/configuration.md, retries). Only on a terminal: piped or logged stderr gets
the final one-line failure, not a line per retry. Each (source, retry number) is said once, however
many parallel requests are retrying.
"""

from __future__ import annotations

import sys
import threading

_said: set[tuple[str, str, int]] = set()
_lock = threading.Lock()


def retrying(source: str, address: str, why: str, number: int, of: int) -> None:
    """`elastic-audit: Loki at http://host:3100 refused, retrying (2/5)` on a terminal."""
    try:
        if not sys.stderr.isatty():
            return
    except (AttributeError, ValueError):  # a closed or replaced stream
        return
    key = (source, address, number)
    with _lock:
        if key in _said:
            return
        _said.add(key)
    sys.stderr.write(f"elastic-audit: {source} at {address} {why}, retrying ({number}/{of})\n")
    sys.stderr.flush()
