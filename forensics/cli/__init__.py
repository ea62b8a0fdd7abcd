"""The command line: the only code that parses argv, prints, names a flag or picks an exit code.

`console` is the console script (`elastic-audit`, `python -m forensics`; `main` is the same
command for callers in their own process), `app` the typer app (the name shadows the module
forensics/cli/app.py that defines them, as `forensics.cli.app` did).
"""

from forensics.cli.app import app, console, main

__all__ = ["app", "console", "main"]
