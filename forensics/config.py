"""One Settings object: flags > environment > config file > defaults, validated with clear errors.

Each config key's validator sits beside the table of keys that names it, and the precedence
rules (which also say where each address came from) read together; docs/configuration.md is the
same contract in prose.
"""

from __future__ import annotations

import math
import os
import re
import string
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from forensics.errors import ConfigError
from forensics.fsutil import REGULAR, file_kind
from forensics.params import Param, ParamConfigError
from forensics.secrets import masked_url, split_userinfo
from forensics.timeutil import parse_duration

if sys.version_info >= (3, 11):
    import tomllib
else:  # tomli is tomllib's backport (a dependency on Python 3.10 only)
    import tomli as tomllib

CONFIG_NAME = "elastic-audit.toml"
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLYTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")  # projects and domains
CHECKPOINT_FIELDS = ("project", "domain", "name", "node_id")
MIN_SHARD = timedelta(minutes=1)


class Secret:
    """A credential: usable through `.value`, never shown by str/repr/format."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


# The `job` labels the event shippers give Kubernetes events in Loki: Alloy's
# `loki.source.kubernetes_events` default, and the one Grafana's k8s-monitoring chart gives it
# (grafana/k8s-monitoring-helm feature-cluster-events values.yaml:43). Their streams carry the
# event's `namespace` too, so the default task selector leaves them out: events are not task
# logs, and counting them as such would hide a namespace whose task logs Loki lost
# (docs/configuration.md, `task_selector`).
EVENT_SHIPPER_JOBS = "loki.source.kubernetes_events|integrations/kubernetes/eventhandler"


def default_task_selector(namespace_label: str) -> str:
    """Every stream with a namespace, but the event shippers' (`EVENT_SHIPPER_JOBS`)."""
    return f'{{{namespace_label}=~".+", job!~"{EVENT_SHIPPER_JOBS}"}}'


@dataclass(frozen=True)
class LokiSettings:
    """Where Loki is, how to authenticate (logcli's conventions), and how streams are labelled."""

    url: str = "http://localhost:3100"
    org_id: str | None = None
    bearer_token: Secret | None = None
    username: str | None = None
    password: Secret | None = None
    namespace_label: str = "namespace"
    pod_label: str = "pod"
    container_label: str = "container"
    task_selector: str = default_task_selector("namespace")
    propeller_selector: str = '{container="flytepropeller"}'
    max_query_length: timedelta = timedelta(hours=721)
    shard: timedelta = timedelta(hours=24)
    grafana_explore_url: str | None = None  # e.g. https://grafana.example.com ; for report links
    grafana_datasource: str = "loki"
    timeout: float = 60.0
    retries: int = 5  # per HTTP call, on 429/5xx/connection failures and cut-off bodies
    retry_backoff: float = 0.5  # seconds; doubles per retry (a server's Retry-After wins)
    # The tenant's max_entries_limit_per_query: the page size. A lower server limit is taken from
    # Loki's 400 and adopted at run time; this only saves that first refused request.
    max_entries: int = 5000

    def __post_init__(self) -> None:
        _take_userinfo(self, "the Loki URL")


@dataclass(frozen=True)
class FlyteSettings:
    """How to reach Flyte Admin (flytekit's own config) and how Flyte names namespaces."""

    config_file: str | None = None  # flytekit/flytectl YAML; None = flytekit's own search
    namespace_template: str = "{project}-{domain}"
    domains: tuple[str, ...] = ("development", "staging", "production")
    # Whether `domains` came from the config file; if not, a scan takes each project's domains
    # from Admin's ListProjects (docs/configuration.md) and `domains` is only the fallback.
    domains_configured: bool = False
    console_url: str | None = None
    timeout: float = 30.0  # gRPC deadline of one Admin call, seconds
    retries: int = 3  # per call, on UNAVAILABLE / RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED
    retry_backoff: float = 0.5  # seconds; doubles per retry
    # The clock skew tolerated between a pod's node (an attempt's end) and propeller/flyteadmin
    # (an execution's created_at/updated_at): the sweep's listings are widened by it on both
    # sides (docs/configuration.md, `admin_filters.attempts_may_end_during`).
    clock_skew: timedelta = timedelta(minutes=5)


