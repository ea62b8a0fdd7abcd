"""`elastic-audit watch`: guard mode in one long-running process that serves /metrics (SPEC §9)."""

from __future__ import annotations

import sys
import time
from datetime import datetime

import typer

from forensics.cli import app
from forensics.commands.common import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    VerboseOpt,
    WorkersOpt,
    check_domains,
    check_scope_names,
    check_writable_file,
    settings_from_flags,
    setup_logging,
)
from forensics.errors import ConfigError, ElasticAuditError, UsageError
from forensics.guard.options import (
    MetricsFileOpt,
    NotifyFormatOpt,
    NotifyOpt,
    OverlapOpt,
    PushgatewayOpt,
    ResetStateOpt,
    StateOpt,
)
from forensics.timeutil import parse_duration

EXAMPLES = """
Examples:

  elastic-audit watch --every 30m --state s3://ops/elastic-audit/state.json --since 1d --metrics-port 9464

  ELASTIC_AUDIT_NOTIFY=https://hooks.slack.com/services/... elastic-audit watch --every 15m --state /var/lib/elastic-audit/state.json --notify-format slack

Each run scans from the state's last window end minus --overlap (and any open gap) to now;
--since sets where the very first run starts. One line per run on stdout. SIGTERM lets a state
write in progress finish, then exits 0; a scan in progress is abandoned (the state is as before).
"""


@app.command(epilog=EXAMPLES)
def watch(
    every: str = typer.Option(
        "30m", "--every", metavar="DURATION", help="Time between the starts of two runs."
    ),
    metrics_port: int = typer.Option(
        None,
        "--metrics-port",
        metavar="N",
        min=0,
        max=65535,
        help="Serve /metrics on this port, all interfaces (0: a free one, printed on stderr).",
        show_default=False,
    ),
    since: str = typer.Option(
        None,
        "--since",
        metavar="DURATION|TIME",
        help="Where the first run starts when the state is new (duration or time).",
        show_default=False,
    ),
    project: list[str] = typer.Option(
        [], "--project", metavar="PROJECT", help="Only this project (repeatable)."
    ),
    domain: list[str] = typer.Option(
        [], "--domain", metavar="DOMAIN", help="Only this domain (repeatable)."
    ),
    loki_url: str = LokiUrlOpt,
    flyte_config: str = FlyteConfigOpt,
    config: str = ConfigOpt,
    checkpoint_input: str = CheckpointInputOpt,
    checkpoint_template: str = CheckpointTemplateOpt,
    workers: int = WorkersOpt,
    verbose: int = VerboseOpt,
    state: str = StateOpt,
    overlap: str = OverlapOpt,
    reset_state: bool = ResetStateOpt,
    notify: list[str] = NotifyOpt,
    notify_format: str = NotifyFormatOpt,
    metrics_file: str = MetricsFileOpt,
    pushgateway: str = PushgatewayOpt,
) -> None:
    """Run the guard scan every DURATION with a state, notifying and serving metrics."""
    setup_logging(verbose)
    period = parse_duration(every) if every else None
    if period is None or period.total_seconds() < 1:
        raise UsageError(f"--every {every!r}: a duration of at least 1s (30m, 1h)")
    check_scope_names(project, domain)
    if metrics_file is not None:
        check_writable_file(metrics_file, "--metrics-file")
    if not state:
        raise UsageError("watch needs --state FILE|s3://BUCKET/KEY (its memory across runs)")
    from forensics.guard.run import guard_options

    options = guard_options(
        state=state,
        overlap=overlap,
        reset_state=reset_state,
        notify=notify,
        notify_format=notify_format,
        metrics_file=metrics_file,
        pushgateway=pushgateway,
    )
    settings = settings_from_flags(
        config=config,
        loki_url=loki_url,
        flyte_config=flyte_config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
        workers=workers,
    )
    check_domains(domain, settings)
    from forensics.scan.scope import ScanScope

    raise typer.Exit(
        _loop(
            settings, ScanScope(tuple(project), tuple(domain)), options, since, period, metrics_port
        )
    )


def _loop(settings, scope, options, since, period, metrics_port) -> int:  # noqa: ANN001
    from dataclasses import replace

    from forensics.guard import _scanner
    from forensics.guard.metrics import GuardCollector, registry_for
    from forensics.guard.run import StateConflict, Terminated, _Signals, run_once

    collector = GuardCollector()
    if metrics_port is not None:
        from prometheus_client import start_http_server

        server, _ = start_http_server(metrics_port, registry=registry_for(collector))
        print(
            f"elastic-audit: serving /metrics on port {server.server_port}",
            file=sys.stderr,
            flush=True,
        )
    signals = _Signals()
    scan = _scanner(settings, scope, True)
    run = 0
    try:
        with signals.installed():
            while True:
                started = time.monotonic()
                run += 1
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
                    )
                    options = replace(options, reset_state=False)  # only the first run resets
                    _line(run, out)
                except StateConflict as e:
                    print(f"elastic-audit: error: {e}", file=sys.stderr, flush=True)
                except ConfigError:
                    raise  # a foreign state or a bad config does not heal by waiting
                except ElasticAuditError as e:  # a source down: the next run retries
                    print(f"elastic-audit: error: {e}", file=sys.stderr, flush=True)
                time.sleep(max(0.0, period.total_seconds() - (time.monotonic() - started)))
    except Terminated:
        print("elastic-audit: terminated; exiting", file=sys.stderr, flush=True)
        return 0


def _line(run: int, out) -> None:  # noqa: ANN001
    r = out.report
    new = sum(1 for f in out.report_doc["findings"] if f.get("new"))
    w = r.window.as_dict()
    print(
        f"{datetime.now().astimezone().isoformat(timespec='seconds')} run {run}: "
        f"{w['start']} – {w['end']}: {r.summary.affected} affected, {r.summary.suspected} "
        f"suspected ({new} new), {len(r.gaps)} gap(s), "
        f"{'complete' if r.complete else 'INCOMPLETE'}, exit {out.exit_code}",
        flush=True,
    )
