"""Guard mode on Flyte's own scheduler: a task running the guard scan, and a cron launch plan.

Register it with the image built from deploy/Dockerfile (which has this tool installed):
    cd deploy/flyte
    pyflyte --pkgs guard_workflow package --image registry.example.com/elastic-audit:0.1.0 \
        --output guard.tgz && flytectl register files guard.tgz -p ops -d production \
        --version v1 --archive
    flytectl update launchplan -p ops -d production elastic_audit_guard --version v1 --activate
The webhook URL comes from the Flyte secret `elastic-audit/notify-url` (never an input: inputs
are shown in the console); S3, Loki and Admin credentials from the task's service account and
environment as for any other run of the CLI.
"""

from __future__ import annotations

import sys

from flytekit import CronSchedule, LaunchPlan, Resources, Secret, current_context, task, workflow

IMAGE = "registry.example.com/elastic-audit:0.1.0"
NOTIFY_SECRET = Secret(
    group="elastic-audit", key="notify-url", mount_requirement=Secret.MountType.ENV_VAR
)


def guard_run(
    state: str,
    config: str,
    overlap: str,
    notify_format: str,
    pushgateway: str,
    since: str,
    notify_url: str | None,
) -> int:
    """One guard run (`since` empty: from the state), as `elastic-audit scan --state ... -o json`
    runs it: the JSON report on stdout, deliveries and errors on stderr, the scan's exit code
    (docs/exit-codes.md; 3 also for an undelivered notification). `notify_url` is the webhook,
    a secret: it is masked in every log line and never leaves this call."""
    from forensics.cli.exits import for_error, for_scan
    from forensics.cli.guard import emit_outcome, guard_options, say_delivery, say_failures
    from forensics.cli.process import open_sources
    from forensics.cli.verbosity import setup_logging
    from forensics.config import load_settings
    from forensics.errors import ElasticAuditError
    from forensics.guard import run_guard, scanner
    from forensics.scan.scope import ScanScope

    setup_logging(0)
    try:
        options = guard_options(
            state=state,
            overlap=overlap,
            reset_state=False,
            notify=[notify_url] if notify_url else [],
            notify_format=notify_format,
            metrics_file=None,
            pushgateway=pushgateway or None,
        )
        settings = load_settings(config=config or None)
        scope = ScanScope((), ())
        outcome = run_guard(
            settings,
            scope,
            since=since or None,
            options=options,
            scan=scanner(settings, scope, sources=open_sources),
            on_delivery=say_delivery,
        )
    except ElasticAuditError as e:
        print(f"elastic-audit: error: {e}", file=sys.stderr)
        return for_error(e)
    say_failures(outcome)
    emit_outcome(outcome, "json", None)
    return for_scan(outcome.report, undelivered=not outcome.delivered)


def state_exists(state: str) -> bool:
    """Whether an earlier run left a state (any content: a foreign one is refused by the scan)."""
    from forensics.guard.state import open_store

    data, _ = open_store(state).read_raw()
    return data is not None


@task(
    container_image=IMAGE,
    requests=Resources(cpu="250m", mem="512Mi"),
    secret_requests=[NOTIFY_SECRET],
    cache=False,
    retries=0,  # the next scheduled run rescans the gap; a retry would only race it
)
def guard_scan(
    state: str,
    config: str = "",
    overlap: str = "2h",
    notify_format: str = "slack",
    pushgateway: str = "",
    first_since: str = "",
) -> int:
    """One guard run: returns the scan's exit code (0 complete, nothing found; 1 findings); an incomplete
    scan (3) or a usage/state error (2) fails the task, so the execution shows it."""
    try:
        url = current_context().secrets.get("elastic-audit", "notify-url")
    except ValueError:  # no such secret mounted: run without notifications
        url = None
    # `first_since` only starts a new state; every later run continues from the state.
    since = "" if state_exists(state) else first_since
    code = guard_run(
        state, config, overlap, notify_format, pushgateway, since, url.strip() if url else None
    )
    if code not in (0, 1):
        raise RuntimeError(f"elastic-audit scan exited {code} (see the task log)")
    return code


@workflow
def guard(
    state: str,
    config: str = "",
    overlap: str = "2h",
    notify_format: str = "slack",
    pushgateway: str = "",
    first_since: str = "1d",
) -> int:
    return guard_scan(
        state=state,
        config=config,
        overlap=overlap,
        notify_format=notify_format,
        pushgateway=pushgateway,
        first_since=first_since,
    )


elastic_audit_guard = LaunchPlan.get_or_create(
    guard,
    name="elastic_audit_guard",
    schedule=CronSchedule(schedule="*/30 * * * *"),
    fixed_inputs={
        "state": "s3://exa-ops/elastic-audit/guard-state.json",
        "pushgateway": "http://prometheus-pushgateway.monitoring.svc:9091",
    },
)
