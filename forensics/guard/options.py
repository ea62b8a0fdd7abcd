"""The guard flags, shared by `scan` and `watch` (typer declarations, checked by guard_options)."""

from __future__ import annotations

import typer

StateOpt = typer.Option(
    None,
    "--state",
    metavar="FILE|s3://BUCKET/KEY",
    help="Guard mode: remember scanned windows, open gaps and notified findings here; without --since the window continues from it.",
    show_default=False,
)
OverlapOpt = typer.Option(
    "2h",
    "--overlap",
    metavar="DURATION",
    help="Rescan this much before the state's last window end (late logs, attempts finishing after their signal).",
)
ResetStateOpt = typer.Option(
    False, "--reset-state", help="Start the state over (needs --since), on purpose."
)
NotifyOpt = typer.Option(
    [],
    "--notify",
    metavar="URL",
    envvar="ELASTIC_AUDIT_NOTIFY",
    help="POST new findings, pending attempts and gaps here once per run (repeatable; else ELASTIC_AUDIT_NOTIFY, URLs separated by spaces, so the secret stays off the command line; only scheme and host are ever printed).",
    show_default=False,
)
NotifyFormatOpt = typer.Option(
    "json", "--notify-format", metavar="json|slack", help="Webhook payload: json or slack."
)
MetricsFileOpt = typer.Option(
    None,
    "--metrics-file",
    metavar="PATH",
    help="Write Prometheus metrics here atomically (node-exporter textfile collector).",
    show_default=False,
)
PushgatewayOpt = typer.Option(
    None,
    "--pushgateway",
    metavar="URL",
    help="Push the same metrics to this Prometheus Pushgateway (job elastic-audit).",
    show_default=False,
)
