"""What the command line does to the process as a whole: signal handlers, other libraries' logs.

The library never does these on import or on its own; the commands call them.
"""

from __future__ import annotations

import gc
import signal
import threading
from typing import TYPE_CHECKING

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


def open_sources(settings: Settings) -> Sources:
    """The production clients, with flytekit (imported by now) brought back into line: Ctrl-C
    is ours again, and its loggers go through ours, so its warnings never reach stdout."""
    from forensics.cli.verbosity import adopt_flytekit
    from forensics.sources import Sources

    sources = Sources.from_settings(settings)
    keep_ctrl_c()
    adopt_flytekit()
    freeze_imports()
    return sources


def freeze_imports() -> None:
    """Keep what the imports made (flytekit, botocore's models, gRPC: most of the objects the
    process holds) out of the garbage collector's full passes, once per process.

    A scan allocates a few objects per candidate and keeps them, so the collector's full passes
    come again and again, and each walked every object the imports made: a tenth of a scan's
    CPU (docs/performance.md). The frozen objects are never collected, so this runs once,
    after the imports, not per scan of a long-running `watch`."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


def flytekit_imported() -> None:
    """After a command imported flytekit by other means than open_sources (Admin's client
    alone): the same two corrections."""
    from forensics.cli.verbosity import adopt_flytekit

    keep_ctrl_c()
    adopt_flytekit()
