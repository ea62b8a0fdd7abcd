"""The command line: the typer app, every command registered on it, errors to exit codes.

Commands are plain functions in forensics/cli/ (they parse flags, call the library and
hand the result to forensics.formats); this is the only module that knows the app. Help style
lives here, once, for every command: plain click help (no rich panels: they cut defaults with
"…" and read `[loki]` as markup), flags without a value placeholder, every other option and
argument naming its value (`metavar=`: TIME, FILE, URL, N; one missing is an error, not a
guess), defaults and epilogs never re-wrapped mid-word.
"""

from __future__ import annotations

import sys
import textwrap
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import typer
import typer.core

from forensics import TOOL
from forensics.cli import (
    config_cmd,
    demo,
    exits,
    fix,
    merge,
    notices,
    pin_bump,
    relaunch,
    scan,
    show,
    verbosity,
    watch,
)
from forensics.cli.errors import message as worded
from forensics.cli.process import end, finishing, interrupted, new_command
from forensics.errors import ElasticAuditError, UsageError


def _wrap(text: str, width: int) -> list[str]:
    """Wrap at spaces only: a default such as `exa-labs/flytekit` or a path is never split."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, width, break_long_words=False, break_on_hyphens=False) or [""]
    return out


def _write_rows(formatter: Any, rows: list[tuple[str, str]]) -> None:
    """A definition list as click's HelpFormatter.write_dl writes one (the first column at
    most 30 wide, two spaces after it), its second column wrapped by `_wrap`."""
    col_spacing = 2
    first_col = min(max((len(r[0]) for r in rows), default=0), 30) + col_spacing
    indent = " " * formatter.current_indent
    for first, second in rows:
        formatter.write(f"{indent}{first}")
        if not second:
            formatter.write("\n")
            continue
        if len(first) <= first_col - col_spacing:
            formatter.write(" " * (first_col - len(first)))
        else:
            formatter.write("\n" + " " * (first_col + formatter.current_indent))
        width = max(formatter.width - first_col - formatter.current_indent - 2, 20)
        lines = _wrap(second, width)
        formatter.write(lines[0] + "\n")
        for line in lines[1:]:
            formatter.write(f"{'':>{first_col + formatter.current_indent}}{line}\n")


def _check_placeholders(params: list[Any]) -> list[Any]:
    """Every value-taking parameter names its value (`metavar=`)."""
    for p in params:
        if p.param_type_name == "argument":
            if p.metavar is None:
                raise TypeError(f"argument {p.name} names no value (metavar=)")
        elif p.metavar is None and not (getattr(p, "is_flag", False) or getattr(p, "count", False)):
            raise TypeError(f"option {'/'.join(p.opts)} takes a value but names none (metavar=)")
    return params


def _argument_name(p: Any) -> str:
    """`SHA`, `EXECUTION...`: an argument as its help row names it (no `<str>` after it)."""
    return p.metavar + ("..." if p.nargs != 1 else "")


def _argument_usage(p: Any) -> str:
    """`SHA` / `[EXECUTION]...` as click writes arguments in the usage line, not `{SHA}`."""
    name = p.metavar if p.required else f"[{p.metavar}]"
    return name + ("..." if p.nargs != 1 else "")


# The shells typer writes completion for (typer.completion's install and show callbacks).
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
COMPLETION_FLAGS = {"--install-completion": "install", "--show-completion": "show"}


def _asked_shell(ctx: typer.Context, args: list[str]) -> list[str]:
    """`--install-completion SHELL` / `--show-completion=SHELL`: typer's flags take no value,
    so the shell named was ignored and the running one's completion installed (bash's from a
    bash prompt, asked for zsh's). The shell is taken out of `args` and kept in `ctx.meta`."""
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        flag, eq, value = arg.partition("=")
        if flag in COMPLETION_FLAGS:
            out.append(flag)
            if not eq:
                value = next(rest, "")
                if not value or value.startswith("-"):
                    out += [value] if value else []
                    continue
            if value not in SHELLS:
                raise UsageError(f"{flag} {value!r}: not a shell ({', '.join(SHELLS)})")
            ctx.meta["completion_shell"] = value
            continue
        out.append(arg)
    return out


def _for_shell(callback: Callable[..., Any]) -> Callable[..., Any]:
    """typer's install/show callback, given the shell named after the flag (else detected)."""

    def run(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        return callback(ctx, param, ctx.meta.get("completion_shell", value) if value else value)

    return run


class _HelpStyle:
    """The tool's help style for a command or group (see the module docstring), through the
    methods typer's command classes have for it (`cls=`)."""

    def get_params(self, ctx: typer.Context) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if p.name in ("install_completion", "show_completion") and p.callback:
                p.callback = _for_shell(p.callback)
                action = "Install" if p.name == "install_completion" else "Show"
                p.help = (
                    f"{action} completion for the shell named after it ({', '.join(SHELLS)}), "
                    "else for the current one."
                )
        return _check_placeholders(params)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _asked_shell(ctx, args))  # type: ignore[misc]

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:
        """Arguments, then options, each a definition list (`_write_rows`)."""
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for p in self.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is None:
                continue
            if p.param_type_name == "argument":
                args.append((_argument_name(p), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    _write_rows(formatter, rows)

    def format_epilog(self, ctx: typer.Context, formatter: Any) -> None:
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

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                pieces.append(_argument_usage(p))
            else:
                pieces += p.get_usage_pieces(ctx)
        return pieces


class HelpGroup(_HelpStyle, typer.core.TyperGroup):
    """A command group (the tool, `fix`) in the same style; lists commands in the order added."""

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:
        super().format_options(ctx, formatter)
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str()))
        if rows:
            with formatter.section("Commands"):
                _write_rows(formatter, rows)


