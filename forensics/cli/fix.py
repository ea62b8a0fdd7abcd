"""`elastic-audit fix`: show the bundled plugin patch, apply it to a source tree, check for the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forensics.cli import exits
from forensics.cli.common import check_writable_dir, emit
from forensics.cli.display import render
from forensics.cli.options import check_output, default_output, output_option
from forensics.cli.progress import spinner
from forensics.errors import UsageError
from forensics.formats import TABLE_OR_JSON, OutputFormat
from forensics.formats.fix import BundledPatch
from forensics.plugin_fix.check import check_environment, check_source
from forensics.plugin_fix.patch import PATCH_NAME, apply, load_patch

HELP = (
    "The plugin fix: show the patch, apply it to a source tree, check an environment or "
    "tree, build a fixed wheel."
)

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


def show(output: str | None = OutputOpt, no_progress: NoProgressArg = False) -> None:
    """Print the bundled patch (git format, against the flytekit repository layout).

    The patch itself is printed unless -o json is given, also into a pipe, so that
    `elastic-audit fix show | git apply` works.
    """
    fmt = OutputFormat.table if output is None else default_output(output)
    emit(render(BundledPatch(PATCH_NAME, load_patch()), fmt))


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
    emit(render(result, fmt))
    raise typer.Exit(exits.for_fix_apply(result.status))


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
    check_writable_dir(out, "--out")  # before minutes of pip, not a traceback after them
    with spinner(f"building the fixed {version} with pip", enabled=not no_progress):
        result = build(version, out)
    emit(render(result, fmt))


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
    emit(render(result, fmt))
    raise typer.Exit(exits.for_fix_check(result.status))