@dataclass(frozen=True)
class CheckpointSettings:
    """Where a task's checkpoints live: an execution input, a URI template, or Flyte's own."""

    input: str | None = None
    template: str | None = None


@dataclass(frozen=True)
class K8sEventsSettings:
    """Kubernetes events shipped to Loki (docs/configuration.md `[k8s_events]`): off unless
    enabled; read with the Loki client's credentials, from `url` or Loki's own."""

    enabled: bool = False
    url: str | None = None  # None: the [loki] URL
    # Basic auth from the url's user:password (None: the Loki client's credentials)
    username: str | None = None
    password: Secret | None = None
    # Alloy's `loki.source.kubernetes_events` default job label, or the one Grafana's
    # k8s-monitoring chart gives it (grafana/k8s-monitoring-helm feature-cluster-events
    # values.yaml:43); the event exporter's Loki sink has only the `streamLabels` it is given
    # (e.g. {app="kubernetes-event-exporter"}).
    selector: str = f'{{job=~"{EVENT_SHIPPER_JOBS}"}}'
    namespace_label: str = "namespace"  # Alloy's label for the event's object's namespace

    def __post_init__(self) -> None:
        _take_userinfo(self, "[k8s_events] url")


@dataclass(frozen=True)
class PrometheusSettings:
    """Prometheus' HTTP API for kube-state-metrics' `kube_pod_status_disruption_reason`
    (docs/configuration.md `[prometheus]`): off unless a URL is given."""

    url: str | None = None
    timeout: float = 30.0
    step: timedelta = timedelta(minutes=1)
    username: str | None = None  # basic auth, from the url's user:password
    password: Secret | None = None

    def __post_init__(self) -> None:
        _take_userinfo(self, "[prometheus] url")


def _take_userinfo(settings: Any, what: str) -> None:
    """A settings object whose `url` carries user:password (built by a library caller, not by
    load_settings, which splits it first): the bare URL, the credentials as its fields."""
    url = settings.url
    if not url or "@" not in urlsplit(url).netloc:
        return
    bare, user, password = _url_credentials(url, what)
    if getattr(settings, "bearer_token", None) or settings.username or settings.password:
        raise ConfigError(
            f"{what} {masked_url(url)} carries user:password and other credentials are set "
            "too: give the credentials one way"
        )
    object.__setattr__(settings, "url", bare)
    object.__setattr__(settings, "username", user)
    object.__setattr__(settings, "password", password)


@dataclass(frozen=True)
class Settings:
    """Everything a command needs to know about its environment."""

    loki: LokiSettings = field(default_factory=LokiSettings)
    flyte: FlyteSettings = field(default_factory=FlyteSettings)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    k8s_events: K8sEventsSettings = field(default_factory=K8sEventsSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    workers: int = 8
    config_path: Path | None = None
    # source ("loki", "admin", "s3") -> where its address came from: flag, env, file, default;
    # "loki.password" etc. -> where a credential came from (`config` names it)
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)


# key -> (type description, converter); converters raise ValueError with a reason.
def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("must be a string")
    return v


def _nonempty(v: Any) -> str:
    s = _str(v)
    if not s.strip():
        raise ValueError("must not be empty")
    return s


def _duration(v: Any) -> timedelta:
    d = parse_duration(_str(v))  # ValueError for one too long to represent
    if d is None or d <= timedelta(0):
        raise ValueError(f"must be a positive duration such as 24h or 30d, not {v!r}")
    if d < MIN_SHARD:
        # A shard is one Loki query (or more): seconds-long shards turn a week into 600k calls.
        raise ValueError(f"must be at least {MIN_SHARD.seconds // 60} minute, not {v!r}")
    return d


def _skew(v: Any) -> timedelta:
    d = parse_duration(_str(v))
    if d is None or d < timedelta(0) or d > timedelta(days=1):
        raise ValueError(f"must be a duration from 0s to 24h such as 5m, not {v!r}")
    return d


def _label(v: Any) -> str:
    s = _nonempty(v)
    if not LABEL_NAME.fullmatch(s):
        raise ValueError(f"must be a Loki label name ([a-zA-Z_][a-zA-Z0-9_]*), not {s!r}")
    return s


