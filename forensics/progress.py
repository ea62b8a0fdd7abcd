"""What the library tells about a long scan's progress: named phases, a total, each step done.

The library calls a `Progress`; it never draws one. The command line passes a progress bar on a
terminal (forensics/cli/progress.py); without one, `NULL` hears everything and shows nothing.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Phases keyed by name: started with a description and a total (None: unknown), advanced
    one step at a time (from any thread), finished."""

    def start(self, key: str, description: str, total: int | None) -> None: ...

    def advance(self, key: str) -> None: ...

    def finish(self, key: str) -> None: ...


class _Silent:
    def start(self, key: str, description: str, total: int | None) -> None:
        pass

    def advance(self, key: str) -> None:
        pass

    def finish(self, key: str) -> None:
        pass


NULL: Progress = _Silent()
