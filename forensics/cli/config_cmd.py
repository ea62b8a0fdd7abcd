"""`elastic-audit config`: the effective configuration, and where each value came from.

Precedence is docs/configuration.md's: flag > environment > config file > default. Credentials
are never printed: only whether one is set, and where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.cli.common import emit
from forensics.cli.display import render
from forensics.cli.options import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    SourceFlags,
    check_output,
    default_output,
    output_option,
    value_option,
)
from forensics.config import Secret, flytekit_config_file, read_config_file
from forensics.formats import TABLE_OR_JSON
from forensics.formats.config import ConfigView, Setting
from forensics.secrets import MASK, masked_url

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

# Settings fields that are not configuration (where the file is, where values came from) or
# that another row already says (`domains_configured` is the `flyte.domains` row's origin).
_NOT_SHOWN = frozenset({"config_path", "origins", "flyte.domains_configured"})
# A field's key in the config file, where it is not the field's name.
_FILE_KEYS = {"flyte.config_file": ("flyte", "config"), "workers": ("scan", "workers")}
# What the default means, where "default" alone would not say it.
_DEFAULT_NOTES = {
    "loki.org_id": "default (no X-Scope-OrgID)",
    "loki.task_selector": "default (follows the label names)",
    "loki.propeller_selector": "default (follows the label names)",
    "loki.bearer_token": "not set (LOKI_BEARER_TOKEN[_FILE])",
    "loki.username": "not set (LOKI_USERNAME or the URL)",
    "loki.password": "not set (LOKI_PASSWORD or the URL)",
    "k8s_events.url": "default (Loki's, with its credentials)",
    "k8s_events.username": "not set (the url's user:password)",
    "k8s_events.password": "not set (the url's user:password)",
    "prometheus.url": "default (off)",
    "prometheus.username": "not set (the url's user:password)",
    "prometheus.password": "not set (the url's user:password)",
}


def config(
    loki_url: str | None = LokiUrlOpt,
    flyte_config: str | None = FlyteConfigOpt,
    config: str | None = ConfigOpt,
    checkpoint_input: str | None = CheckpointInputOpt,
    checkpoint_template: str | None = CheckpointTemplateOpt,
    workers: int | None = value_option("--workers", "N", "Concurrent requests per source."),
    output: str | None = output_option(*TABLE_OR_JSON),
) -> None:
    """Print the effective configuration and where each value came from (secrets masked)."""
    sources = SourceFlags(
        loki_url=loki_url,
        flyte_config=flyte_config,
        config=config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    settings = sources.settings(workers)
    env = os.environ
    given = _given(sources, settings, workers, env)
    file = read_config_file(settings.config_path) if settings.config_path else {}
    rows = [_config_file(sources, settings, env)]
    for key, value in _settings_values(settings):
        if key == "flyte.config_file":
            rows += _flyte(settings, env)
        rows.append(_row(settings, file, given, key, value))
    rows += _s3(settings, env)
    rows += _rest(env)
    emit(render(ConfigView(tuple(rows)), fmt))


def _settings_values(settings: Settings) -> list[tuple[str, Any]]:
    """Every configured value, `section.field` (or `field` for a top-level one), in the order
    the settings model declares them: a field or section added there is listed here."""
    out = []
    for top in fields(settings):
        if top.name in _NOT_SHOWN:
            continue
        value = getattr(settings, top.name)
        if is_dataclass(value):
            for f in fields(value):
                key = f"{top.name}.{f.name}"
                if key not in _NOT_SHOWN:
                    out.append((key, getattr(value, f.name)))
        else:
            out.append((top.name, value))
    return out


def _given(
    flags: SourceFlags, settings: Settings, workers: int | None, env: Mapping[str, str]
) -> dict[str, str]:
    """Where the values set by a flag or a variable came from (the rest: file or default)."""
    given = {"loki.url": settings.origins.get("loki", "").removeprefix("from ")}
    if env.get("LOKI_ORG_ID"):
        given["loki.org_id"] = "LOKI_ORG_ID"
    for key, flag, value in (
        ("checkpoints.input", "--checkpoint-input", flags.checkpoint_input),
        ("checkpoints.template", "--checkpoint-template", flags.checkpoint_template),
        ("workers", "--workers", workers),
        ("flyte.config_file", "--flyte-config", flags.flyte_config),
    ):
        if value is not None:
            given[key] = flag
    if "flyte.config_file" not in given and settings.flyte.config_file is None:
        given["flyte.config_file"] = flytekit_config_file(env)[1]
    return given


def _row(
    settings: Settings,
    file: Mapping[str, Mapping[str, Any]],
    given: Mapping[str, str],
    key: str,
    value: Any,
) -> Setting:
    section, name = _FILE_KEYS.get(key, tuple(key.split(".", 1)))  # type: ignore[arg-type]
    shown_key = f"{section}.{name}" if "." in key else key
    if key in given:
        origin = given[key]
    elif key in settings.origins:  # a credential: the variable or URL it came from
        origin = settings.origins[key]
    elif name in file.get(section, {}):
        origin = f"[{section}] {name} in {settings.config_path}"
    else:
        origin = _DEFAULT_NOTES.get(key, "default")
    if key == "flyte.config_file" and value is None:
        value = flytekit_config_file(os.environ)[0]
    if key == "flyte.domains" and not settings.flyte.domains_configured:
        origin = "default (each project's domains come from Admin)"
    return Setting(shown_key, _shown(value), origin)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, Secret):
        return MASK
    if hasattr(value, "total_seconds"):
        return _duration(int(value.total_seconds()))
    if isinstance(value, tuple):
        return ", ".join(value)
    if isinstance(value, str) and "://" in value:
        return masked_url(value)
    return str(value)


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


def _duration(seconds: int) -> str:
    """`721h`, `90m`, `45s`: as the config file's durations are written."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _flyte(settings: Settings, env: Mapping[str, str]) -> list[Setting]:
    """What flytekit makes of its configuration: the endpoint, and a client secret's variable."""
    from forensics.cli.process import flytekit_imported
    from forensics.sources.admin import AdminClient

    admin = AdminClient.from_settings(settings.flyte)  # reads flytekit's config; contacts nothing
    flytekit_imported()
    try:
        endpoint = str(admin.endpoint)
    finally:
        admin.close()
    rows = [
        Setting("flyte.endpoint", endpoint, settings.origins.get("admin", "").removeprefix("from "))
    ]
    var = _first_var(env, "FLYTE_CREDENTIALS_CLIENT_SECRET", "FLYTE_CLIENT_SECRET")
    if var:
        rows.append(Setting("flyte.client_secret", MASK, var))
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


def _rest(env: Mapping[str, str]) -> list[Setting]:
    from forensics.relaunch import default_audit_log

    log = default_audit_log()
    log_origin = (
        "ELASTIC_AUDIT_AUDIT_LOG"
        if env.get("ELASTIC_AUDIT_AUDIT_LOG")
        else "XDG_STATE_HOME"
        if env.get("XDG_STATE_HOME")
        else "default (~/.local/state)"
    )
    rows = [Setting("relaunch.audit_log", str(Path(log)), log_origin + " (--audit-log overrides)")]
    notify = env.get("ELASTIC_AUDIT_NOTIFY")
    if notify:
        from forensics.secrets import safe_url

        shown = " ".join(safe_url(u) for u in notify.split())
        rows.append(Setting("guard.notify", shown, "ELASTIC_AUDIT_NOTIFY (secret paths masked)"))
    return rows
