"""`elastic-audit scan`: every silently-green elastic attempt in a window."""

from __future__ import annotations

import typer

from forensics.cli import REPORT_FORMATS, app, check_output, default_output
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
    check_domains,
    check_scope_names,
    check_writable_file,
    emit,
    report_failures,
    settings_from_flags,
    setup_logging,
    source_endpoints,
    write_atomically,
)
from forensics.errors import UsageError
from forensics.formats import render
from forensics.guard.options import (
    MetricsFileOpt,
    NotifyFormatOpt,
    NotifyOpt,
    OverlapOpt,
    PushgatewayOpt,
    ResetStateOpt,
    StateOpt,
)
from forensics.guard.run import guard_options
from forensics.timeutil import parse_window

EXAMPLES = """
Examples:

  elastic-audit scan --since 7d

  elastic-audit scan --since 2026-09-04 --until 2026-09-11 --project gs1 -o markdown

  elastic-audit scan --since 36h -o json --report incident.json --exit-zero

  ELASTIC_AUDIT_NOTIFY=https://hooks.slack.com/services/... \
  elastic-audit scan --state s3://ops/elastic-audit/state.json --notify-format slack --metrics-file /var/lib/node-exporter/elastic-audit.prom

Exit codes: 0 complete and nothing found, 1 complete with findings, pending attempts (signalled,
not finished yet: rescan) or signalled Flyte pods that resolve to no attempt (a configuration
problem), 3 incomplete (a source failed for part of the window; `gaps` says where), 2 usage or
configuration error.
"""


@app.command(epilog=EXAMPLES)
def scan(
    since: str = typer.Option(
        None,
        "--since",
        help="Duration back from --until (90m, 36h, 7d, 2w) or a time (RFC 3339, or a date = midnight UTC); required unless --state holds an earlier run.",
        show_default=False,
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
    output: str = OutputOpt,
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
    verbose: int = VerboseOpt,
    state: str = StateOpt,
    overlap: str = OverlapOpt,
    reset_state: bool = ResetStateOpt,
    notify: list[str] = NotifyOpt,
    notify_format: str = NotifyFormatOpt,
    metrics_file: str = MetricsFileOpt,
    pushgateway: str = PushgatewayOpt,
) -> None:
    """Find task attempts that got a death signal and still ended SUCCEEDED without outputs.pb."""
    setup_logging(verbose)
    fmt = check_output(default_output(output), REPORT_FORMATS)
    guard = guard_options(
        state=state,
        overlap=overlap,
        reset_state=reset_state,
        notify=notify,
        notify_format=notify_format,
        metrics_file=metrics_file,
        pushgateway=pushgateway,
    )
    if metrics_file is not None:
        check_writable_file(metrics_file, "--metrics-file")
    if not guard.active:
        if since is None:
            raise UsageError("--since is required (or --state with an earlier run's state)")
        window = parse_window(since, until)
    check_scope_names(project, domain)
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
    check_domains(domain, settings)

    from forensics.progress import Progress
    from forensics.scan.run import scan
    from forensics.scan.scope import ScanScope
    from forensics.sources import Sources

    if guard.active:  # SPEC §9: the same scan, windowed by the state, then notify and metrics
        from forensics.guard import scan_command

        raise typer.Exit(
            scan_command(
                settings,
                ScanScope(tuple(project), tuple(domain)),
                since=since,
                until=until,
                options=guard,
                fmt=fmt.value,
                report_path=report,
                exit_zero=exit_zero,
                no_progress=no_progress,
            )
        )
    with Progress.for_terminal(no_progress) as progress, Sources.from_settings(settings) as sources:
        result = scan(sources, window, ScanScope(tuple(project), tuple(domain)), progress=progress)
    report_failures(result.gaps, settings, source_endpoints(sources))
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
