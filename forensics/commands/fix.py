"""`elastic-audit fix`: show the bundled plugin patch, apply it to a source tree, check for the fix."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from forensics.cli import (
    TABLE_OR_JSON,
    App,
    OutputFormat,
    app,
    check_output,
    default_output,
    output_option,
)
from forensics.commands.common import emit
from forensics.errors import UsageError
from forensics.formats.table import render_pairs, terminal_width
from forensics.plugin_fix.check import CheckResult, check_environment, check_source
from forensics.plugin_fix.patch import PATCH_NAME, ApplyResult, apply, load_patch, parse_patch
from forensics.progress import spinner

fix_app = App(
    name="fix",
    help="The plugin fix: show the patch, apply it to a source tree, check an environment or "
    "tree, build a fixed wheel.",
    no_args_is_help=True,
)
app.add_typer(fix_app, name="fix")

OutputOpt = output_option(*TABLE_OR_JSON)
NoProgressArg = Annotated[
    bool, typer.Option("--no-progress", help="No spinner on stderr (none when not a terminal).")
]

SHOW_EXAMPLES = """\
Examples:

  # review the patch, or feed it to git at the root of a flytekit checkout
  elastic-audit fix show | less
  elastic-audit fix show | git apply

  # the patch as data: name, files, sha256, text
  elastic-audit fix show -o json
"""

APPLY_EXAMPLES = """\
Examples:

  # a flytekit checkout (or your fork), at its root
  elastic-audit fix apply ~/src/flytekit

  # the plugin's own directory, or an unpacked sdist
  elastic-audit fix apply ~/src/flytekit/plugins/flytekit-kf-pytorch
  pip download --no-deps --no-binary :all: flytekitplugins-kfpytorch==1.16.31
  tar xzf flytekitplugins_kfpytorch-1.16.31.tar.gz
  elastic-audit fix apply flytekitplugins_kfpytorch-1.16.31

  # would it apply? writes nothing
  elastic-audit fix apply --check ~/src/flytekit

Exit codes: 0 applied, already applied, or (--check) would apply;
2 not a flytekit tree, or the source differs from the patch (nothing written).
"""

CHECK_EXAMPLES = """\
Examples:

  # is this interpreter's plugin safe?
  elastic-audit fix check

  # the interpreter your training image runs
  elastic-audit fix check --python /opt/venv/bin/python

  # a checkout or unpacked archive, statically (as pin-bump --require-fix does)
  elastic-audit fix check --source ~/src/flytekit

Exit codes: 0 fixed; 1 vulnerable; 2 not installed, unknown, or a usage error.
"""

BUILD_EXAMPLES = """\
Examples:

  # a fixed wheel of the release your images pin, into ./dist
  elastic-audit fix build 1.13.15 --out dist
  pip install dist/flytekitplugins_kfpytorch-1.13.15+elasticaudit.1-py3-none-any.whl

  # or upload it to your private index (twine, uv publish, ...)

