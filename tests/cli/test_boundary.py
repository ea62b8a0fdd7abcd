"""Only forensics/cli/ parses argv, prints, names a flag, picks an exit code or touches the
process's shared state; the library below it does none of that (docs/architecture.md).

Every module under forensics/ is read as an AST, except forensics/cli/ itself,
forensics/sandbox/ (the demo's loopback servers, run as their own processes) and
forensics/plugin_fix/data/ (code shipped into users' environments, not run by the tool). A
violation is reported as file:line and what it is.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "forensics"
EXEMPT = ("cli", "sandbox", "plugin_fix/data")

# Loggers the tool owns; any other logger's handlers, level or propagation belong to its library.
OWN_LOGGERS = ("elastic-audit", "forensics")
LOGGER_MUTATIONS = {"addHandler", "removeHandler", "setLevel", "handlers", "propagate", "disabled"}
CLI_IMPORTS = ("typer", "click", "rich.console", "forensics.cli")

# What stays, and why; each entry is (path, line text fragment, reason). Nothing else is allowed.
_RESULT = (
    "result text, not an error: the report or relaunch result says which command or flag "
    "comes next, and the reports are byte-identical for every consumer"
)
ALLOWED: list[tuple[str, str, str]] = [
    (
        "forensics/__main__.py",
        "from forensics.cli import console",
        "`python -m forensics` is the CLI",
    ),
    ("forensics/detect.py", "elastic-audit relaunch --parent", _RESULT),
    ("forensics/formats/markdown.py", 'f"--parent {f.attempt.execution}"', _RESULT),
    ("forensics/formats/table.py", "relaunch --parent", _RESULT),
    ("forensics/relaunch/relauncher.py", "--parent relaunches the top execution", _RESULT),
    ("forensics/relaunch/relauncher.py", "--force overrides", _RESULT),
    ("forensics/relaunch/relauncher.py", "has newer versions (", _RESULT),  # --to-version NEWEST
    ("forensics/relaunch/relauncher.py", "--to-version {opts.to_version}", _RESULT),
    ("forensics/relaunch/assess.py", "--no-overwrite-cache", _RESULT),
    # relaunch --only-lost's plan lines: why a chain is refused, what already runs (a result)
    ("forensics/relaunch/lost_run.py", '"--only-lost: the re-check names no lost node"', _RESULT),
    ("forensics/relaunch/lost_run.py", '"--only-lost: Admin names no workflow for it"', _RESULT),
    ("forensics/relaunch/lost_run.py", '"--only-lost cannot replay it faithfully: "', _RESULT),
    ("forensics/relaunch/lost_run.py", 'f"--only-lost: {e}; nothing re-run"', _RESULT),
    ("forensics/relaunch/relauncher.py", '"--only-lost re-runs it already: "', _RESULT),
    ("forensics/relaunch/relauncher.py", '"--no-overwrite-cache: "', _RESULT),
    ("forensics/relaunch/relauncher.py", "'--no-overwrite-cache: '", _RESULT),
    (
        "forensics/config.py",
        "--loki-url",
        "`config`'s output: the `from` column says where a setting came from, a flag included",
    ),
    (
        "forensics/config.py",
        "--flyte-config",
        "`config`'s output: the `from` column says where a setting came from, a flag included",
    ),
    (
        "forensics/config.py",
        "demo --keep-running",
        "names the command that left the variable behind (`demo --keep-running`), not a parameter",
    ),
    (
        "forensics/identifiers.py",
        "--project and --domain",
        "FORMS: the execution forms, a bare name completed by --project/--domain; shown in "
        "show/relaunch --help as well as in the error (still to be worded by the CLI)",
    ),
    (
        "forensics/guard/notify.py",
        "--notify",
        "guard/notify.py is being reworked in parallel (typed failures); word it in the CLI there",
    ),
]


def _library_files() -> list[Path]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if any(rel == e or rel.startswith(e + "/") for e in EXEMPT):
            continue
        out.append(path)
    return out


@cache
def cli_flags() -> frozenset[str]:
    """Every `--name` option of every command of the typer app (help and version included)."""
    import typer.main

    from forensics.cli import app

    flags: set[str] = set()

    def walk(command: object) -> None:
        for p in getattr(command, "params", ()):
            flags.update(o for o in (*p.opts, *p.secondary_opts) if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return frozenset(flags)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (documentation, never shown to a user)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _foreign_logger(node: ast.AST) -> bool:
    """`logging.getLogger(x)` where x is not one of the tool's own logger names (or no name:
    the root logger, every library's)."""
    if not (
        isinstance(node, ast.Call) and _dotted(node.func) in ("logging.getLogger", "getLogger")
    ):
        return False
    if not node.args:
        return True
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.split(".")[0] not in OWN_LOGGERS
    return True  # a computed name: not provably the tool's own


