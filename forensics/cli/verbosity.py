"""Logging for every command: stderr only, the tool's own story at -v, libraries' at -vv, no secret.

Levels: no flag → the tool's warnings, libraries' errors; `-v` → what the tool decides (window,
shards, candidates, calls per source, time per step), libraries' warnings; `-vv` → also the
libraries' debug logs (botocore, urllib3, grpc, flytekit). botocore's debug log prints request
headers — `x-amz-security-token` among them — and its canonical request, so every record, of any
logger at any level, passes a filter that replaces each credential the process can see by `***`
before it is formatted (docs/configuration.md: secrets are never printed, `--verbose` output
included).
"""

from __future__ import annotations

import base64
import logging
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from forensics.secrets import mask, userinfo_secrets

TOOL_LOGGERS = ("elastic-audit", "forensics")
# Libraries whose debug output is noise at -v and a credential risk at any level.
LIBRARY_LOGGERS = (
    "botocore",
    "boto3",
    "s3transfer",
    "urllib3",
    "requests",
    "charset_normalizer",
    "grpc",
    "flytekit",
    "user_space",
    "developer",
    "fsspec",
    "s3fs",
    "aiobotocore",
    "asyncio",
    "filelock",
    "werkzeug",
    "cheroot",
    "moto",
)

# Environment variables that hold a credential, or the name of a file that holds one.
SECRET_VARS = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "LOKI_BEARER_TOKEN",
    "LOKI_PASSWORD",
    "FLYTE_CREDENTIALS_CLIENT_SECRET",
    "FLYTE_CLIENT_SECRET",
    "GITHUB_TOKEN",
    "GH_TOKEN",
)
SECRET_FILE_VARS = (
    "LOKI_BEARER_TOKEN_FILE",
    "FLYTE_CREDENTIALS_CLIENT_SECRET_FROM_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)
# Variables holding a URL that may carry user:password (`https://user:token@host`).
URL_VARS = (
    "LOKI_ADDR",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "FLYTE_PLATFORM_URL",
    "GITHUB_API_URL",
)
_registered: list[str] = []  # secrets that do not come from the environment (add_secret)


def add_secret(value: str) -> None:
    """Mask `value` in every log record from now on: a credential given some other way than the
    environment (a webhook URL's path on the command line, a token read from a state file)."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    # A URL's secret is its path and query, which urllib3's debug log prints without the host.
    tail = parts.path + (f"?{parts.query}" if parts.query else "") if parts.netloc else ""
    for v in (value, tail, *userinfo_secrets(value)):
        if len(v) >= 6 and v not in _registered:
            _registered.append(v)
    _registered.sort(key=len, reverse=True)


def add_basic_auth(username: str | None, password: str) -> None:
    """Mask a basic-auth password read from a config file's URL, and the header value made of it."""
    add_secret(password)
    add_secret(base64.b64encode(f"{username or ''}:{password}".encode()).decode())


def known_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """Every credential value in the environment (and in the files it names), longest first."""
    env = os.environ if env is None else env
    values = [env[name] for name in SECRET_VARS if env.get(name)]
    # Webhook URLs carry their secret in the path (docs/deployment.md): each one, whole.
    for url in (env.get("ELASTIC_AUDIT_NOTIFY") or "").split():
        add_secret(url)
    for name in URL_VARS:
        values += userinfo_secrets(env.get(name) or "")
    for name in SECRET_FILE_VARS:
        if env.get(name):
            try:
                values.append(Path(env[name]).read_text(encoding="utf-8").strip())
            except (OSError, UnicodeDecodeError):
                pass
    if env.get("LOKI_USERNAME") and env.get("LOKI_PASSWORD"):
        pair = f"{env['LOKI_USERNAME']}:{env['LOKI_PASSWORD']}".encode()
        values.append(base64.b64encode(pair).decode())  # HTTP basic auth travels this way
    # Short values would mask ordinary words; no real credential is this short.
    return sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)


def masked(text: str) -> str:
    """`text` with every secret this process knows of masked (the environment's, and those
    registered with `add_secret`): for text that reaches stderr outside a log record."""
    return mask(text, [*_registered, *known_secrets()])


