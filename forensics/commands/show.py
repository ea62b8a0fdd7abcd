"""`elastic-audit show EXECUTION`: the evidence timeline of one execution."""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING

import typer

from forensics.cli import TABLE_OR_JSON, OutputFormat, app, check_output, default_output
from forensics.commands.common import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    TableOrJsonOpt,
    VerboseOpt,
    emit,
    report_failures,
    settings_from_flags,
    setup_logging,
    source_endpoints,
)
from forensics.errors import NotFoundError, UsageError
from forensics.formats import checkpoint_summary, short_time
from forensics.formats.table import Column, gap_line, prose, terminal_width
from forensics.formats.table import render_table as render_table_rows
from forensics.identifiers import FORMS, parse_execution

if TYPE_CHECKING:  # flytekit is heavy; `--help` and `--version` must stay fast
    from forensics.timeline import Timeline

EXECUTION_FORMS = textwrap.fill(f"EXECUTION forms: {FORMS}.", 96, break_on_hyphens=False)

EXAMPLES = f"""
Examples:

  elastic-audit show gs1:production:azvg5f9v9974m78fvlf7

  elastic-audit show https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7 -o json

{EXECUTION_FORMS}
Exit codes: 0 shown, 3 a source failed (the timeline is incomplete), 2 bad input or unknown execution.
"""


SHOW_COLUMNS = (
    Column("time (UTC)"),
    Column("source"),
    Column("attempt"),
    Column("event", wrap=True),
)


def render_table(tl: Timeline, width: int | None = None) -> str:
    """The timeline as the shared table renderer draws it, sized to `width` (None: unbounded)."""
    ex = tl.execution
    lines = [prose(f"Execution {ex.ref} — {ex.phase} — verdict: {tl.verdict.upper()}", width)]
    rows = [(short_time(e.at), e.source, e.attempt or "", e.text) for e in tl.events]
    lines.append(render_table_rows(SHOW_COLUMNS, rows, width=width).rstrip("\n"))
    for a in tl.attempts:
        line = f"{a.attempt.ref.node_id}/{a.attempt.ref.attempt}: {a.verdict}"
        if a.reason:
            line += f" ({a.reason})"
        if a.checkpoint is not None:
            line += f"; checkpoint {checkpoint_summary(a.checkpoint)}"
        lines.append(prose(line, width))
    lines += [prose(gap_line(g), width) for g in tl.gaps]
    return "\n".join(lines) + "\n"


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
    output: str = TableOrJsonOpt,
    verbose: int = VerboseOpt,
) -> None:
    """The evidence timeline of one execution, oldest first, and the verdict per attempt."""
    setup_logging(verbose)
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    ref = parse_execution(execution, project=project, domain=domain)
    settings = settings_from_flags(
        config=config,
        loki_url=loki_url,
        flyte_config=flyte_config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    from forensics.sources import Sources
    from forensics.timeline import build_timeline

    with Sources.from_settings(settings) as sources:
        try:
            tl = build_timeline(sources, ref)
        except NotFoundError:
            raise UsageError(f"execution {ref} not found in Flyte Admin") from None
    report_failures(tl.gaps, settings, source_endpoints(sources))
    emit(
        json.dumps(tl.as_dict(), indent=2)
        if fmt is OutputFormat.json
        else render_table(tl, terminal_width())
    )
    raise typer.Exit(0 if tl.complete else 3)
