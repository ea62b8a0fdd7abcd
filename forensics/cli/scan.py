"""`elastic-audit scan`: every silently-green elastic attempt in a window."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from forensics.cli import exits
from forensics.cli.common import (
    check_writable_file,
    emit,
    report_failures,
    source_endpoints,
    write_atomically,
)
from forensics.cli.display import render
from forensics.cli.options import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    DomainOpt,
    FlyteConfigOpt,
    GuardFlags,
    LokiUrlOpt,
    MetricsFileOpt,
    NoProgressOpt,
    NotifyFormatOpt,
    NotifyOpt,
    OverlapOpt,
    ProjectOpt,
    PushgatewayOpt,
    ResetStateOpt,
    ScopeFlags,
    SourceFlags,
    StateOpt,
    VerboseOpt,
    WorkersOpt,
    check_output,
    default_output,
    flag_option,
    output_option,
    value_option,
)
from forensics.cli.page import check_page_target
from forensics.cli.verbosity import setup_logging
from forensics.config import Settings
from forensics.errors import OutputError, UsageError
from forensics.formats import SCAN_FORMATS, OutputFormat
from forensics.model import Window
from forensics.timeutil import parse_window

if TYPE_CHECKING:  # flytekit is heavy; `--help` and `--version` must stay fast
    from forensics.scan.scope import ScanScope

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


def scan(
    since: str | None = value_option(
        "--since",
        "DURATION|TIME",
        "Duration back from --until (90m, 36h, 7d, 2w) or a time (RFC 3339, or a date = midnight UTC); required unless --state holds an earlier run.",
    ),
    until: str | None = value_option(
        "--until", "TIME", "End of the window, exclusive (default now)."
    ),
    project: list[str] = ProjectOpt,
    domain: list[str] = DomainOpt,
    loki_url: str | None = LokiUrlOpt,
    flyte_config: str | None = FlyteConfigOpt,
    config: str | None = ConfigOpt,
    checkpoint_input: str | None = CheckpointInputOpt,
    checkpoint_template: str | None = CheckpointTemplateOpt,
    output: str | None = output_option(*SCAN_FORMATS),
    report: str | None = value_option(
        "--report", "FILE", "Also write the JSON report to FILE (atomically)."
    ),
    report_html: str | None = value_option(
        "--report-html",
        "FILE|s3://BUCKET/KEY",
        "Also write the incident page (one self-contained HTML file) there; an s3:// target is uploaded and guard notifications link to it.",
    ),
    workers: int | None = WorkersOpt,
    exit_zero: bool = flag_option(
        "--exit-zero", help="Exit 0 instead of 1 when findings exist (3 for incomplete stays)."
    ),
    no_progress: bool = NoProgressOpt,
    verbose: int = VerboseOpt,
    state: str | None = StateOpt,
    overlap: str = OverlapOpt,
    reset_state: bool = ResetStateOpt,
    notify: list[str] = NotifyOpt,
    notify_format: str = NotifyFormatOpt,
    metrics_file: str | None = MetricsFileOpt,
    pushgateway: str | None = PushgatewayOpt,
) -> None:
    """Find task attempts that got a death signal and still ended SUCCEEDED without outputs.pb."""
    scope = ScopeFlags(project=project, domain=domain)
    sources = SourceFlags(
        loki_url=loki_url,
        flyte_config=flyte_config,
        config=config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    guard = GuardFlags(
        state=state,
        overlap=overlap,
        reset_state=reset_state,
        notify=notify,
        notify_format=notify_format,
        metrics_file=metrics_file,
        pushgateway=pushgateway,
    )
    setup_logging(verbose)
    fmt = check_output(default_output(output), SCAN_FORMATS)
    options = guard.options()
    window = None if options.active else _window(since, until)
    scope.check_names()
    if report is not None:
        check_writable_file(report, "--report")  # before the scan, not after minutes of it
    if report_html is not None:
        check_page_target(report_html)
    settings = sources.settings(workers)
    scan_scope = scope.scope(settings)
    if options.active:  # the same scan, windowed by the state, then notify and metrics
        from forensics.cli.guard import scan_command

        raise typer.Exit(
            scan_command(
                settings,
                scan_scope,
                since=since,
                until=until,
                options=options,
                fmt=fmt.value,
                report_path=report,
                report_html=report_html,
                exit_zero=exit_zero,
                no_progress=no_progress,
            )
        )
    raise typer.Exit(
        _scan_once(settings, scan_scope, window, fmt, (report, report_html), exit_zero, no_progress)
    )


def _window(since: str | None, until: str | None) -> Window:
    if since is None:
        raise UsageError("--since is required (or --state with an earlier run's state)")
    return parse_window(since, until)


def _scan_once(
    settings: Settings,
    scope: ScanScope,
    window: Window,
    fmt: OutputFormat,
    reports: tuple[str | None, str | None],
    exit_zero: bool,
    no_progress: bool,
) -> int:
    """One scan of `window`: the report on stdout (and in --report, the page in --report-html),
    the exit code to leave with."""
    from forensics.cli.process import open_sources
    from forensics.cli.progress import Progress
    from forensics.page_publish import PageNotWritten, publish_page
    from forensics.scan.run import scan

    report, report_html = reports
    page = None
    # A file that cannot be written after the scan (made read-only or immutable meanwhile) does
    # not lose the result: it still goes to stdout, and the error follows (exit 2).
    unwritten: list[OutputError] = []
    with Progress.for_terminal(no_progress) as progress, open_sources(settings) as sources:
        result = scan(sources, window, scope, progress=progress)
        if fmt is OutputFormat.html or report_html:
            try:
                page, _ = publish_page(sources, result, report_html)
            except PageNotWritten as e:
                page = e.page
                unwritten.append(OutputError(f"--report-html {e.path}", e.reason))
        endpoints = source_endpoints(sources)
    report_failures([*result.gaps, *(page.gaps if page else ())], settings, endpoints)
    if report:
        try:
            write_atomically(report, render(result, OutputFormat.json))
        except OutputError as e:
            unwritten.append(OutputError(f"--report {e.path}", e.reason))
    emit(render(page if fmt is OutputFormat.html else result, fmt))
    if unwritten:
        first = unwritten[0]
        raise OutputError(first.path, f"{first.reason}; the result went to standard output only")
    incomplete = page is not None and bool(page.gaps)
    return exits.for_status(result.status, exit_zero=exit_zero, incomplete=incomplete)