def _domains(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ValueError("must be a non-empty list of strings")
    for x in v:
        if not FLYTE_NAME.fullmatch(x):
            raise ValueError(f"holds {x!r}: Flyte domain names are letters, digits, - and _")
    return tuple(v)


def template_fields(template: str) -> list[str]:
    """The `{field}` names of a str.format template; ValueError when it is malformed."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        raise ValueError(f"is not a valid template ({e})") from None


def _checkpoint_template(v: Any) -> str:
    """A checkpoint URI template whose fields are all ones a finding can fill (docs/configuration.md)."""
    s = _nonempty(v)
    for name in template_fields(s):
        head, dot, rest = name.partition(".")
        ok = name in CHECKPOINT_FIELDS or (head in ("inputs", "labels") and dot and rest)
        if not ok:
            raise ValueError(
                f"has an unknown field {{{name}}} (known: "
                f"{', '.join(CHECKPOINT_FIELDS)}, inputs.NAME, labels.NAME)"
            )
    return s


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("must be true or false")
    return v


def _url(v: Any) -> str:
    s = _nonempty(v)
    try:
        check_http_url(s, "the URL")
    except ConfigError as e:
        raise ValueError(str(e).removeprefix("the URL ")) from None
    return s.rstrip("/")


def _selector(v: Any) -> str:
    s = _nonempty(v).strip()
    if not (s.startswith("{") and s.endswith("}")):
        raise ValueError(
            'must be a LogQL stream selector such as {job="loki.source.kubernetes_events"}'
        )
    return s


def _step(v: Any) -> timedelta:
    d = parse_duration(_str(v))
    if d is None or d < timedelta(seconds=1):
        raise ValueError(f"must be a duration of at least 1s such as 30s or 1m, not {v!r}")
    return d


def _workers(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 256:
        raise ValueError("must be a whole number from 1 to 256")
    return v


def _float(v: Any) -> float:
    # TOML has nan and inf; neither is a usable timeout.
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
        raise ValueError("must be a positive number")
    return float(v)


MAX_ENTRIES_RANGE = (100, 5000)


def _max_entries(v: Any) -> int:
    low, high = MAX_ENTRIES_RANGE
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise ValueError(
            f"must be a whole number from {low} to {high} (Loki's default limit; a lower tenant "
            "limit is also found from Loki's answer)"
        )
    return v


def _retries(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 20:
        raise ValueError("must be a whole number from 0 to 20")
    return v


def _backoff(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 600:
        raise ValueError("must be a number of seconds from 0 to 600")
    return float(v)


def _template(v: Any) -> str:
    s = _nonempty(v)
    fields = template_fields(s)
    for needed in ("project", "domain"):
        if fields.count(needed) != 1:
            raise ValueError(f"must contain {{{needed}}} once")
    unknown = [f for f in fields if f not in ("project", "domain")]
    if unknown:
        raise ValueError(f"may only use {{project}} and {{domain}}, not {{{unknown[0]}}}")
    return s


_SCHEMA: dict[str, dict[str, Any]] = {
    "loki": {
        "url": _nonempty,
        "org_id": _nonempty,
        "namespace_label": _label,
        "pod_label": _label,
        "container_label": _label,
        "task_selector": _nonempty,
        "propeller_selector": _nonempty,
        "max_query_length": _duration,
        "shard": _duration,
        "grafana_explore_url": _nonempty,
        "grafana_datasource": _nonempty,
        "timeout": _float,
        "retries": _retries,
        "retry_backoff": _backoff,
        "max_entries": _max_entries,
    },
    "flyte": {
        "config": _nonempty,
        "namespace_template": _template,
        "domains": _domains,
        "console_url": _nonempty,
        "timeout": _float,
        "retries": _retries,
        "retry_backoff": _backoff,
        "clock_skew": _skew,
    },
    "checkpoints": {"input": _nonempty, "template": _checkpoint_template},
    "scan": {"workers": _workers},
    "k8s_events": {
        "enabled": _bool,
        "url": _url,
        "selector": _selector,
        "namespace_label": _label,
    },
    "prometheus": {"url": _url, "timeout": _float, "step": _step},
}


def check_http_url(url: str, what: str) -> None:
    """An http(s) URL with a host and, if any, a valid port; ConfigError naming `what` if not."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise ConfigError(f"{what} {masked_url(url)!r} is not a valid URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{what} {masked_url(url)!r} must be http:// or https:// followed by a host"
        )
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ConfigError(f"{what} {masked_url(url)!r} contains spaces or control characters")


