"""`elastic-audit watch`: guard mode in one long-running process that serves /metrics.

What a run does, its state, notifications and metrics: docs/deployment.md.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import typer

from forensics.cli import exits
from forensics.cli.common import emit
from forensics.cli.display import render
from forensics.cli.errors import message
from forensics.cli.guard import cli_scanner, installed, say_delivery, say_failures
from forensics.cli.options import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    DomainOpt,
    FlyteConfigOpt,
    GuardFlags,
    LokiUrlOpt,
    MetricsFileOpt,
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
    value_option,
)
from forensics.cli.verbosity import setup_logging
from forensics.config import Settings
from forensics.errors import ConfigError, ElasticAuditError, UsageError
from forensics.formats import OutputFormat, renderers
from forensics.guard.metrics import GuardCollector, registry_for
from forensics.guard.run import GuardOptions, Signals, StateConflict, Terminated, run_once
from forensics.model import Report, Window
from forensics.timeutil import parse_duration

if TYPE_CHECKING:
    from collections.abc import Callable

    from forensics.scan.scope import ScanScope

EXAMPLES = """
Examples:

  elastic-audit watch --every 30m --state s3://ops/elastic-audit/state.json --since 1d --metrics-port 9464

  ELASTIC_AUDIT_NOTIFY=https://hooks.slack.com/services/... elastic-audit watch --every 15m --state /var/lib/elastic-audit/state.json --notify-format slack

