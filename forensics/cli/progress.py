"""Progress on stderr: a rich progress bar on a terminal, nothing otherwise (or with --no-progress)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress


class Progress:
    """forensics.progress.Progress as a rich bar on stderr; silent unless enabled."""

    def __init__(self, enabled: bool) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, int] = {}
        self._bar: RichProgress | None = None
        if enabled:
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )

    @classmethod
    def null(cls) -> Progress:
        return cls(False)

    @classmethod
    def for_terminal(cls, no_progress: bool) -> Progress:
        return cls(not no_progress and sys.stderr.isatty())

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def start(self, key: str, description: str, total: int | None) -> None:
        if self._bar is None:
            return
        with self._lock:
            self._tasks[key] = self._bar.add_task(description, total=total)

    def advance(self, key: str) -> None:
        if self._bar is None:
            return
        with self._lock:
            task = self._tasks.get(key)
        if task is not None:
            self._bar.advance(task)

    def finish(self, key: str) -> None:
        if self._bar is None:
            return
        with self._lock:
            task = self._tasks.pop(key, None)
        if task is not None:
            self._bar.remove_task(task)


@contextmanager
def spinner(message: str, *, enabled: bool = True) -> Iterator[None]:
    """A spinner on stderr while one slow step runs; nothing when disabled or not a terminal."""
    console = Console(stderr=True)
    if enabled and console.is_terminal:
        with console.status(message):
            yield
    else:
        yield
