"""The command line: thin glue that parses flags, calls the library, renders, picks exit codes."""

from __future__ import annotations

import sys
from enum import Enum

import typer

from forensics import TOOL
from forensics.errors import ElasticAuditError

app = typer.Typer(
    name="elastic-audit",
    help=(
        "Forensics for Flyte + PyTorch Elastic: find task attempts that were preempted and "
        "still marked SUCCEEDED, see what they lost, relaunch them, and ship the plugin fix."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class OutputFormat(str, Enum):
    """How a command prints its result on stdout."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


def default_output(requested: OutputFormat | None) -> OutputFormat:
    """`table` on a terminal, `json` when stdout is piped (scripts and jq want data)."""
    if requested is not None:
        return requested
    return OutputFormat.table if sys.stdout.isatty() else OutputFormat.json


def check_output(fmt: OutputFormat, allowed: tuple[OutputFormat, ...]) -> OutputFormat:
    if fmt not in allowed:
        from forensics.errors import UsageError

        names = ", ".join(a.value for a in allowed)
        raise UsageError(f"-o {fmt.value} is not available here (choose from: {names})")
    return fmt


def _version(value: bool) -> None:
    if value:
        typer.echo(TOOL)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """elastic-audit: incident forensics for Flyte and PyTorch Elastic."""


def _register() -> None:
    # Each command module adds itself to `app`; only commands that work are listed here.
    from forensics.commands import (  # noqa: F401
        demo,
        fix,
        pin_bump,
        relaunch,
        scan,
        show,
        watch,
    )


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: errors become one line on stderr and an exit code."""
    _register()
    try:
        rc = app(args=argv, prog_name="elastic-audit", standalone_mode=False)
    except ElasticAuditError as e:
        typer.echo(f"elastic-audit: error: {e}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        typer.echo("elastic-audit: interrupted", err=True)
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        typer.echo("elastic-audit: aborted", err=True)
        sys.exit(130)
    except typer.TyperException as e:  # usage errors from argument parsing (typer's own click)
        # One line, like every other user mistake, and where to look for the right form.
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = " ".join(e.format_message().split())
        typer.echo(f"elastic-audit: error: {message}{hint}", err=True)
        sys.exit(getattr(e, "exit_code", 2) or 2)
    if rc == 130:
        # typer turns a KeyboardInterrupt inside a command into a silent Exit(130).
        typer.echo("elastic-audit: interrupted", err=True)
    sys.exit(rc if isinstance(rc, int) else 0)