Each run scans from the state's last window end minus --overlap (and any open gap) to now;
--since sets where the very first run starts. One line per run on stdout. SIGTERM lets a state
write in progress finish, then exits 0; a scan in progress is abandoned (the state is as before).
"""


def watch(
    every: str = typer.Option(
        "30m", "--every", metavar="DURATION", help="Time between the starts of two runs."
    ),
    metrics_port: int | None = value_option(
        "--metrics-port",
        "N",
        "Serve /metrics on this port, all interfaces unless --metrics-address (0: a free one, "
        "printed on stderr).",
        min=0,
        max=65535,
    ),
    metrics_address: str | None = value_option(
        "--metrics-address",
        "HOST",
        "Serve /metrics on this interface only (an address or host name: 127.0.0.1, ::1, a "
        "pod IP) instead of all of them; with --metrics-port.",
    ),
    since: str | None = value_option(
        "--since",
        "DURATION|TIME",
        "Where the first run starts when the state is new (duration or time).",
    ),
    project: list[str] = ProjectOpt,
    domain: list[str] = DomainOpt,
    loki_url: str | None = LokiUrlOpt,
    flyte_config: str | None = FlyteConfigOpt,
    config: str | None = ConfigOpt,
    checkpoint_input: str | None = CheckpointInputOpt,
    checkpoint_template: str | None = CheckpointTemplateOpt,
    workers: int | None = WorkersOpt,
    verbose: int = VerboseOpt,
    state: str | None = StateOpt,
    overlap: str = OverlapOpt,
    reset_state: bool = ResetStateOpt,
    notify: list[str] = NotifyOpt,
    notify_format: str = NotifyFormatOpt,
    metrics_file: str | None = MetricsFileOpt,
    pushgateway: str | None = PushgatewayOpt,
) -> None:
    """Run the guard scan every DURATION with a state, notifying and serving metrics."""
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
    try:
        period = parse_duration(every) if every else None
    except ValueError as e:
        raise UsageError(f"--every: {e}") from None
    if period is None or period.total_seconds() < 1:
        raise UsageError(f"--every {every!r}: a duration of at least 1s (30m, 1h)")
    scope.check_names()
    if not guard.state:
        raise UsageError("watch needs --state FILE|s3://BUCKET/KEY (its memory across runs)")
    if metrics_address is not None and metrics_port is None:
        raise UsageError("--metrics-address needs --metrics-port (where /metrics is served)")
    if metrics_address is not None and not metrics_address.strip():
        raise UsageError("--metrics-address: empty (an address or host name, e.g. 127.0.0.1)")
    options = guard.options()
    settings = sources.settings(workers)
    scan_scope = scope.scope(settings)
    _check_first_run(scan_scope, options, since)
    metrics = None if metrics_port is None else (metrics_address or ALL_INTERFACES, metrics_port)
    raise typer.Exit(_loop(settings, scan_scope, options, since, period, metrics))


def _check_first_run(scope: ScanScope, options: GuardOptions, since: str | None) -> None:
    """Every configuration error exits 2 here, before /metrics is served: a watch that serves
    metrics but can never scan looks healthy and guards nothing (docs/exit-codes.md)."""
    from forensics.guard.items import read_state
    from forensics.guard.state import open_store
    from forensics.timeutil import parse_window

    if since is not None:
        parse_window(since, None)  # a bad or ambiguous --since: exit 2 now
        return
    if options.reset_state:
        raise UsageError("--reset-state needs --since (where the new state's first run starts)")
    assert options.state is not None
    scope_doc = {"projects": sorted(scope.projects), "domains": sorted(scope.domains)}
    try:
        state, _ = read_state(open_store(options.state), False, scope_doc)
    except ConfigError:
        raise
    except ElasticAuditError:
        return  # the state's store is down: not configuration; each run retries and says so
    if state is None or state.scanned_until is None:
        raise UsageError(
            f"--since is required for the first run: state {options.state} does not exist yet"
        )


def _loop(
    settings: Settings,
    scope: ScanScope,
    options: GuardOptions,
    since: str | None,
    period: timedelta,
    metrics: tuple[str, int] | None,
) -> int:
    from forensics.formats.watch import WatchRun

    # Load the line's renderer now: a SIGTERM while it is imported after a run would lose the line.
    renderers(WatchRun)
    collector = GuardCollector()
    if metrics is not None:  # before the first scan: an address it cannot serve on is exit 2
        _serve_metrics(collector, *metrics)
    signals = Signals()
    scan = cli_scanner(settings, scope, True)
    run = 0
    try:
        with installed(signals):
            while True:
                started = time.monotonic()
                run += 1
                options = _run(run, settings, scope, options, since, scan, collector, signals)
                time.sleep(max(0.0, period.total_seconds() - (time.monotonic() - started)))
    except Terminated:
        print("elastic-audit: terminated; exiting", file=sys.stderr, flush=True)
        return 0


# prometheus_client's own default (exposition.py, `start_wsgi_server(port, addr='0.0.0.0', ...)`,
# `start_http_server = start_wsgi_server`, prometheus_client 0.26.0): every IPv4 interface.
ALL_INTERFACES = "0.0.0.0"


def _serve_metrics(collector: GuardCollector, address: str, port: int) -> None:
    """/metrics on `address`:`port` (prometheus_client picks the address family: `::1` is
    IPv6); an address or port it cannot bind is a usage error, before anything is scanned."""
    from prometheus_client import start_http_server

    try:
        server, _ = start_http_server(port, addr=address, registry=registry_for(collector))
    except OSError as e:  # socket.gaierror included: a name that does not resolve
        where = "" if address == ALL_INTERFACES else f"--metrics-address {address} "
        reason = e.strerror or str(e)
        raise UsageError(
            f"{where}--metrics-port {port}: cannot serve /metrics ({reason})"
        ) from None
    on = "" if address == ALL_INTERFACES else f"{address} "
    print(
        f"elastic-audit: serving /metrics on {on}port {server.server_port}",
        file=sys.stderr,
        flush=True,
    )


def _run(
    number: int,
    settings: Settings,
    scope: ScanScope,
    options: GuardOptions,
    since: str | None,
    scan: Callable[[Window], Report],
    collector: GuardCollector,
    signals: Signals,
) -> GuardOptions:
    """One guard run and its line on stdout; the options for the next run."""
    from forensics.formats.watch import WatchRun

    try:
        out = run_once(
            settings,
            scope,
            since=since,
            until=None,
            options=options,
            scan=scan,
            collector=collector,
            signals=signals,
            watch=True,
            on_delivery=say_delivery,
        )
        say_failures(out)
        code = exits.for_scan(out.report, undelivered=not out.delivered)
        emit(render(WatchRun(number, datetime.now().astimezone(), out, code), OutputFormat.table))
        return replace(options, reset_state=False)  # only the first run resets
    except StateConflict as e:
        print(f"elastic-audit: error: {message(e)}", file=sys.stderr, flush=True)
    except (ConfigError, UsageError):
        raise  # a foreign state, a bad config or a missing --since does not heal by waiting
    except ElasticAuditError as e:  # a source down: the next run retries
        print(f"elastic-audit: error: {message(e)}", file=sys.stderr, flush=True)
    return options