class MissingCommand(Exception):
    """`elastic-audit` or `elastic-audit fix` alone: no command named (`main` says it)."""

    def __init__(self, ctx: typer.Context) -> None:
        super().__init__(ctx.command_path)
        self.help = ctx.get_help()
        self.command_path = ctx.command_path


def command_named(ctx: typer.Context) -> None:
    """A group's callback, run without a command too (`invoke_without_command`): none named is
    MissingCommand, for the help and one line on stderr (not typer's help on stdout, exit 0)."""
    if ctx.invoked_subcommand is None:
        raise MissingCommand(ctx)


class App(typer.Typer):
    """typer.Typer whose commands and groups use the tool's help style unless told otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", HelpGroup)
        kwargs.setdefault("rich_markup_mode", None)
        kwargs.setdefault("add_completion", False)
        kwargs.setdefault("pretty_exceptions_enable", False)
        kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
        super().__init__(**kwargs)

    def add(self, name: str, command: Callable[..., Any], epilog: str) -> None:
        """Register a command function under `name`, in the tool's help style."""
        self.command(name, cls=HelpCommand, epilog=epilog)(command)


app = App(
    name="elastic-audit",
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    help=(
        "Forensics for Flyte + PyTorch Elastic: find task attempts that were preempted and "
        "still marked SUCCEEDED, see what they lost, relaunch them, and ship the plugin fix."
    ),
)


# What a bug report needs besides the tool's own version: the libraries whose versions decide
# what the tool reads and what the fix applies to. Read from the installed metadata, not
# imported (torch takes seconds to import).
VERSION_OF = ("flytekit", "flytekitplugins-kfpytorch", "torch")


def version_line() -> str:
    """`elastic-audit 0.1.0 (flytekit 1.13.15, flytekitplugins-kfpytorch …, torch …, Python 3.11.7)`."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for dist in VERSION_OF:
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist} not installed")
    parts.append(f"Python {platform.python_version()}")
    return f"{TOOL} ({', '.join(parts)})"


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print the version, with flytekit's, the plugin's, torch's and Python's, and exit.",
    ),
) -> None:
    """elastic-audit: incident forensics for Flyte and PyTorch Elastic."""
    command_named(ctx)
    notices.install()  # a source being retried is said on a terminal


# The order here is the order `elastic-audit --help` lists the commands in (groups last).
app.add("demo", demo.demo, demo.EXAMPLES)
app.add("merge", merge.merge, merge.EXAMPLES)
app.add("pin-bump", pin_bump.pin_bump, pin_bump.EXAMPLES)
app.add("relaunch", relaunch.relaunch, relaunch.EXAMPLES)
app.add("scan", scan.scan, scan.EXAMPLES)
app.add("show", show.show, show.EXAMPLES)
app.add("watch", watch.watch, watch.EXAMPLES)
app.add("config", config_cmd.config, config_cmd.EXAMPLES)

fix_app = App(name="fix", help=fix.HELP)
fix_app.callback(invoke_without_command=True)(command_named)
fix_app.add("show", fix.show, fix.SHOW_EXAMPLES)
fix_app.add("apply", fix.apply_cmd, fix.APPLY_EXAMPLES)
fix_app.add("build", fix.build_cmd, fix.BUILD_EXAMPLES)
fix_app.add("check", fix.check_cmd, fix.CHECK_EXAMPLES)
app.add_typer(fix_app, name="fix")


def console() -> NoReturn:
    """The console script and `python -m forensics`: the command, then the process's end
    (`process.end`: a Ctrl-C from the command's last lines to the exit is 130 and one line, not
    a traceback). `main` is the same command for callers in their own process."""
    try:
        try:
            main()
        except SystemExit as e:
            code = e.code
        else:
            code = 0
        finishing()  # a Ctrl-C from here on is noted: `end` says it and exits 130
    except KeyboardInterrupt:  # one that came past main's own handling (its last lines)
        finishing()
        code = interrupted()
    end(code)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: errors become one line on stderr and an exit code."""
    new_command()
    try:
        rc = app(args=argv, prog_name="elastic-audit", standalone_mode=False)
    except ElasticAuditError as e:
        typer.echo(f"elastic-audit: error: {worded(e)}", err=True)
        sys.exit(exits.for_error(e))
    except KeyboardInterrupt:
        sys.exit(interrupted())
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        typer.echo("elastic-audit: aborted", err=True)
        sys.exit(130)
    except MissingCommand as e:
        # `elastic-audit` or `elastic-audit fix` alone: the help (on stderr: it is not a result)
        # and what is missing, rather than an empty error line.
        typer.echo(e.help, err=True)
        typer.echo(
            f"elastic-audit: error: missing command (see '{e.command_path} --help')", err=True
        )
        sys.exit(2)
    except typer.TyperException as e:  # usage errors from argument parsing
        # One line, like every other user mistake, and where to look for the right form.
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        message = " ".join(e.format_message().split())
        typer.echo(f"elastic-audit: error: {message}{hint}", err=True)
        sys.exit(getattr(e, "exit_code", 2) or 2)
    except Exception as e:  # a bug: its traceback for the report, and an exit code of its own
        sys.stderr.write(verbosity.masked(traceback.format_exc()))
        typer.echo(
            f"elastic-audit: internal error ({type(e).__name__}): a bug in elastic-audit; the "
            "traceback above belongs in its report. Nothing here is a result.",
            err=True,
        )
        sys.exit(exits.CRASHED)
    if rc == 130:
        # typer turns a KeyboardInterrupt inside a command into a silent Exit(130).
        interrupted()
    sys.exit(rc if isinstance(rc, int) else 0)
