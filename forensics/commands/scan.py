"""`elastic-audit scan`: every silently-green elastic attempt in a window."""

from __future__ import annotations

import typer

from forensics.cli import OutputFormat, app, check_output, default_output
from forensics.commands.common import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    NoProgressOpt,
    OutputOpt,
    VerboseOpt,
    WorkersOpt,
    check_writable_file,
    emit,
    settings_from_flags,
    setup_logging,
    write_atomically,
)
from forensics.config import FLYTE_NAME
from forensics.errors import ConfigError, UsageError
from forensics.formats import render
from forensics.timeutil import parse_window

EXAMPLES = """
Examples:

  elastic-audit scan --since 7d

  elastic-audit scan --since 2026-09-04 --until 2026-09-11 --project gs1 -o markdown

  elastic-audit scan --since 36h -o json --report incident.json --exit-zero

Exit codes: 0 complete and nothing found, 1 complete with findings, pending attempts (signalled,
not finished yet: rescan) or signalled Flyte pods that resolve to no attempt (a configuration
problem), 3 incomplete (a source failed for part of the window; `gaps` says where), 2 usage or
configuration error.
"""


@app.command(epilog=EXAMPLES)
def scan(
    since: str = typer.Option(
        ...,
        "--since",
        help="Duration back from --until (90m, 36h, 7d, 2w) or a time (RFC 3339, or a date = midnight UTC).",
    ),
    until: str = typer.Option(
        None, "--until", help="End of the window, exclusive (default now).", show_default=False
    ),
    project: list[str] = typer.Option([], "--project", help="Only this project (repeatable)."),
    domain: list[str] = typer.Option([], "--domain", help="Only this domain (repeatable)."),
    loki_url: str = LokiUrlOpt,
    flyte_config: str = FlyteConfigOpt,
    config: str = ConfigOpt,
    checkpoint_input: str = CheckpointInputOpt,
    checkpoint_template: str = CheckpointTemplateOpt,
    output: OutputFormat = OutputOpt,
    report: str = typer.Option(
        None,
        "--report",
        help="Also write the JSON report to FILE (atomically).",
        show_default=False,
    ),
    workers: int = WorkersOpt,
    exit_zero: bool = typer.Option(
        False,
        "--exit-zero",
        help="Exit 0 instead of 1 when findings exist (3 for incomplete stays).",
    ),
    no_progress: bool = NoProgressOpt,
    verbose: bool = VerboseOpt,
) -> None:
    """Find task attempts that got a death signal and still ended SUCCEEDED without outputs.pb."""
    setup_logging(verbose)
    fmt = check_output(default_output(output), tuple(OutputFormat))
    window = parse_window(since, until)
    for name, values in (("--project", project), ("--domain", domain)):
        for v in values:
            if not FLYTE_NAME.fullmatch(v):
                raise UsageError(
                    f"{name} {v!r}: Flyte {name[2:]} names are letters, digits, - and _"
                )
    if report is not None:
        check_writable_file(report, "--report")  # before the scan, not after minutes of it
    settings = settings_from_flags(
        config=config,
        loki_url=loki_url,
        flyte_config=flyte_config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
        workers=workers,
    )
    # Without `[flyte] domains` each project's domains come from Admin, which the scan checks
    # --project and --domain against before it reads anything (exit 2 naming the unknown one).
    if domain and settings.flyte.domains_configured:
        unknown = [d for d in domain if d not in settings.flyte.domains]
        if unknown:
            raise ConfigError(
                f"--domain {unknown[0]!r} is not one of the configured domains "
                f"({', '.join(settings.flyte.domains)}; set [flyte] domains in the config file)"
            )

    from forensics.progress import Progress
    from forensics.scan import ScanScope, scanner_for

    with Progress.for_terminal(no_progress) as progress:
        result = scanner_for(settings, progress=progress).run(
            window, ScanScope(tuple(project), tuple(domain))
        )
    if report:
        write_atomically(report, render(result, "json"))
    emit(render(result, fmt.value))
    if not result.complete:
        raise typer.Exit(3)
    # Signalled attempts still running (`pending`) and signalled Flyte pods that resolve to no
    # attempt (`unresolved`, a configuration problem) are not "nothing found" (SPEC §5): they
    # exit as findings do, so the operator rescans once they end, or fixes the configuration.
    if (result.findings or result.pending or result.unresolved) and not exit_zero:
        raise typer.Exit(1)
    raise typer.Exit(0)
