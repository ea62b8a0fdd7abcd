"""What Loki's answers mean: its refusals (each text Loki's own), and answers that are not Loki's.

The refusals map each status and text to a typed error (Loki's texts and sources: the comments
here, `loki_limits.py` and docs/upstream.md). An answer that is not Loki's at all — Grafana's or
any other HTML page, a gRPC port answering HTTP/2 frames, another service's JSON, an object
store's S3-style XML error — is `NotLoki`: one line saying what answered (status, content type, a
short safe summary: never the page, never raw bytes), raised at the first such answer because
every request would meet the same. Any other body shown in an error is one short line (`snippet`).
"""

from __future__ import annotations

import http.client
import json
import re
from typing import Any

from forensics.errors import (
    ConfigError,
    ElasticAuditError,
    FailureKind,
    LokiQueryError,
    SourceError,
)
from forensics.failures import http_status_kind, in_chain
from forensics.sources.loki_limits import (
    TOO_MANY_ORG_IDS,
    LokiQueryTooLong,
    LokiTooHeavy,
    too_heavy,
    too_long_limit,
    too_many_org_ids,
)

SOURCE = "loki"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Loki's 400 for a limit over the tenant's max_entries_limit_per_query. v3's query frontend
# (pkg/util/validation/validate.go ErrMaxEntriesLimit) says `... > max_entries_limit_per_query
# (5000 > 1000)`, its querier and older releases (pkg/querier/http.go validateMaxEntriesLimits)
# `... > max_entries_limit (5000 > 1000)`; the prefix is the stable part (Loki's own
# pkg/util/server/error.go matches on it too).
ENTRY_LIMIT_PREFIX = "max entries limit per query exceeded"
_ENTRY_LIMIT_RE = re.compile(
    re.escape(ENTRY_LIMIT_PREFIX)
    + r", limit > max_entries_limit(?:_per_query)? \(([0-9]+) > ([0-9]+)\)"
)
# Loki's own 504 at its query_timeout (pkg/util/server/error.go): it answered, quickly.
QUERY_TIMEOUT_TEXT = "request timed out, decrease the duration"
QUERY_RANGE = "/loki/api/v1/query_range"
SERIES = "/loki/api/v1/series"
INDEX_STATS = "/loki/api/v1/index/stats"
LABELS = "/loki/api/v1/labels"


class LokiAuthError(SourceError):
    """Loki (or the gateway in front of it) refused the credentials or tenant: HTTP 401/403."""

    default_kind = FailureKind.AUTH_REFUSED


class LokiEntryLimitError(LokiQueryError):
    """A 400 saying the page limit is over the tenant's max_entries_limit_per_query; `limit` is
    the tenant's limit when the message states it."""

    def __init__(self, cause: str, *, limit: int | None, **kw: Any) -> None:
        super().__init__(SOURCE, cause, **kw)
        self.limit = limit


class LokiNoIndexStats(SourceError):
    """Loki (or a gateway in front of it) does not serve `/loki/api/v1/index/stats` (404)."""

    default_kind = FailureKind.NOT_FOUND


class LokiTimeoutError(LokiTooHeavy):
    """A query_range Loki gave up on (504, its query timeout) or that got no answer within the
    client's timeout: the piece is too heavy for one request, so it is read in halves."""


