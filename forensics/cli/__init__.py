"""The command line: the only code that parses argv, prints, names a flag or picks an exit code.

`console` is the console script (`elastic-audit`, `python -m forensics`; `main` is the same
command for callers in their own process), `app` the typer app (the name shadows the module
forensics/cli/app.py that defines them, as `forensics.cli.app` did).

`app` and `main` are imported on first use (PEP 562), so that `console` is in charge of Ctrl-C
from the process's first moments: a Ctrl-C while typer, the commands and flytekit are still
being imported exits 130 with one line, as it does during a scan (docs/exit-codes.md).
"""

from __future__ import annotations

# typing is not imported (its import is the slowest part of this module): type checkers read
# this name as True.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, NoReturn

    from forensics.cli.app import app, main

__all__ = ["app", "console", "main"]


def console() -> NoReturn:
    """The console script and `python -m forensics` (`app.console`), with a Ctrl-C at any
    moment — the imports included — one line and exit 130."""
    from forensics.cli.process import end, finishing, interrupted

    try:
        from forensics.cli.app import console as run

        _bind()
    except KeyboardInterrupt:
        finishing()
        end(interrupted())
    run()


def _bind() -> dict[str, Any]:
    """`app` and `main` here are the typer app and the entry point, not the module app.py
    (importing a submodule binds its name in the package)."""
    from forensics.cli.app import app, main

    names = {"app": app, "main": main}
    globals().update(names)
    return names


def __getattr__(name: str) -> object:
    if name in ("app", "main"):
        return _bind()[name]
    raise AttributeError(f"module 'forensics.cli' has no attribute {name!r}")
