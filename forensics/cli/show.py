"""`elastic-audit show EXECUTION`: the evidence timeline of one execution."""

from __future__ import annotations

import textwrap

import typer

from forensics.cli.common import emit, report_failures, source_endpoints
from forensics.cli.display import render
from forensics.cli.options import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    SourceFlags,
    VerboseOpt,
    check_output,
    default_output,
    output_option,
    value_option,
)
from forensics.cli.verbosity import setup_logging
from forensics.errors import NotFoundError, UsageError
from forensics.formats import SHOW_FORMATS
from forensics.identifiers import FORMS, parse_execution

EXECUTION_FORMS = textwrap.fill(f"EXECUTION forms: {FORMS}.", 96, break_on_hyphens=False)

EXAMPLES = f"""
Examples:

  elastic-audit show gs1:production:azvg5f9v9974m78fvlf7

  elastic-audit show https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7 -o json

  elastic-audit show gs1:production:azvg5f9v9974m78fvlf7 -o html > azvg5f9v9974m78fvlf7.html

{EXECUTION_FORMS}
Exit codes: 0 shown, 3 a source failed (the timeline is incomplete), 2 bad input or unknown execution.
"""


def show(
    execution: str = typer.Argument(
        ..., metavar="EXECUTION", help="The execution (see forms below)."
    ),
    project: str | None = value_option(
        "--project", "PROJECT", "Project of a bare execution name.", "-p"
    ),
    domain: str | None = value_option(
        "--domain", "DOMAIN", "Domain of a bare execution name.", "-d"
    ),
    loki_url: str | None = LokiUrlOpt,
    flyte_config: str | None = FlyteConfigOpt,
    config: str | None = ConfigOpt,
    checkpoint_input: str | None = CheckpointInputOpt,
    checkpoint_template: str | None = CheckpointTemplateOpt,
    output: str | None = output_option(*SHOW_FORMATS),
    verbose: int = VerboseOpt,
) -> None:
    """The evidence timeline of one execution, oldest first, and the verdict per attempt."""
    sources = SourceFlags(
        loki_url=loki_url,
        flyte_config=flyte_config,
        config=config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    setup_logging(verbose)
    fmt = check_output(default_output(output), SHOW_FORMATS)
    ref = parse_execution(execution, project=project, domain=domain)
    settings = sources.settings()
    from forensics.cli.process import open_sources  # flytekit: not for `--help` or bad input
    from forensics.timeline import build_timeline

    with open_sources(settings) as clients:
        try:
            tl = build_timeline(clients, ref)
        except NotFoundError:
            raise UsageError(f"execution {ref} not found in Flyte Admin") from None
        endpoints = source_endpoints(clients)
    report_failures(tl.gaps, settings, endpoints)
    emit(render(tl, fmt))
    raise typer.Exit(0 if tl.complete else 3)