class RedactingFilter(logging.Filter):
    """Formats each record's message once, masked; the handler then prints only that."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a library's malformed log call must not hide the rest
            message = str(record.msg)
        secrets = [*_registered, *self.secrets]
        record.msg, record.args = mask(message, secrets), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask(record.exc_text, secrets)
        return True


_levels: dict[str, int] = {}  # logger name -> level, as setup_logging chose them


def adopt_flytekit() -> None:
    """Once flytekit is imported: its loggers go through ours, at the levels we chose.

    On import flytekit gives its loggers its own handler (rich, onto *stdout*:
    `loggers.upgrade_to_rich_logging` builds `Console(width=...)`, whose file is sys.stdout),
    stops their propagation and resets their level from FLYTE_SDK_LOGGING_LEVEL."""
    flytekit_loggers = sys.modules.get("flytekit.loggers")
    if flytekit_loggers is None:
        return
    for name in ("logger", "user_space_logger", "developer_logger"):
        lg = getattr(flytekit_loggers, name, None)
        if isinstance(lg, logging.Logger):
            lg.handlers.clear()
            lg.propagate = True
            if lg.name in _levels:
                lg.setLevel(_levels[lg.name])


class _Formatter(logging.Formatter):
    """`elastic-audit: what happened` for the tool's story; level and logger name otherwise
    (`elastic-audit: debug: botocore.endpoint: ...`)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        own = record.name.split(".")[0] in TOOL_LOGGERS
        level = "" if own and record.levelno == logging.INFO else record.levelname.lower() + ": "
        return f"elastic-audit: {level}{'' if own else record.name + ': '}{text}"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record is emitted (as logging's own last-resort
    handler does), so a command run in-process after another — tests, the Flyte guard task —
    never writes to a stream the previous one had and that is closed since."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:  # type: ignore[override]
        return sys.stderr


def setup_logging(verbosity: int | bool) -> None:
    """stderr logging for a command: 0 quiet, 1 the tool's story, 2 the libraries' debug too."""
    level = int(verbosity)
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_elastic_audit", False):
            root.removeHandler(h)
    handler = _StderrHandler()
    handler._elastic_audit = True  # type: ignore[attr-defined]
    handler.setFormatter(_Formatter())
    handler.addFilter(RedactingFilter(known_secrets()))
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if level >= 2 else logging.WARNING)
    for name in TOOL_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level >= 1 else logging.WARNING)
    # Libraries: errors only by default (the tool says what went wrong in its own words),
    # their warnings at -v, everything at -vv.
    library_level = {0: logging.ERROR, 1: logging.WARNING}.get(level, logging.DEBUG)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(library_level)
    if level < 2 and os.environ.get("FLYTE_SDK_LOGGING_LEVEL", "").isdigit():
        # flytekit's own knob (pyflyte honours it): its records still come here, to stderr.
        logging.getLogger("flytekit").setLevel(int(os.environ["FLYTE_SDK_LOGGING_LEVEL"]))
    _levels.update({n: logging.getLogger(n).level for n in ("flytekit", "user_space", "developer")})
    grpc_logging(level)  # before any channel: gRPC reads its verbosity once
    # flytekit logs while it is imported (its config search warns about a FLYTECTL_CONFIG that
    # does not exist): without rich it writes those to a plain stderr handler, not stdout.
    os.environ["FLYTE_SDK_RICH_TRACEBACKS"] = "0"
    # Python warnings (flytekit's, urllib3's) become log records: stderr, masked, never stdout.
    logging.captureWarnings(True)
    if level < 2:
        warnings.filterwarnings("ignore", category=DeprecationWarning)
    adopt_flytekit()


_GRPC_LOG_VARS = ("GRPC_VERBOSITY", "GRPC_TRACE")
_grpc_verbosity_ours = False  # whether GRPC_VERBOSITY was set here, not by the user


def grpc_logging(verbosity: int) -> None:
    """gRPC's own C-core log lines (`I1206 04:36:45.919908 18556 ssl_transport_security.cc:2563]
    Handshake failed…`, a GOAWAY) on stderr only at -vv: GRPC_VERBOSITY is NONE below it, and
    unset at it (gRPC's default: abseil's, which prints INFO and up). gRPC reads it once, when it
    initialises (grpc/grpc src/core/util/log.cc `gpr_log_verbosity_init`: DEBUG, INFO, ERROR or
    NONE; unset leaves abseil's settings), so this runs before any command opens a channel. A
    GRPC_VERBOSITY or GRPC_TRACE the user set is theirs: left as it is."""
    global _grpc_verbosity_ours
    if not _grpc_verbosity_ours and any(os.environ.get(v) for v in _GRPC_LOG_VARS):
        return
    if verbosity >= 2:
        os.environ.pop("GRPC_VERBOSITY", None)
    else:
        os.environ["GRPC_VERBOSITY"] = "NONE"
    _grpc_verbosity_ours = True
