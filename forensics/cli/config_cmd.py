"""`elastic-audit config`: the effective configuration, and where each value came from.

Precedence is docs/configuration.md's: flag > environment > config file > default. Credentials
are never printed: only whether one is set, and where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.cli.common import emit
from forensics.cli.display import render
from forensics.cli.options import (
    SOURCE_FLAGS,
    SourceFlags,
    check_output,
    default_output,
    output_option,
    value_option,
)
from forensics.formats import TABLE_OR_JSON
from forensics.formats.config import ConfigView, Setting
from forensics.secrets import MASK

if TYPE_CHECKING:
    from forensics.config import Settings

EXAMPLES = """
Examples:

  elastic-audit config

  elastic-audit config --loki-url http://loki.example.com:3100 -o json

Every value the other commands would use with the same flags and environment, and where it came
from (a flag, a variable, the config file, or the default). Credentials show as *** with their
source; nothing is contacted.
"""

# LokiSettings fields read from the environment, not from [loki] (docs/configuration.md)
_LOKI_FROM_ENV = ("url", "org_id", "bearer_token", "username", "password")


def config(
    sources: SourceFlags = SOURCE_FLAGS,
    workers: int | None = value_option("--workers", "N", "Concurrent requests per source."),
    output: str | None = output_option(*TABLE_OR_JSON),
) -> None:
    """Print the effective configuration and where each value came from (secrets masked)."""
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    settings = sources.settings(workers)
    env = os.environ
    rows = [_config_file(sources, settings, env)]
    rows += _loki(sources, settings, env)
    rows += _flyte(settings, env)
    rows += _s3(settings, env)
    rows += _rest(sources, settings, workers, env)
    emit(render(ConfigView(tuple(rows)), fmt))


def _file_origin(settings: Settings, section: str, key: str) -> str | None:
    """`[section] key in FILE` when the config file sets it."""
    path = settings.config_path
    if path is None:
        return None
    from forensics.config import read_config_file

    if key in read_config_file(path).get(section, {}):
        return f"[{section}] {key} in {path}"
    return None


def _config_file(flags: SourceFlags, settings: Settings, env: Mapping[str, str]) -> Setting:
    path = settings.config_path
    if path is None:
        return Setting(
            "config file",
            "none",
            "no --config, ELASTIC_AUDIT_CONFIG, ./elastic-audit.toml or $XDG_CONFIG_HOME/elastic-audit/config.toml",
        )
    if flags.config:
        origin = "--config"
    elif env.get("ELASTIC_AUDIT_CONFIG"):
        origin = "ELASTIC_AUDIT_CONFIG"
    else:
        origin = "found by the default search"
    return Setting("config file", str(path), origin)


def _loki(flags: SourceFlags, settings: Settings, env: Mapping[str, str]) -> list[Setting]:
    loki = settings.loki
    rows = [Setting("loki.url", loki.url, settings.origins.get("loki", "").removeprefix("from "))]
    org = _file_origin(settings, "loki", "org_id")
    rows.append(
        Setting(
            "loki.org_id",
            loki.org_id or "none",
            "LOKI_ORG_ID" if env.get("LOKI_ORG_ID") else org or "default (no X-Scope-OrgID)",
        )
    )
    if loki.bearer_token:
        var = "LOKI_BEARER_TOKEN" if env.get("LOKI_BEARER_TOKEN") else "LOKI_BEARER_TOKEN_FILE"
        rows.append(Setting("loki.auth", f"bearer token {MASK}", var))
    elif loki.username:
        rows.append(
            Setting("loki.auth", f"basic {loki.username}:{MASK}", "LOKI_USERNAME, LOKI_PASSWORD")
        )
    else:
        rows.append(Setting("loki.auth", "none", "no LOKI_BEARER_TOKEN(_FILE) or LOKI_USERNAME"))
    for f in fields(loki):
        if f.name in _LOKI_FROM_ENV:
            continue
        rows.append(_field(settings, "loki", f.name, getattr(loki, f.name)))
    return rows


def _field(settings: Settings, section: str, key: str, value: Any) -> Setting:
    origin = _file_origin(settings, section, key) or "default"
    if key in ("task_selector", "propeller_selector") and origin == "default":
        origin = "default (follows the label names)"
    if hasattr(value, "total_seconds"):
        value = _duration(int(value.total_seconds()))
    elif isinstance(value, tuple):
        value = ", ".join(value)
    return Setting(f"{section}.{key}", "none" if value is None else str(value), origin)


def _duration(seconds: int) -> str:
    """`721h`, `90m`, `45s`: as the config file's durations are written."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _flyte(settings: Settings, env: Mapping[str, str]) -> list[Setting]:
    from forensics.cli.process import flytekit_imported
    from forensics.sources.admin import AdminClient

    flyte = settings.flyte
    admin = AdminClient.from_settings(flyte)  # reads flytekit's config; contacts nothing
    flytekit_imported()
    try:
        endpoint = str(admin.endpoint)
    finally:
        admin.close()
    rows = [
        Setting(
            "flyte.endpoint", endpoint, settings.origins.get("admin", "").removeprefix("from ")
        ),
        Setting(
            "flyte.config",
            flyte.config_file or "none",
            "--flyte-config or [flyte] config" if flyte.config_file else "flytekit's own search",
        ),
    ]
    secret = env.get("FLYTE_CREDENTIALS_CLIENT_SECRET") or env.get("FLYTE_CLIENT_SECRET")
    if secret:
        rows.append(Setting("flyte.client_secret", MASK, "the environment"))
    for f in fields(flyte):
        if f.name in ("config_file", "domains_configured"):
            continue
        row = _field(settings, "flyte", f.name, getattr(flyte, f.name))
        if f.name == "domains" and not flyte.domains_configured:
            row = Setting(row.key, row.value, "default (each project's domains come from Admin)")
        rows.append(row)
    return rows


