"""The one place secrets are masked: known credential values, credential-carrying headers and
parameters, and the parts of a URL that may hold one (user:password, path, query).

Everything the tool prints or logs that could carry a credential passes here: log records
(`verbosity.RedactingFilter`), the texts of Loki and Admin answers, the addresses of S3, Loki and
webhooks (docs/configuration.md: secrets are never printed, `--verbose` output included).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"

# Header or parameter values that are credentials whatever their value (a token from a profile
# or an instance role is not in the environment): `Authorization: Bearer x`, `x-amz-security-token:
# x`, `X-Amz-Security-Token=x`, `'authorization': 'x'` (a headers dict), `client_secret=x`.
_HEADER = re.compile(
    r"(?i)((?:authorization|x-amz-security-token|x-amz-signature|client_secret|access_token"
    r"|refresh_token|password)['\"]?\s*[:=]\s*(?:b?['\"])?(?:(?:bearer|basic)\s+)?)"
    r"[^\s'\",&;]+"
)
# An AWS SigV4 `Authorization` value is several comma-separated parts (`AWS4-HMAC-SHA256
# Credential=AKIA…/date/region/s3/aws4_request, SignedHeaders=…, Signature=…`: botocore's
# auth.py `SigV4Auth.add_auth`); the access key id is in it, so the whole value is masked, up to
# the end of the header (a quote closing a headers dict, or the line's end). Presigned URLs carry
# the same parts as query parameters.
_AUTHORIZATION = re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*(?:b?['\"])?)[^'\"\r\n]+")
_SIGV4_PARTS = re.compile(r"(?i)((?:x-amz-)?(?:credential|signature)=)[^\s'\",&;]+")
# In a server's free text (a gRPC status' details): a scheme's credential with no header name
# before it, and `token=x` / `secret: x`.
_LOOSE = re.compile(r"(?i)((?:\bbearer|\bbasic)\s+|(?:token|secret)[=:]\s*)[^\s'\",&;]+")


def mask(text: str, values: Iterable[str] = (), *, loose: bool = False) -> str:
    """`text` with every known secret value (longest first) and every credential-carrying
    header or parameter value masked; `loose` also masks `bearer x`, `token=x`, `secret: x`
    anywhere (for a server's free text)."""
    for v in sorted(values, key=len, reverse=True):
        if v and v in text:
            text = text.replace(v, MASK)
    text = _AUTHORIZATION.sub(lambda m: m.group(1) + MASK, text)
    text = _SIGV4_PARTS.sub(lambda m: m.group(1) + MASK, text)
    text = _HEADER.sub(lambda m: m.group(1) + MASK, text)
    if loose:
        text = _LOOSE.sub(lambda m: m.group(1) + MASK, text)
    return text


def safe_url(url: str, *, keep_path: bool = False) -> str:
    """A URL to show: `scheme://host[:port]`, never user:password, query or fragment; the path
    only with `keep_path` (an endpoint's path is configuration; a webhook's is its secret)."""
    parts = urlsplit(url)
    host = parts.hostname or ("" if keep_path else "?")
    if parts.port:
        host = f"{host}:{parts.port}"
    if keep_path:
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    return f"{parts.scheme}://{host}"


def url_secrets(url: str) -> list[tuple[str, str]]:
    """The parts of a URL that may hold its secret, each with what to show instead: its
    user:password host part, its path and query, and the whole URL."""
    parts = urlsplit(url)
    out: list[tuple[str, str]] = []
    secret = parts.path + (f"?{parts.query}" if parts.query else "")
    if parts.username or parts.password:
        out.append((parts.netloc, parts.hostname or "?"))
    if secret.strip("/"):
        out.append((secret, "/<redacted>"))
    out.append((url, safe_url(url)))
    return out