def refusal(
    status: int, path: str, text: str, attempts: str, where: Any, org_id: str | None
) -> ElasticAuditError:
    """The error a non-200 answer means (Loki's own text, secrets removed)."""
    if status == 400:
        if ENTRY_LIMIT_PREFIX in text:
            m = _ENTRY_LIMIT_RE.search(text)
            return LokiEntryLimitError(
                f"Loki rejected the query: {text}",
                limit=int(m.group(2)) if m else None,
                window=where,
            )
        if too_heavy(text) and path == QUERY_RANGE:
            return LokiTooHeavy(
                SOURCE,
                f"Loki refused the piece: {text}",
                window=where,
                kind=FailureKind.QUERY_TOO_HEAVY,
            )
        if "exceeds the limit" in text:
            return LokiQueryTooLong(
                SOURCE,
                f"Loki rejected the query: {text}",
                limit=too_long_limit(text),
                window=where,
            )
        return LokiQueryError(SOURCE, f"Loki rejected the query: {text}", window=where)
    if TOO_MANY_ORG_IDS in text:  # several tenants (`A|B`) on a Loki without multi-tenant
        return too_many_org_ids(org_id, text)  # queries: no retry mends it
    if status == 504 and path == QUERY_RANGE:
        return LokiTimeoutError(
            SOURCE,
            f"HTTP 504 from Loki{attempts}: {text} (Loki's query_timeout: the piece is read "
            "in halves)",
            window=where,
            retryable=True,
            kind=FailureKind.QUERY_TOO_HEAVY,
        )
    if status == 429 and path == QUERY_RANGE:
        return LokiTooHeavy(
            SOURCE,
            f"HTTP 429 from Loki{attempts}: {text} (the tenant's query queue is full at this "
            "size: the piece is read in halves)",
            window=where,
            retryable=True,
            kind=FailureKind.THROTTLED,
        )
    if status in (401, 403):
        hint = (
            "check LOKI_ORG_ID (X-Scope-OrgID)"
            if "org id" in text.lower()
            else "check LOKI_BEARER_TOKEN / LOKI_USERNAME + LOKI_PASSWORD"
        )
        return LokiAuthError(
            SOURCE, f"HTTP {status}, access refused ({hint}): {text}", window=where
        )
    return SourceError(
        SOURCE,
        f"HTTP {status} from Loki{attempts}: {text}",
        window=where,
        retryable=status in RETRY_STATUSES,
        kind=FailureKind.QUERY_TOO_HEAVY
        if status == 504 and QUERY_TIMEOUT_TEXT in text
        else http_status_kind(status),
    )


def snippet(body: bytes, limit: int = 500) -> str:
    """An answer's text for an error line: one printable line (any run of whitespace or control
    characters one space), at most `limit` long — a body of many lines never spreads over
    several."""
    return _clean(body.decode("utf-8", errors="replace"), limit)


# ---------------------------------------------------------------------------------------------
# Answers that are not Loki's
# ---------------------------------------------------------------------------------------------

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.I | re.S)
_HTML_START = (b"<!doctype html", b"<html", b"<head", b"<body")
_XML_TYPES = ("application/xml", "text/xml")
# An XML document's declaration (optional) and its root element's name.
_XML_ROOT = re.compile(rb"\s*(?:<\?xml[^>]*\?>)?\s*<([A-Za-z_][\w.\-]{0,63})[\s/>]")
# An object store's error answer: root `Error` with a `Code` (S3's REST error answer, as MinIO
# and moto give it too): `<Error><Code>NoSuchBucket</Code><Message>...`.
_STORE_CODE = re.compile(rb"<Code>\s*([A-Za-z][\w.\-]{0,63})\s*</Code>")
_SUMMARY_CHARS = 80
# HTTP/2 frame types a server sends first (RFC 9113 §6.5 SETTINGS, §6.8 GOAWAY): the 9-byte
# frame header is length (3 bytes), type, flags, stream id. A gRPC server (grpc-go, C-core) that
# gets an HTTP/1.1 request answers its SETTINGS frame; http.client reads it as a bad status line.
_H2_FIRST_FRAMES = {4: "SETTINGS", 7: "GOAWAY"}


class NotLoki(ConfigError):
    """Something that is not Loki's HTTP API answered at the Loki URL: every request would meet
    the same, so the run stops at the first such answer."""


def content_type(headers: Any) -> str:
    """The media type of an answer (`text/html`), or `no content type`."""
    value = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    return value or "no content type"


def _clean(text: str, limit: int = _SUMMARY_CHARS) -> str:
    """One short printable line, at most `limit` long."""
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_html(ctype: str, body: bytes) -> bool:
    return ctype in ("text/html", "application/xhtml+xml") or body[
        :512
    ].lstrip().lower().startswith(_HTML_START)


