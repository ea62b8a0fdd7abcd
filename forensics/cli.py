"""The command line: thin glue that parses flags, calls the library, renders, picks exit codes.

Help style lives here, once, for every command (and every option added later): plain click help
(no rich panels: they cut defaults with "…" and read `[loki]` as markup), flags without a value
placeholder, placeholders that name the value (TIME, FILE, URL, N: explicit `metavar=`, else
`METAVARS` by option name), defaults and epilogs never re-wrapped mid-word.
"""

from __future__ import annotations

import sys
import textwrap
from enum import Enum
from typing import Any

import typer
import typer.core

# typer vendors its own click (typer._click): help formatting and parse errors are its classes.
from typer import _click as click

from forensics import TOOL
from forensics.errors import ElasticAuditError

# Placeholder by parameter name, for options declared without `metavar=` (a safety net: new
# options should name theirs). Keys are the Python parameter names.
METAVARS = {
    "since": "DURATION|TIME",
    "until": "TIME",
    "project": "PROJECT",
    "domain": "DOMAIN",
    "loki_url": "URL",
    "flyte_config": "FILE",
    "config": "FILE",
    "checkpoint_input": "NAME",
    "checkpoint_template": "TEMPLATE",
    "report": "FILE",
    "from_report": "FILE",
    "audit_log": "FILE",
    "workers": "N",
    "root": "DIR",
    "env_file": "FILE",
    "execution": "EXECUTION",
    "executions": "EXECUTION",
}


def _wrap(text: str, width: int) -> list[str]:
    """Wrap at spaces only: a default such as `exa-labs/flytekit` or a path is never split."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, width, break_long_words=False, break_on_hyphens=False) or [""]
    return out


class _HelpFormatter(click.HelpFormatter):
    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        rows = list(rows)
        first_col = min(max((len(r[0]) for r in rows), default=0), col_max) + col_spacing
        indent = " " * self.current_indent
        for first, second in rows:
            self.write(f"{indent}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = _wrap(second, max(self.width - first_col - self.current_indent - 2, 20))
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write(f"{'':>{first_col + self.current_indent}}{line}\n")


class _HelpContext(typer.Context):
    formatter_class = _HelpFormatter


def _name_placeholders(params: list[Any]) -> list[Any]:
    """Give every value-taking parameter without a metavar one that names the value."""
    for p in params:
        if getattr(p, "param_type_name", "") == "argument":
            _plain_argument(p)
            continue
        if p.metavar is not None or getattr(p, "is_flag", False) or getattr(p, "count", False):
            continue
        desc = getattr(p, "type_descriptor", None)
        if desc is not None and desc.is_choice:
            p.metavar = "|".join(str(getattr(c, "value", c)) for c in desc.choices)
        elif p.name in METAVARS:
            p.metavar = METAVARS[p.name]
        elif desc is not None and desc.annotation is int:
            p.metavar = "N"
        elif desc is not None and desc.is_path:
            p.metavar = "PATH"
        else:
            p.metavar = (p.name or "value").upper()
    return params


def _plain_argument(p: Any) -> None:
    """`SHA` / `[EXECUTION]...` as click writes arguments, not `{SHA}` and `SHA <str>`."""
    name = p.metavar or METAVARS.get(p.name or "", (p.name or "arg").upper())
    p.metavar = name
    many = "..." if p.nargs != 1 else ""
    usage = (name if p.required else f"[{name}]") + many
    p._usage_display_name = lambda: usage
    p._rich_display_name = lambda: name + many
    p.display_type_rich = lambda ctx: None


class _HelpStyle:
    """The tool's help style for a click command or group (see the module docstring)."""

    context_class = _HelpContext

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _name_placeholders(super().get_params(ctx))  # type: ignore[misc]

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Examples are written as they are typed: indented, never re-wrapped."""
        epilog = getattr(self, "epilog", None)
        if epilog:
            formatter.write("\n")
            formatter.write(textwrap.indent(textwrap.dedent(epilog).strip("\n"), "  ") + "\n")

    def get_short_help_str(self, limit: int = 45) -> str:
        """The docstring's first paragraph whole, not cut at 45 characters with "..."."""
        text = getattr(self, "short_help", None) or (getattr(self, "help", None) or "")
        return " ".join(text.strip().split("\n\n")[0].split())


class HelpCommand(_HelpStyle, typer.core.TyperCommand):
    """Every command's help in the tool's one style."""


class HelpGroup(_HelpStyle, typer.core.TyperGroup):
    """A command group (the tool, `fix`) in the same style; lists commands in the order added."""


class App(typer.Typer):
    """typer.Typer whose commands and groups use the tool's help style unless told otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", HelpGroup)
        kwargs.setdefault("rich_markup_mode", None)
        kwargs.setdefault("add_completion", False)
        kwargs.setdefault("pretty_exceptions_enable", False)
        kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", HelpCommand)
        return super().command(*args, **kwargs)


app = App(
    name="elastic-audit",
    help=(
        "Forensics for Flyte + PyTorch Elastic: find task attempts that were preempted and "
        "still marked SUCCEEDED, see what they lost, relaunch them, and ship the plugin fix."
    ),
    no_args_is_help=True,
)


class OutputFormat(str, Enum):
    """How a command prints its result on stdout."""

    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    diff = "diff"


# What each kind of command can print (`-o`); a command's help lists only its own.
REPORT_FORMATS = (OutputFormat.table, OutputFormat.json, OutputFormat.csv, OutputFormat.markdown)
TABLE_OR_JSON = (OutputFormat.table, OutputFormat.json)
_DEFAULT_HELP = {
    OutputFormat.table: "table (default on a terminal)",
    OutputFormat.json: "json (default when piped)",
}


def output_option(*formats: OutputFormat, help: str | None = None) -> Any:
    """The `-o/--output FORMAT` option offering exactly `formats` (parsing rejects the rest)."""
    names = [f.value for f in formats]
    described = [_DEFAULT_HELP.get(f, f.value) for f in formats]

    def parse(value: str) -> str:
        if value.lower() not in names:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(names)}")
        return value.lower()

    return typer.Option(
        None,
        "-o",
        "--output",
        parser=parse,
        metavar="|".join(names),
        help=help or "Output: " + ", ".join(described) + ".",
        show_default=False,
    )


def default_output(requested: OutputFormat | str | None) -> OutputFormat:
    """`table` on a terminal, `json` when stdout is piped (scripts and jq want data)."""
    if requested is not None:
        return OutputFormat(str(getattr(requested, "value", requested)).lower())
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
    except click.exceptions.NoArgsIsHelpError as e:
        # `elastic-audit` or `elastic-audit fix` alone: the help (on stderr: it is not a result)
        # and what is missing, rather than an empty error line.
        typer.echo(e.format_message(), err=True)
        typer.echo(
            f"elastic-audit: error: missing command (see '{e.ctx.command_path} --help')", err=True
        )
        sys.exit(2)
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