class _Checker(ast.NodeVisitor):
    """Collects (line, what) for every rule a module breaks."""

    def __init__(self, tree: ast.AST, flags: frozenset[str]) -> None:
        self.docs = _docstrings(tree)
        alternatives = "|".join(re.escape(f) for f in sorted(flags, key=len, reverse=True))
        self.flag_re = re.compile(rf"(?<![\w-])({alternatives})(?![\w-])")
        self.found: list[tuple[int, str, str | None]] = []

    def say(self, node: ast.AST, what: str, text: str | None = None) -> None:
        """`text`: what an ALLOWED fragment is matched against (default: the source line)."""
        self.found.append((getattr(node, "lineno", 0), what, text))

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name == "print":
            self.say(node, "print()")
        elif name in ("sys.exit", "os._exit", "exit", "quit"):
            self.say(node, f"{name}()")
        elif name in ("signal.signal", "signal.siginterrupt", "signal.set_wakeup_fd"):
            self.say(node, f"{name}() replaces a process-wide signal handler")
        elif name.endswith(".isatty") or name == "isatty":
            self.say(node, f"{name}(): whether a terminal is attached is the CLI's question")
        elif name.startswith(("sys.stdout.", "sys.stderr.", "sys.__stdout__.", "sys.__stderr__.")):
            self.say(node, f"{name}()")
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
            func = func.value  # logging.getLogger("x").handlers.clear()
        if isinstance(func, ast.Attribute) and func.attr in LOGGER_MUTATIONS:
            if _foreign_logger(func.value):
                self.say(node, f"another library's logger: .{func.attr}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in LOGGER_MUTATIONS and isinstance(node.ctx, ast.Store | ast.Del):
            if _foreign_logger(node.value):
                self.say(node, f"another library's logger: .{node.attr} set")
        if _dotted(node) in ("sys.stdout", "sys.stderr"):
            self.say(node, _dotted(node))
        if node.attr == "exit_code" and isinstance(node.ctx, ast.Store):
            self.say(node, "exit_code: exit codes are chosen in forensics/cli/exits.py")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "exit_code" and isinstance(node.ctx, ast.Store):
            self.say(node, "exit_code: exit codes are chosen in forensics/cli/exits.py")

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if exc is not None and _dotted(exc) in (
            "SystemExit",
            "typer.Exit",
            "click.exceptions.Exit",
        ):
            self.say(node, f"raise {_dotted(exc)}")
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self._imports(node, [a.name for a in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._imports(node, [module] + [f"{module}.{a.name}" for a in node.names])

    def _imports(self, node: ast.AST, names: list[str]) -> None:
        for n in names:
            if any(n == m or n.startswith(m + ".") for m in CLI_IMPORTS):
                self.say(node, f"imports {n}")
                return

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("exit_code", "_exit_code"):
            self.say(node, f"def {node.name}(): exit codes are chosen in forensics/cli/exits.py")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docs:
            if m := self.flag_re.search(node.value):
                self.say(
                    node,
                    f"names the flag {m.group(1)}: the CLI words messages with its flags",
                    node.value,
                )


def violations(path: Path, flags: frozenset[str]) -> list[tuple[int, str, str | None]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    checker = _Checker(tree, flags)
    checker.visit(tree)
    return checker.found


def _allowed(rel: str, line: str) -> bool:
    return any(rel == path and fragment in line for path, fragment, _ in ALLOWED)


def test_the_library_below_the_cli_never_prints_exits_names_a_flag_or_touches_process_state():
    flags = cli_flags()
    assert {"--since", "--state", "--exit-zero", "--project", "--output"} <= flags
    bad = []
    for path in _library_files():
        rel = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        for lineno, what, text in violations(path, flags):
            line = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
            if not (_allowed(rel, line) or (text is not None and _allowed(rel, text))):
                bad.append(f"{rel}:{lineno}: {what}")
    assert not bad, "the library does the CLI's work:\n" + "\n".join(sorted(set(bad)))


@pytest.mark.parametrize(
    "source, what",
    [
        ("print('x')", "print()"),
        ("import sys\nsys.stderr.write('x')", "sys.stderr.write()"),
        ("import sys\nsys.stdout.isatty()", "isatty"),
        ("import sys\nsys.exit(3)", "sys.exit()"),
        ("raise SystemExit(2)", "raise SystemExit"),
        ("import os\nos._exit(1)", "os._exit()"),
        ("import typer", "imports typer"),
        ("from rich.console import Console", "imports rich.console"),
        ("import signal\nsignal.signal(2, None)", "signal.signal()"),
        ("import logging\nlogging.getLogger('flytekit').handlers.clear()", "another library"),
        ("import logging\nlogging.getLogger('botocore').setLevel(10)", "another library"),
        ("import logging\nlogging.getLogger('urllib3').propagate = False", "another library"),
        ("class E(Exception):\n    exit_code = 2", "exit_code"),
        ("def exit_code(outcomes):\n    return 0", "def exit_code"),
        ("raise ValueError(f'--since {x!r}: not a time')", "names the flag --since"),
    ],
)
def test_each_rule_catches_its_violation(tmp_path, source, what):
    path = tmp_path / "m.py"
    path.write_text(source + "\n")
    found = violations(path, cli_flags())
    assert any(what in w for _, w, _ in found), found


@pytest.mark.parametrize(
    "source",
    [
        "import logging\nlogging.getLogger('elastic-audit').setLevel(10)",
        "def f():\n    '''Needs --since, as the CLI says.'''",
        "x = '--sincere'",
        "x = 'pip install --no-deps'",
    ],
)
def test_what_is_not_a_violation(tmp_path, source):
    path = tmp_path / "m.py"
    path.write_text(source + "\n")
    assert violations(path, cli_flags()) == []