The sdist comes from the index pip is configured for (pip.conf, PIP_INDEX_URL, proxies,
certificates). Exit codes: 0 built; 2 no such release, a release without the bug, or a
failed download or build.
"""


def _print_rows(title: str, rows: list[tuple[str, str]]) -> None:
    sys.stdout.write(render_pairs(title, rows, width=terminal_width()))
    sys.stdout.flush()


@fix_app.command("show", epilog=SHOW_EXAMPLES)
def show(output: str | None = OutputOpt, no_progress: NoProgressArg = False) -> None:
    """Print the bundled patch (git format, against the flytekit repository layout).

    The patch itself is printed unless -o json is given, also into a pipe, so that
    `elastic-audit fix show | git apply` works.
    """
    text = load_patch()
    if output is None or default_output(output) is OutputFormat.table:
        sys.stdout.write(text)
        return
    data = {
        "name": PATCH_NAME,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "files": [fp.path for fp in parse_patch(text)],
        "patch": text,
    }
    emit(json.dumps(data, indent=2))


def _render_apply(result: ApplyResult, fmt: OutputFormat) -> None:
    if fmt == OutputFormat.json:
        emit(json.dumps(result.to_dict(), indent=2))
        return
    _print_rows(f"fix apply: {result.status}", _render_apply_rows(result))


@fix_app.command("apply", epilog=APPLY_EXAMPLES)
def apply_cmd(
    directory: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="A flytekit checkout root, the plugin directory, or an unpacked sdist.",
            show_default=False,
        ),
    ],
    check: Annotated[
        bool, typer.Option("--check", help="Only say whether the patch would apply; write nothing.")
    ] = False,
    output: str | None = OutputOpt,
    no_progress: NoProgressArg = False,
) -> None:
    """Fix the plugin in a source tree of any affected release; idempotent, all files or none."""
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    result = apply(directory, check_only=check)
    _render_apply(result, fmt)
    raise typer.Exit(result.exit_code)


@fix_app.command("build", epilog=BUILD_EXAMPLES)
def build_cmd(
    version: Annotated[
        str,
        typer.Argument(
            metavar="VERSION",
            help="The flytekitplugins-kfpytorch release to build, e.g. 1.13.15.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", metavar="DIR", help="Where to write the wheel (default: here)."),
    ] = Path("."),
    output: str | None = OutputOpt,
    no_progress: NoProgressArg = False,
) -> None:
    """Build a fixed wheel of a release (version + elasticaudit.1) with pip; print path and sha256."""
    from forensics.plugin_fix.build import build

    fmt = check_output(default_output(output), TABLE_OR_JSON)
    with spinner(f"building the fixed {version} with pip", enabled=not no_progress):
        result = build(version, out)
    if fmt == OutputFormat.json:
        emit(json.dumps(result.to_dict(), indent=2))
        return
    rows = [("wheel", str(result.wheel)), ("sha256", result.sha256), ("version", result.version)]
    rows += [("adapted", note) for note in result.adapted]
    _print_rows(f"fix build: {result.release}", rows)


def _render_apply_rows(result: ApplyResult) -> list[tuple[str, str]]:
    rows = [
        ("target", f"{result.target.root} ({result.target.description})"),
        ("files", ", ".join(result.files)),
        ("result", result.reason),
    ]
    return rows + [("adapted", note) for note in result.adapted]


def _check_rows(result: CheckResult) -> list[tuple[str, str]]:
    rows = [("status", result.status), ("reason", result.reason)]
    extra: list[tuple[str, Any]] = [
        ("python", result.python),
        ("plugin", result.plugin_version),
        ("flytekit", result.flytekit_version),
        ("torch", result.torch_version),
        ("file", result.path),
    ]
    rows += [(k, str(v)) for k, v in extra if v]
    rows += [(f"  {s.name}", f"{s.outcome}: {s.detail}") for s in result.scenarios]
    return rows


@fix_app.command("check", epilog=CHECK_EXAMPLES)
def check_cmd(
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            metavar="EXE",
            help="Interpreter to probe (default: the one running elastic-audit).",
            show_default=False,
        ),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option(
            "--source",
            metavar="DIR",
            help="Check a checkout or unpacked archive statically instead.",
            show_default=False,
        ),
    ] = None,
    output: str | None = OutputOpt,
    no_progress: NoProgressArg = False,
) -> None:
    """Is the plugin safe from the silent-green bug?

    Runs a probe in the target interpreter that drives the installed plugin with a real torch
    SignalException(SIGTERM) (no cluster, no GPU), or checks a source tree with --source.
    """
    if python is not None and source is not None:
        raise UsageError("--python and --source are two different checks; give one")
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    if source is not None:
        result = check_source(source)
    else:
        with spinner("probing the plugin in the target interpreter", enabled=not no_progress):
            result = check_environment(python)
    if fmt == OutputFormat.json:
        emit(json.dumps(result.to_dict(), indent=2))
    else:
        _print_rows(f"fix check ({result.mode})", _check_rows(result))
    raise typer.Exit(result.exit_code)