def find_config_file(explicit: str | None, env: Mapping[str, str]) -> Path | None:
    """`--config FILE`, else `$ELASTIC_AUDIT_CONFIG`, else `./elastic-audit.toml`, else
    `$XDG_CONFIG_HOME/elastic-audit/config.toml`."""
    if explicit:
        why = _not_a_file(explicit)
        if why:
            raise ConfigError(f"config file {explicit}: {'not found' if why is _MISSING else why}")
        return Path(explicit)
    named = env.get("ELASTIC_AUDIT_CONFIG")
    if named:
        # Typically left exported by a `demo --keep-running` that has since stopped.
        _env_file(named, "ELASTIC_AUDIT_CONFIG")
        return Path(named)
    local = Path(CONFIG_NAME)
    if local.is_file():
        return local
    xdg = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    p = Path(xdg) / "elastic-audit" / "config.toml"
    return p if p.is_file() else None


def read_config_file(path: Path) -> dict[str, dict[str, Any]]:
    """Parse and validate a config file; unknown sections/keys and bad types name key and file."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path}: TOML syntax error: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {path}: cannot read: {e}") from None
    out: dict[str, dict[str, Any]] = {}
    for section, table in raw.items():
        if section not in _SCHEMA:
            raise ConfigError(
                f"config file {path}: unknown section [{section}] "
                f"(known: {', '.join(sorted(_SCHEMA))})"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"config file {path}: {section} must be a table [{section}]")
        out[section] = {}
        for key, value in table.items():
            conv = _SCHEMA[section].get(key)
            if conv is None:
                raise ConfigError(
                    f"config file {path}: unknown key {section}.{key} "
                    f"(known in [{section}]: {', '.join(sorted(_SCHEMA[section]))})"
                )
            try:
                out[section][key] = conv(value)
            except ValueError as e:
                raise ConfigError(f"config file {path}: {section}.{key} {e}") from None
    return out


def _read_secret_file(path: str, what: str) -> Secret:
    try:
        return Secret(Path(path).read_text(encoding="utf-8").strip())
    except OSError as e:
        raise ConfigError(f"{what}: cannot read {path}: {e.strerror}") from None


def load_settings(
    *,
    config: str | None = None,
    loki_url: str | None = None,
    flyte_config: str | None = None,
    checkpoint_input: str | None = None,
    checkpoint_template: str | None = None,
    workers: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings with precedence flag > environment > config file > default."""
    env = os.environ if env is None else env
    _stale_variables(env, config=config, flyte_config=flyte_config)
    path = find_config_file(config, env)
    file = read_config_file(path) if path else {}
    floki, fflyte, fck = file.get("loki", {}), file.get("flyte", {}), file.get("checkpoints", {})
    floki = _without_userinfo(floki, "grafana_explore_url")
    loki_origin = _loki_origin(loki_url, env, path, floki)
    loki, credentials = _loki_settings(loki_url, env, path, floki, loki_origin)
    flyte = _flyte_settings(flyte_config, env, _without_userinfo(fflyte, "console_url"))
    events, events_auth = _basic_auth_section(file.get("k8s_events", {}), "k8s_events", path)
    prometheus, prometheus_auth = _basic_auth_section(
        file.get("prometheus", {}), "prometheus", path
    )
    ck = _checkpoint_settings(checkpoint_input, checkpoint_template, fck)
    n = workers if workers is not None else file.get("scan", {}).get("workers", Settings.workers)
    if not 1 <= n <= 256:
        raise ParamConfigError(Param("workers"), f" must be from 1 to 256, not {n}")
    origins = {
        **credentials,
        **events_auth,
        **prometheus_auth,
        "loki": loki_origin,
        "admin": _admin_origin(flyte_config, env, path, fflyte),
        "s3": _s3_origin(env),
        # The events are read from Loki's address unless [k8s_events] names another.
        "k8s-events": f"from [k8s_events] url in {path}"
        if file.get("k8s_events", {}).get("url")
        else f"Loki's address, {loki_origin}",
        "prometheus": f"from [prometheus] url in {path}",
    }
    return Settings(
        loki=loki,
        flyte=flyte,
        checkpoints=ck,
        k8s_events=K8sEventsSettings(**events),
        prometheus=PrometheusSettings(**prometheus),
        workers=n,
        config_path=path,
        origins=origins,
    )