def _s3(settings: Settings, env: Mapping[str, str]) -> list[Setting]:
    import boto3

    from forensics.sources.storage import ObjectStore

    store = ObjectStore.default(workers=settings.workers)
    rows = [
        Setting(
            "s3.endpoint", store.endpoint, settings.origins.get("s3", "").removeprefix("from ")
        ),
        Setting(
            "s3.region",
            store.region or "none",
            _first_var(env, "AWS_REGION", "AWS_DEFAULT_REGION") or "the AWS profile or the default",
        ),
    ]
    credentials = boto3.Session().get_credentials()
    if credentials is None:
        rows.append(Setting("s3.credentials", "none", "boto3 found none"))
    else:
        method = {"env": "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY"}.get(
            credentials.method, f"boto3's {credentials.method}"
        )
        rows.append(Setting("s3.credentials", f"access key {MASK}, secret {MASK}", method))
    return rows


def _first_var(env: Mapping[str, str], *names: str) -> str | None:
    return next((n for n in names if env.get(n)), None)


def _rest(
    flags: SourceFlags, settings: Settings, workers: int | None, env: Mapping[str, str]
) -> list[Setting]:
    from forensics.relaunch import default_audit_log

    ck = settings.checkpoints

    def row(key: str, value: object, flag: str, given: object, section: str, name: str) -> Setting:
        origin = flag if given else _file_origin(settings, section, name) or "default"
        return Setting(key, "none" if value is None else str(value), origin)

    rows = [
        row("checkpoints.input", ck.input, "--checkpoint-input", flags.checkpoint_input,
            "checkpoints", "input"),
        row("checkpoints.template", ck.template, "--checkpoint-template",
            flags.checkpoint_template, "checkpoints", "template"),
        row("workers", settings.workers, "--workers", workers is not None, "scan", "workers"),
    ]  # fmt: skip
    log = default_audit_log()
    log_origin = (
        "ELASTIC_AUDIT_AUDIT_LOG"
        if env.get("ELASTIC_AUDIT_AUDIT_LOG")
        else "XDG_STATE_HOME"
        if env.get("XDG_STATE_HOME")
        else "default (~/.local/state)"
    )
    rows.append(
        Setting("relaunch.audit_log", str(Path(log)), log_origin + " (--audit-log overrides)")
    )
    notify = env.get("ELASTIC_AUDIT_NOTIFY")
    if notify:
        from forensics.guard.notify import safe_url

        shown = " ".join(safe_url(u) for u in notify.split())
        rows.append(Setting("guard.notify", shown, "ELASTIC_AUDIT_NOTIFY (secret paths masked)"))
    return rows
