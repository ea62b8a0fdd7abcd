"""The one place secrets are masked: known credential values, credential-carrying headers and
parameters, and the parts of a URL that may hold one (user:password, path, query).

Everything the tool prints or logs that could carry a credential passes here: log records
(`verbosity.RedactingFilter`), the texts of Loki and Admin answers, the addresses of S3, Loki and
webhooks (docs/configuration.md: secrets are never printed, `--verbose` output included).

A URL's user:password (`https://user:token@logs-prod…/`, as Grafana Cloud gives them) leaves
the URL where the URL is read (`split_userinfo`, in config.py): the address kept and shown has
none, and the credentials travel as `config.Secret`s. Any URL text that still holds one (a
library's message, a log record) has its password masked by `mask`; an address shown whole goes
through `masked_url`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

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
# botocore's debug line of the signature it computed (auth.py `SigV4Auth.add_auth`:
# `Signature:\n<hex>`): valid for its request until the request expires.
_SIGNATURE_LINE = re.compile(r"(?i)(\bsignature:\s*)[0-9a-f]{16,}")
# In a server's free text (a gRPC status' details): a scheme's credential with no header name
# before it, and `token=x` / `secret: x`.
# A URL's password anywhere in a text: `scheme://user:PASSWORD@host` (a password may hold `@`
# or `:` when the URL is not percent-encoded; urlsplit splits at the last `@` of the host part,
# and so does this: the greedy run stops only at a `/`, a quote or a space).
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/@:'\"]*:)[^\s/'\"]*@")
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
    text = _SIGNATURE_LINE.sub(lambda m: m.group(1) + MASK, text)
    text = _HEADER.sub(lambda m: m.group(1) + MASK, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
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


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """`url` without its `user:password@` part, and the user and password (percent-decoded, as
    requests' `get_auth_from_url` reads them; None when absent): the credentials leave the
    address where it is read, so no text made from the address can carry them."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return bare, user, password


def _authority(url: str) -> tuple[str, str, str, str]:
    """(scheme and `://`, userinfo or "", host part, the rest) of a URL or of a gRPC target
    (`user:pw@host:443`, `dns:///host`), which urlsplit does not read as URLs."""
    head, sep, rest = url.partition("://")
    if not sep:
        head, rest = "", url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, _, host = rest[:end].rpartition("@")
    return head + sep, userinfo, host, rest[end:]


def masked_url(url: str) -> str:
    """An address to show whole: `https://user:***@host/path` (a lone user, which may be a
    token as in `https://TOKEN@host`, as `***@`); gRPC targets alike."""
    start, userinfo, host, rest = _authority(url)
    if not userinfo:
        return url
    user, colon, _ = userinfo.partition(":")
    return f"{start}{f'{user}:{MASK}' if colon else MASK}@{host}{rest}"


def userinfo_secrets(url: str) -> list[str]:
    """What a URL's user:password may be seen as: the password as written and decoded, a lone
    user (a token), and the basic-auth value requests makes of the two."""
    userinfo = _authority(url)[1]
    if not userinfo:
        return []
    raw_user, colon, raw_password = userinfo.partition(":")
    if not colon:
        return [v for v in {raw_user, unquote(raw_user)} if v]
    user, password = unquote(raw_user), unquote(raw_password)
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [v for v in {raw_password, password, pair} if v]