def _loki_auth(env: Mapping[str, str]) -> tuple[Secret | None, str | None, Secret | None]:
    """logcli's auth variables: a bearer token or basic auth, never both (bearer, user, password)."""
    bearer: Secret | None = None
    if env.get("LOKI_BEARER_TOKEN"):
        bearer = Secret(env["LOKI_BEARER_TOKEN"])
    if env.get("LOKI_BEARER_TOKEN_FILE"):
        if bearer is not None:
            raise ConfigError("set LOKI_BEARER_TOKEN or LOKI_BEARER_TOKEN_FILE, not both")
        bearer = _read_secret_file(env["LOKI_BEARER_TOKEN_FILE"], "LOKI_BEARER_TOKEN_FILE")
    username = env.get("LOKI_USERNAME") or None
    password = Secret(env["LOKI_PASSWORD"]) if env.get("LOKI_PASSWORD") else None
    if bearer is not None and (username or password):
        raise ConfigError(
            "at most one of HTTP basic auth (LOKI_USERNAME/LOKI_PASSWORD) and bearer token "
            "(LOKI_BEARER_TOKEN/LOKI_BEARER_TOKEN_FILE) may be configured"
        )
    if bool(username) != bool(password):
        raise ConfigError("basic auth needs both LOKI_USERNAME and LOKI_PASSWORD")
    return bearer, username, password


def _url_credentials(url: str, what: str) -> tuple[str, str | None, Secret | None]:
    """`url` without its user:password, and the two (basic auth); ConfigError for a user
    without a password (basic auth needs both; the message shows neither)."""
    bare, user, password = split_userinfo(url)
    if (user or password) and not (user and password):
        raise ConfigError(
            f"{what} {masked_url(url)} has a user:password part without both "
            "(basic auth needs both)"
        )
    return bare, user, Secret(password) if password else None


def _without_userinfo(table: dict[str, Any], key: str) -> dict[str, Any]:
    """A link's base URL (console, Grafana) never carries credentials into a report: a browser
    asks for its own."""
    if not table.get(key):
        return table
    return {**table, key: split_userinfo(table[key])[0]}


