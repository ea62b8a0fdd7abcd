"""The command line: the only code that parses argv, prints, names a flag or picks an exit code.

`main` is the console script (`elastic-audit`, `python -m forensics`), `app` the typer app (the
name shadows the module forensics/cli/app.py that defines them, as `forensics.cli.app` did).
"""

from forensics.cli.app import app, main

__all__ = ["app", "main"]
