"""A backfill on Flyte itself: scans of (project, domain, time slice) mapped over Flyte's map task,
each slice one library call, the slice reports merged into one (docs/deployment.md, "Backfill").

Register it with the image built from deploy/Dockerfile (which has this tool installed):
    cd deploy/flyte
    pyflyte --pkgs backfill_workflow package --image registry.example.com/elastic-audit:0.1.0 \
        --output backfill.tgz && flytectl register files backfill.tgz -p ops -d production \
        --version v1 --archive
then launch `backfill` with `since`/`until` (RFC 3339 or dates), `slice_days`, and optionally the
projects and domains (empty: every project Admin knows, as one slice per time slice). Loki, Admin
and S3 are reached as by any other run of the CLI: the task's service account and environment,
`config` naming the config file in the image or a mounted volume.

The result is the merged report (docs/report.md) as JSON: the same document one `scan` of the
whole window prints. Each slice is an ordinary scan, so its own bounds (Loki shards, `workers`)
apply within its pod; slices run at most `SLICES_AT_ONCE` at a time (the map task's concurrency), so Loki and
Admin see at most `SLICES_AT_ONCE × workers` requests at once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from flytekit import Resources, map_task, task, workflow

IMAGE = "registry.example.com/elastic-audit:0.1.0"
SLICES_AT_ONCE = 4


def slices(
    since: str, until: str, slice_days: int, projects: list[str], domains: list[str], config: str
) -> list[str]:
    """One JSON spec per (project, domain, time slice): the window cut at `slice_days` days,
    each project and domain given (none: the whole scope in each time slice)."""
    from forensics.timeutil import parse_time

    start, end = parse_time(since, name="since"), parse_time(until, name="until")
    if not start < end:
        raise ValueError(f"since ({since}) must be before until ({until})")
    if slice_days < 1:
        raise ValueError("slice_days must be at least 1")
    step = timedelta(days=slice_days)
    cuts: list[tuple[datetime, datetime]] = []
    t = start
    while t < end:
        cuts.append((t, min(t + step, end)))
        t += step
    scopes = [(p, d) for p in projects or [""] for d in domains or [""]]
    return [
        json.dumps(
            {
                "start": s.isoformat(),
                "end": e.isoformat(),
                "project": p,
                "domain": d,
                "config": config,
            }
        )
        for s, e in cuts
        for p, d in scopes
    ]


def scan_one(spec: str) -> str:
    """One slice: the library's scan of its window and scope, its report as JSON."""
    from forensics.config import load_settings
    from forensics.model import Window
    from forensics.scan.run import scan
    from forensics.scan.scope import ScanScope
    from forensics.sources import Sources

    s = json.loads(spec)
    window = Window(datetime.fromisoformat(s["start"]), datetime.fromisoformat(s["end"]))
    scope = ScanScope(
        projects=(s["project"],) if s["project"] else (),
        domains=(s["domain"],) if s["domain"] else (),
    )
    settings = load_settings(config=s["config"] or None)
    with Sources.from_settings(settings) as sources:
        report = scan(sources, window, scope)
    return json.dumps(report.as_dict())


@task(container_image=IMAGE, requests=Resources(cpu="100m", mem="256Mi"), cache=False)
def plan_slices(
    since: str, until: str, slice_days: int, projects: list[str], domains: list[str], config: str
) -> list[str]:
    return slices(since, until, slice_days, projects, domains, config)


@task(
    container_image=IMAGE,
    requests=Resources(cpu="1", mem="1Gi"),
    cache=False,
    retries=2,  # a slice is idempotent: a retry rescans it
)
def scan_slice(spec: str) -> str:
    return scan_one(spec)


@task(container_image=IMAGE, requests=Resources(cpu="250m", mem="512Mi"), cache=False)
def merge_slices(reports: list[str]) -> str:
    """The slice reports merged (forensics.merge: findings once, summaries added, gaps kept)."""
    from forensics.merge import merge_reports

    return json.dumps(merge_reports(json.loads(r) for r in reports), indent=2)


@workflow
def backfill(
    since: str,
    until: str,
    slice_days: int = 7,
    projects: list[str] = [],  # noqa: B006 (flytekit reads workflow defaults as literals)
    domains: list[str] = [],  # noqa: B006
    config: str = "",
) -> str:
    specs = plan_slices(
        since=since,
        until=until,
        slice_days=slice_days,
        projects=projects,
        domains=domains,
        config=config,
    )
    reports = map_task(scan_slice, concurrency=SLICES_AT_ONCE)(spec=specs)
    return merge_slices(reports=reports)