def _xml_root(ctype: str, body: bytes) -> str | None:
    """The root element's name of an XML answer (an XML content type or an `<?xml` declaration
    at its start), or None; never read from an HTML page."""
    head = body[:65536].removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
    if is_html(ctype, head) or not (
        ctype in _XML_TYPES or ctype.endswith("+xml") or head.lstrip().startswith(b"<?xml")
    ):
        return None
    m = _XML_ROOT.match(head)
    return m.group(1).decode("ascii") if m else None


def object_store_error(ctype: str, body: bytes) -> str | None:
    """The error code of an S3-style XML error answer (`NoSuchBucket`, `AccessDenied`): what S3,
    MinIO or moto answer a GET of Loki's paths; None for any other answer."""
    if _xml_root(ctype, body) != "Error":
        return None
    m = _STORE_CODE.search(body[:65536])
    return m.group(1).decode("ascii") if m else None


def summary(ctype: str, body: bytes) -> str:
    """A short, safe description of a body that is not Loki's: an HTML page's title, an
    S3-style XML error's code or another XML document's root element (never their text), a
    JSON document's top-level keys (never its values), a text's first line cut short, or a
    size."""
    if is_html(ctype, body):
        m = _TITLE.search(body[:65536])
        title = _clean(m.group(1).decode("utf-8", "replace")) if m else ""
        return f"an HTML page titled {title!r}" if title else "an HTML page"
    code = object_store_error(ctype, body)
    if code is not None:
        return f"an S3-style XML error answer ({code})"
    root = _xml_root(ctype, body)
    if root is not None:
        return f"an XML document ({root})"
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    else:
        if isinstance(doc, dict):
            keys = ", ".join(_clean(str(k)) for k in list(doc)[:8])
            return f"a JSON object with keys {keys}" if keys else "an empty JSON object"
        return f"a JSON {type(doc).__name__}"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"{len(body)} bytes that are not text"
    first = _clean(text.strip().split("\n", 1)[0])
    return f"text {first!r}" if first else "an empty body"


def not_loki(address: str, status: int, ctype: str, body: bytes, what: str = "") -> NotLoki:
    """The one-line error for an answer that is not Loki's."""
    what = what or summary(ctype, body)
    if object_store_error(ctype, body) is not None:
        what += " — an object store's address?"
    hint = (
        "Grafana's URL, not Loki's: use Loki's own URL"
        if "grafana" in what.lower()
        else "point the Loki URL at Loki's HTTP API (the address that serves /loki/api/v1/*)"
    )
    return NotLoki(
        f"not Loki at {address}: HTTP {status}, {ctype}, {what} (Loki answers JSON or plain "
        f"text); {hint} — LOKI_ADDR or [loki] url"
    )


def non_http(address: str, e: BaseException) -> NotLoki | None:
    """The error for a server that answered an HTTP/1.1 request with HTTP/2 frames (a gRPC port),
    found by type in `e`'s chain (http.client's BadStatusLine; a reset connection, its
    RemoteDisconnected subclass, is not one); None otherwise."""
    x = in_chain(e, (http.client.BadStatusLine,))
    if x is None or isinstance(x, ConnectionError):  # RemoteDisconnected: a reset, not a reply
        return None
    raw = str(getattr(x, "line", "")).encode("latin-1", "replace")
    frame = _H2_FIRST_FRAMES.get(raw[3]) if len(raw) >= 9 else None
    if frame is None or raw[5:9] != b"\0\0\0\0":  # on stream 0, as they must be
        return None
    return NotLoki(
        f"not Loki at {address}: the server answered HTTP/1.1 with an HTTP/2 {frame} frame (a "
        "gRPC port, such as Flyte Admin's?); point the Loki URL at Loki's HTTP API — LOKI_ADDR "
        "or [loki] url"
    )
