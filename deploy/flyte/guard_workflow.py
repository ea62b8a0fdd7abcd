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

import os

from flytekit import CronSchedule, LaunchPlan, Resources, Secret, current_context, task, workflow

IMAGE = "registry.example.com/elastic-audit:0.1.0"
NOTIFY_SECRET = Secret(
    group="elastic-audit", key="notify-url", mount_requirement=Secret.MountType.ENV_VAR
)


def guard_args(
    state: str, config: str, overlap: str, notify_format: str, pushgateway: str, since: str
) -> list[str]:
    """The `elastic-audit scan` command line of one guard run (`since` empty: from the state)."""
    args = ["scan", "--state", state, "--overlap", overlap, "--notify-format", notify_format]
    args += ["--output", "json", "--no-progress"]  # 1 (findings) is a success here too
    if config:
        args += ["--config", config]
    if pushgateway:
        args += ["--pushgateway", pushgateway]
    if since:
        args += ["--since", since]
    return args


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
    from forensics.cli import main

    try:
        url = current_context().secrets.get("elastic-audit", "notify-url")
    except ValueError:  # no such secret mounted: run without notifications
        url = None
    # The webhook URL is a secret: it reaches the scan through the environment, never its argv,
    # and only for this run (the task's process may run other code after it).
    saved = os.environ.get("ELASTIC_AUDIT_NOTIFY")
    if url:
        os.environ["ELASTIC_AUDIT_NOTIFY"] = url.strip()
    try:
        # `first_since` only starts a new state; every later run continues from the state.
        since = "" if state_exists(state) else first_since
        main(guard_args(state, config, overlap, notify_format, pushgateway, since))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        if saved is None:
            os.environ.pop("ELASTIC_AUDIT_NOTIFY", None)
        else:
            os.environ["ELASTIC_AUDIT_NOTIFY"] = saved
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
