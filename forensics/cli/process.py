"""What the command line does to the process as a whole: signal handlers, other libraries' logs,
the garbage collector, the scheduling policy and the process's end.

The library never does these on import or on its own; the commands call them.
"""

from __future__ import annotations

import atexit
import gc
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
    noted, not raised: `leave` then ends with 130 and the one line, never a traceback out of
    an exit handler."""
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
    """Import the Admin client, and flytekit with it, Ctrl-C held meanwhile (above)."""
    with importing_flytekit():
        import forensics.sources.admin  # noqa: F401


def open_sources(settings: Settings) -> Sources:
    """The production clients, with flytekit (imported by now) brought back into line: Ctrl-C
    is ours again, and its loggers go through ours, so its warnings never reach stdout."""
    from forensics.cli.verbosity import adopt_flytekit
    from forensics.sources import Sources

    batch_scheduling()  # before the clients and the lanes start their threads
    load_flytekit()
    sources = Sources.from_settings(settings)
    keep_ctrl_c()
    adopt_flytekit()
    no_full_collections()
    return sources


def batch_scheduling() -> bool:
    """Schedule the calling thread, and every thread it starts from now on, as a batch job
    (Linux's SCHED_BATCH, what `chrt --batch 0` sets; the nice value is unchanged); False where
    the system has no such policy or refuses it, and where the command was started under a
    policy other than the default (`chrt --idle 0 elastic-audit scan`): that one is kept.

    A scan's threads wake each other and gRPC's own threads tens of thousands of times (each
    Admin call: its answer, then the interpreter lock). Under the default policy a woken
    thread preempts the one running, often the thread holding the interpreter lock, only to
    wait for that lock at once; under SCHED_BATCH a wake-up does not preempt. At 1x that
    removed four fifths of the CLI's involuntary context switches and about a tenth of its CPU
    (docs/performance.md). It changes no priority: other processes are not slowed."""
    if not hasattr(os, "SCHED_BATCH"):  # Linux only, with sched_[gs]etscheduler
        return False
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return False  # the caller chose one (idle, real-time): theirs to keep
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:  # a seccomp profile may refuse it: the scan runs as before
        return False
    return True


# A generation-2 threshold no command reaches: the count it is compared with grows by one per
# middle-generation pass (66 in a 1x scan).
_NO_FULL_PASS = 1 << 30


def no_full_collections() -> None:
    """Leave the garbage collector's full passes out of the command; its young generations are
    still collected as usual (`watch` collects in full between its runs).

    A scan keeps what it allocates until its report (the candidates, their records) and makes
    almost no cyclic garbage that outlives two young passes, but the collector walked all it
    held, and all the imports made, each time that grew by a quarter. With the imports frozen
    out of them (`gc.freeze()`, which this replaces) the passes still took 0.9-1.0 s at 1x,
    seven of them with the interpreter lock held (every lane waiting), and freed 108-136
    objects (docs/performance.md)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _NO_FULL_PASS)


def leave(code: object) -> NoReturn:
    """End the process as `sys.exit(code)` would, without the interpreter's teardown.

    After a scan the process holds hundreds of thousands of objects (the imports' and the
    scan's), and Python's finalization frees them one by one and collects once more in full:
    0.3-0.5 s at 1x, after the report is written (docs/performance.md). Everything a command
    relies on at exit still happens: the exit handlers run (logging's flush, weakref finalizers
    such as a temporary directory's removal, multiprocessing's), then stdout and stderr are
    flushed. Where a thread that is not a daemon still runs (Python would wait for it), where
    the code is not a number, and where the flush fails (a closed pipe), the process ends the
    ordinary way instead."""
    code = _said_if_interrupted(code)
    main = threading.main_thread()
    waited = any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())
    if waited or not (code is None or isinstance(code, int)):
        sys.exit(code)
    atexit._run_exitfuncs()  # what Python's own exit runs first (the same function)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(_said_if_interrupted(code))  # Python's exit reports an unflushable stream
    os._exit(_said_if_interrupted(code) or 0)


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
