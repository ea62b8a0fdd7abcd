"""Notices while a source is being retried, so a failing source is never silent.

Without them a scan against a Loki that refuses connections said nothing for the ~17 s its
retries take (docs/configuration.md, retries). The library calls `retrying`; what is done with
it is the listener's business (the command line writes one line on a terminal:
forensics/cli/notices.py). With no listener, nothing happens. Each (source, address, retry
number) reaches the listener once, however many parallel requests are retrying.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Retrying:
    """`source` at `address` failed (`why`: refused, timed out, answered 503) and is tried again:
    retry `number` of `of`."""

    source: str
    address: str
    why: str
    number: int
    of: int


Listener = Callable[[Retrying], None]

_listener: Listener | None = None
_said: set[tuple[str, str, int]] = set()
_lock = threading.Lock()


def listen(listener: Listener | None) -> Listener | None:
    """Send every notice to `listener` from now on (None: to no one); the previous listener."""
    global _listener
    previous, _listener = _listener, listener
    return previous


def retrying(source: str, address: str, why: str, number: int, of: int) -> None:
    """Tell the listener, once per (source, address, retry number), that a retry is under way."""
    listener = _listener
    if listener is None:
        return
    key = (source, address, number)
    with _lock:
        if key in _said:
            return
        _said.add(key)
    listener(Retrying(source, address, why, number, of))
