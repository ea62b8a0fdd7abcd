"""`elastic-audit show EXECUTION`: the evidence timeline of one execution."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from forensics.cli import OutputFormat, app, check_output, default_output
from forensics.commands.common import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    OutputOpt,
    VerboseOpt,
    emit,
    settings_from_flags,
    setup_logging,
)
from forensics.errors import NotFoundError, UsageError
from forensics.formats import checkpoint_summary, plain_text, short_time
from forensics.identifiers import FORMS, parse_execution

if TYPE_CHECKING:  # flytekit is heavy; `--help` and `--version` must stay fast
    from forensics.show import Timeline

EXAMPLES = f"""
Examples:

  elastic-audit show gs1:production:azvg5f9v9974m78fvlf7

  elastic-audit show https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7 -o json

EXECUTION forms: {FORMS}.
Exit codes: 0 shown, 3 a source failed (the timeline is incomplete), 2 bad input or unknown execution.
"""


def render_table(tl: Timeline, width: int = 100) -> str:
    return plain_text(lambda console: _draw(console, tl), width=width)


def _draw(console: Console, tl: Timeline) -> None:
    ex = tl.execution
    console.print(f"Execution {ex.ref} — {ex.phase} — verdict: {tl.verdict.upper()}")
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("source", no_wrap=True)
    table.add_column("attempt", no_wrap=True)
    table.add_column("event", overflow="fold")
    for e in tl.events:
        table.add_row(short_time(e.at), e.source, e.attempt or "", e.text)
    console.print(table)
    for a in tl.attempts:
        line = f"{a.attempt.ref.node_id}/{a.attempt.ref.attempt}: {a.verdict}"
        if a.reason:
            line += f" ({a.reason})"
        if a.checkpoint is not None:
            line += f"; checkpoint {checkpoint_summary(a.checkpoint)}"
        console.print(line)
    for g in tl.gaps:
        console.print(f"GAP {g.source} {short_time(g.start)} → {short_time(g.end)}: {g.error}")


@app.command(epilog=EXAMPLES)
def show(
    execution: str = typer.Argument(..., help="The execution (see forms below)."),
    project: str = typer.Option(
        None, "--project", help="Project of a bare execution name.", show_default=False
    ),
    domain: str = typer.Option(
        None, "--domain", help="Domain of a bare execution name.", show_default=False
    ),
    loki_url: str = LokiUrlOpt,
    flyte_config: str = FlyteConfigOpt,
    config: str = ConfigOpt,
    checkpoint_input: str = CheckpointInputOpt,
    checkpoint_template: str = CheckpointTemplateOpt,
    output: OutputFormat = OutputOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """The evidence timeline of one execution, oldest first, and the verdict per attempt."""
    setup_logging(verbose)
    fmt = check_output(default_output(output), (OutputFormat.table, OutputFormat.json))
    ref = parse_execution(execution, project=project, domain=domain)
    settings = settings_from_flags(
        config=config,
        loki_url=loki_url,
        flyte_config=flyte_config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    from forensics.scan import scanner_for
    from forensics.show import build_timeline

    scanner = scanner_for(settings)
    try:
        tl = build_timeline(scanner, ref)
    except NotFoundError:
        raise UsageError(f"execution {ref} not found in Flyte Admin") from None
    emit(json.dumps(tl.as_dict(), indent=2) if fmt is OutputFormat.json else render_table(tl))
    raise typer.Exit(0 if tl.complete else 3)
