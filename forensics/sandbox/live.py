"""A new silent green in a RUNNING sandbox: what `demo --add-incident` and the guard tests add
between two guard runs (docs/commands.md, demo)."""

from __future__ import annotations

from datetime import datetime, timedelta

from forensics.sandbox.incident import MODELS_BUCKET, ScenarioBuilder, _try
from forensics.sandbox.k8s_events import routine_events
from forensics.sandbox.stack import Sandbox


def add_incident(
    box: Sandbox, name: str, signal_at: datetime, *, project: str = "gs1", running: bool = False
) -> str:
    """An elastic attempt of execution `project:production:name` signalled at `signal_at` and
    SUCCEEDED 7 s later without outputs.pb (an empty checkpoint prefix); its logs in Loki, its
    execution in Admin. `running`: the attempt has not finished yet (a pending attempt).
    Returns the execution as `project:domain:name`."""
    b = ScenarioBuilder()
    domain = "production"
    task = b.task(project, domain, "bigmodel.train")
    ok_at = signal_at + timedelta(seconds=7)
    phase = "RUNNING" if running else "SUCCEEDED"
    ex = b.one_node(
        project,
        domain,
        name,
        phase,
        signal_at - timedelta(hours=2),
        signal_at if running else ok_at + timedelta(seconds=3),
        _try(name, 0, phase, signal_at - timedelta(hours=1), None if running else ok_at, task),
        inputs={"checkpoint_dir": f"s3://{MODELS_BUCKET}/checkpoints/{name}/"},
    )
    b.signal_pod(signal_at, f"{project}-{domain}", f"{name}-n0-0", f"{name}-n0-0")
    if not running:
        b.propeller(ok_at, ex, "n0", "python-task")
    box.admin.add_execution(ex, b.scenario.tasks)
    box.s3.add_execution(ex)  # the node's inputs.pb, as propeller writes it before the node runs
    # the cluster's events stream around it, as a real one holds (sandbox/k8s_events.py), and
    # the other pods' lines of its namespace: without them a shard boundary inside the hour the
    # attempt ran before its signal left a shard with no task log at all (`logs_absent`)
    start = signal_at - timedelta(hours=2)
    b.routine_logs(start, start + timedelta(hours=3))
    b.scenario.log_lines += routine_events(
        [f"{project}-{domain}"], start, start + timedelta(hours=3), timedelta(minutes=10)
    )
    box.loki.add_lines(b.scenario.log_lines)
    return f"{project}:{domain}:{name}"
