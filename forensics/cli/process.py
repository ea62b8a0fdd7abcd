"""What the command line does to the process as a whole: signal handlers, other libraries' logs
and the process's end.

The library never does these on import or on its own; the commands call them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from forensics.config import Settings
    from forensics.sources import Sources


def keep_ctrl_c() -> None:
    """Ctrl-C is a KeyboardInterrupt again, after flytekit's import replaced it.

    Importing flytekit installs a SIGINT handler that calls exit(1) at once. Ctrl-C must stay a
    KeyboardInterrupt so every command can clean up (no partial report, no half-written pins,
    an audit line for an interrupted relaunch) and exit 130. Only flytekit's handler is
    replaced: one the command installed itself (the guard's, which lets a state write finish
    first) stays."""
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if str(getattr(current, "__module__", "")).startswith("flytekit"):
        signal.signal(signal.SIGINT, signal.default_int_handler)


# -- Ctrl-C at any moment: exit 130 and one line (docs/exit-codes.md) ---------------------------

INTERRUPTED = 130  # exits.INTERRUPTED (not imported: this module loads before anything else)
_said: list[bool] = []
_late: list[int] = []


def interrupted() -> int:
    """Say on stderr, once per command, that Ctrl-C stopped it; its exit code."""
    if not _said:
        _said.append(True)
        try:
            sys.stderr.write("elastic-audit: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed: the exit code still says it
            pass
    return INTERRUPTED


def new_command() -> None:
    """A command starts: its Ctrl-C is said anew (several commands run in one process: the
    tests' runner, the Flyte guard task)."""
    _said.clear()
    _late.clear()


def _note(signum: int, frame: object) -> None:
    _late.append(signum)


def finishing() -> None:
    """From here to the process's end (the result written, exit handlers running) a Ctrl-C is
    noted, not raised: one before `end` has flushed the output makes it 130 and the one line;
    one later, in Python's exit handlers and teardown (the result is whole by then), changes
    nothing, and never prints a traceback out of an exit handler."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _note)


@contextmanager
def importing_flytekit() -> Iterator[None]:
    """Import flytekit (with the Admin client) with Ctrl-C held back until its SIGINT handler
    is replaced by ours: flytekit's calls exit(1) — the findings code, silently — and it is
    installed on import (flyteorg/flytekit, flytekit/core/context_manager.py: `initialize()`
    at import, line 1052, installs `main_signal_handler`, lines 1012-1020; 1.16.24 and the
    1.16.31 wheel; docs/upstream.md), well before the import ends. A Ctrl-C meanwhile is
    delivered when the block ends, as a KeyboardInterrupt. The import takes 0.5-1 s; nothing
    else is held. Only the calling (main) thread's mask changes: the commands call this before
    they start threads of their own."""
    held = threading.current_thread() is threading.main_thread()
    if held:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        keep_ctrl_c()
        if held:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def load_flytekit() -> None:
    """Import the Admin transport, and flytekit with it, Ctrl-C held meanwhile (above)."""
    with importing_flytekit():
        import forensics.sources.admin_transport  # noqa: F401  (the module that imports flytekit)


def open_sources(settings: Settings) -> Sources:
    """The production clients, with flytekit (imported by now) brought back into line: Ctrl-C
    is ours again, and its loggers go through ours, so its warnings never reach stdout."""
    from forensics.cli.verbosity import adopt_flytekit
    from forensics.sources import Sources

    load_flytekit()
    sources = Sources.from_settings(settings)
    keep_ctrl_c()
    adopt_flytekit()
    return sources


def end(code: object) -> NoReturn:
    """End the process with `code` as `sys.exit(code)` does (exit handlers, the interpreter's
    teardown), once stdout and stderr hold nothing unwritten; with 130 and the one line instead
    when a Ctrl-C was noted (`finishing`) by then, the flush included: a reader that stopped
    reading holds the flush until the Ctrl-C. A stdout nobody reads any more (a closed pipe:
    `elastic-audit scan | head -1`) ends it with 1 and no traceback, as one closed while the
    command wrote does (typer's handling)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # What is left can go nowhere: stdout becomes /dev/null so that Python's own exit has
        # nothing to fail on (the recipe of the Python docs' signal module, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    except (OSError, ValueError):  # a stdout closed or failing otherwise: Python's exit says it
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    code = _said_if_interrupted(code)
    if threading.current_thread() is threading.main_thread():
        # Under `python -m`, CPython ends the process with SIGINT once a KeyboardInterrupt has
        # left code that exec() ran from a string (dataclasses build their methods so: a Ctrl-C
        # while one is imported), even one caught and said (docs/upstream.md). With SIGINT
        # blocked from here on, that signal does not end it: it exits 130, as the line said. A
        # later Ctrl-C changes nothing either.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    sys.exit(code)


def _said_if_interrupted(code: object) -> object:
    """130, said, if a Ctrl-C was noted (`finishing`) by now; else `code`. A call of its own:
    entering it runs the handler of a Ctrl-C that has just arrived."""
    return interrupted() if _late else code


def flytekit_imported() -> None:
    """After a command imported flytekit by other means than open_sources (Admin's client
    alone): the same two corrections."""
    from forensics.cli.verbosity import adopt_flytekit

    keep_ctrl_c()
    adopt_flytekit()