def _basic_auth_section(
    table: dict[str, Any], section: str, path: Path | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """A config section whose `url` may carry user:password: the section with the bare URL and
    the credentials as fields, and where they came from."""
    if not table.get("url"):
        return table, {}
    url, user, password = _url_credentials(table["url"], f"config file {path}: {section}.url")
    if password is None:
        return table, {}
    where = f"user:password in [{section}] url in {path}"
    return {**table, "url": url, "username": user, "password": password}, {
        f"{section}.username": where,
        f"{section}.password": where,
    }


def _loki_settings(
    loki_url: str | None,
    env: Mapping[str, str],
    path: Path | None,
    floki: dict[str, Any],
    origin: str,
) -> tuple[LokiSettings, dict[str, str]]:
    bearer, username, password = _loki_auth(env)
    url = loki_url or env.get("LOKI_ADDR") or floki.get("url") or LokiSettings.url
    check_http_url(url, "Loki URL")
    url, url_user, url_password = _url_credentials(url, f"Loki URL ({origin})")
    credentials = _loki_credential_origins(env, bearer)
    if url_password is not None:
        if bearer is not None or username:
            given = "LOKI_BEARER_TOKEN(_FILE)" if bearer else "LOKI_USERNAME/LOKI_PASSWORD"
            raise ConfigError(
                f"the Loki URL ({origin}) carries user:password and {given} is set too: "
                "give the credentials one way"
            )
        username, password = url_user, url_password
        where = "user:password in the Loki URL, " + origin
        credentials = {"loki.username": where, "loki.password": where}
    loki_fields = {k: v for k, v in floki.items() if k != "url"}
    org = env.get("LOKI_ORG_ID") or loki_fields.pop("org_id", None)
    loki_fields.pop("org_id", None)
    loki = replace(
        LokiSettings(**loki_fields),
        url=url.rstrip("/"),
        org_id=org,
        bearer_token=bearer,
        username=username,
        password=password,
    )
    if loki.shard > loki.max_query_length:
        loki = replace(loki, shard=loki.max_query_length)
    # Unset selectors follow the configured label names (an otel collector has no `namespace`).
    if "task_selector" not in floki:
        loki = replace(loki, task_selector=default_task_selector(loki.namespace_label))
    if "propeller_selector" not in floki:
        loki = replace(loki, propeller_selector=f'{{{loki.container_label}="flytepropeller"}}')
    for key in ("task_selector", "propeller_selector"):
        text = getattr(loki, key).strip()
        if not (text.startswith("{") and text.endswith("}")):
            where = f"config file {path}: loki.{key}" if path else f"loki.{key}"
            raise ConfigError(
                f'{where} must be a LogQL stream selector such as {{namespace=~".+"}}'
            )
    return loki, credentials


def _loki_credential_origins(env: Mapping[str, str], bearer: Secret | None) -> dict[str, str]:
    """The variable each of logcli's credentials came from."""
    if bearer is not None:
        var = "LOKI_BEARER_TOKEN" if env.get("LOKI_BEARER_TOKEN") else "LOKI_BEARER_TOKEN_FILE"
        return {"loki.bearer_token": var}
    if env.get("LOKI_PASSWORD"):
        return {"loki.username": "LOKI_USERNAME", "loki.password": "LOKI_PASSWORD"}
    return {}


def _flyte_settings(
    flyte_config: str | None, env: Mapping[str, str], fflyte: dict[str, Any]
) -> FlyteSettings:
    if not flyte_config and not fflyte.get("config"):
        # flytekit only warns about a missing FLYTECTL_CONFIG and falls back to its default
        # Admin (127.0.0.1:30080): a forensics run against the wrong Admin must not start.
        for var in FLYTECTL_VARS:  # flytekit's precedence
            if env.get(var):
                _env_file(env[var], var)
                break
    flyte_fields = {k: v for k, v in fflyte.items() if k != "config"}
    flyte = FlyteSettings(
        config_file=flyte_config or fflyte.get("config"),
        domains_configured="domains" in fflyte,
        **flyte_fields,
    )
    why = _not_a_file(flyte.config_file) if flyte.config_file else None
    if why:
        raise ConfigError(
            f"Flyte config file {flyte.config_file}: {'not found' if why is _MISSING else why}"
        )
    return flyte


def _checkpoint_settings(
    checkpoint_input: str | None, checkpoint_template: str | None, fck: dict[str, Any]
) -> CheckpointSettings:
    template = fck.get("template")
    if checkpoint_template is not None:
        try:
            template = _checkpoint_template(checkpoint_template)
        except ValueError as e:
            raise ParamConfigError(Param("checkpoint_template"), f" {e}") from None
    return CheckpointSettings(input=checkpoint_input or fck.get("input"), template=template)


def _stale_variables(
    env: Mapping[str, str], *, config: str | None, flyte_config: str | None
) -> None:
    """Every variable naming a file that is gone, in one error: a stopped `demo --keep-running`
    leaves several, and naming them one per run made the user run the tool once for each."""
    named = []
    if not config:
        named.append("ELASTIC_AUDIT_CONFIG")
    if not flyte_config:
        # flytekit's precedence: the override wins, the other is then not read
        named.append(next((v for v in FLYTECTL_VARS if env.get(v)), FLYTECTL_VARS[-1]))
    # gone, not merely no file: a directory or a FIFO was named by mistake, and is said so
    stale = [v for v in named if env.get(v) and _not_a_file(env[v]) is _MISSING]
    log = env.get("ELASTIC_AUDIT_AUDIT_LOG")
    if log and not Path(log).parent.is_dir():  # a deleted sandbox directory
        stale.append("ELASTIC_AUDIT_AUDIT_LOG")
    if len(stale) < 2:
        return  # one is named where it is read, with its own message
    listed = "; ".join(f"{v}={env[v]}" for v in stale)
    raise ConfigError(
        f"{len(stale)} variables name files that do not exist ({listed}): left over from a "
        f"stopped `demo --keep-running`? `elastic_audit_deactivate` (defined by the demo's env "
        f"file) or `unset {' '.join(stale)}`"
    )


# The variables flytekit's `get_config_file` reads, the first one set winning (flytekit
# 1.16.31 configuration/file.py:18-22 FLYTECTL_CONFIG_ENV_VAR and FLYTECTL_CONFIG_ENV_VAR_OVERRIDE,
# :248): pyflyte's own override, then FLYTECTL_CONFIG. Spelled here, not imported: this module
# loads without flytekit.
FLYTECTL_VARS = ("_FLYTECTL_CONFIG_PYFLYTE_OVERRIDE", "FLYTECTL_CONFIG")


def _env_file(value: str, var: str) -> None:
    """A file named by environment variable `var` must exist: say which variable when not."""
    why = _not_a_file(value)
    if why is _MISSING:
        raise ConfigError(
            f"{var}={value}: no such file (left over from a stopped `demo --keep-running`? "
            f"unset {var} or point it at an existing file)"
        )
    if why:
        raise ConfigError(f"{var}={value}: {why}")


_MISSING = "no such file"


def _not_a_file(path: str) -> str | None:
    """Why `path` is no config file to read: `_MISSING` when nothing is there, else what is
    there instead; None for a regular file (whether it can be read is said when it is read)."""
    try:
        kind = file_kind(path)
    except ValueError:  # a NUL in it
        return _MISSING
    except OSError as e:  # a directory on the way that may not be searched, a link loop
        return f"cannot be read: {e.strerror or e}"
    if kind is None:
        return _MISSING
    return None if kind == REGULAR else f"is {kind}, not a config file"


# -- where each address came from (docs/configuration.md precedence), for the one line a failing source prints


def _loki_origin(
    flag: str | None, env: Mapping[str, str], path: Path | None, floki: Mapping[str, Any]
) -> str:
    if flag:
        return "from --loki-url"
    if env.get("LOKI_ADDR"):
        return "from LOKI_ADDR"
    if floki.get("url"):
        return f"from [loki] url in {path}"
    return "the default (LOKI_ADDR unset, no --loki-url, no [loki] url in a config file)"


def _admin_origin(
    flag: str | None, env: Mapping[str, str], path: Path | None, fflyte: Mapping[str, Any]
) -> str:
    if env.get("FLYTE_PLATFORM_URL"):
        return "from FLYTE_PLATFORM_URL"
    if flag:
        return f"from --flyte-config {flag}"
    if fflyte.get("config"):
        return f"from [flyte] config {fflyte['config']} in {path}"
    found, origin = flytekit_config_file(env)
    if found is None:
        return (
            "flytekit's default (FLYTE_PLATFORM_URL and FLYTECTL_CONFIG unset, "
            "no ~/.flyte/config.yaml)"
        )
    return f"from {origin}={found}" if origin in FLYTECTL_VARS else f"from {found}"


def flytekit_config_file(env: Mapping[str, str]) -> tuple[str | None, str]:
    """The file flytekit reads when no config file is given, and why: its own search
    (flytekit/configuration/file.py `get_config_file`: the first of `FLYTECTL_VARS` set, if its
    file exists, then ./flytekit.config, ~/.flyte/config, ~/.flyte/config.yaml)."""
    var = next((v for v in FLYTECTL_VARS if env.get(v)), None)
    if var is not None and Path(env[var]).exists():
        return env[var], var
    home = Path(env.get("HOME") or Path.home())
    for candidate in (
        Path("flytekit.config"),
        home / ".flyte" / "config",
        home / ".flyte" / "config.yaml",
    ):
        if candidate.is_file():
            return str(candidate), "flytekit's own search"
    return None, "flytekit's search: none (no FLYTECTL_CONFIG, ~/.flyte/config.yaml)"


def _s3_origin(env: Mapping[str, str]) -> str:
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if env.get(var):
            return f"from {var}"
    profile = env.get("AWS_PROFILE") or "default"
    return f"AWS's endpoint for the region (no AWS_ENDPOINT_URL_S3; profile {profile})"
