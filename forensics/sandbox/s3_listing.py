"""ListObjectsV2 pages for the sandbox S3, from a sorted index of each bucket's keys.

S3 answers a page in about the same time whatever else the bucket holds; moto sorts every key of
the bucket and walks its service model for each object of every page, CPU that lands on the
scan's machine (docs/performance.md, "The benchmark's own servers on the scan's core"). The
sandbox's front answers the pages a scan asks (no delimiter, no owners) from this index, as the
S3 API Reference describes ListObjectsV2 (docs/upstream.md, "S3"); anything else is moto's.
"""

from __future__ import annotations

import base64
import binascii
import threading
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote
from xml.sax.saxutils import escape

if TYPE_CHECKING:
    from collections.abc import Callable

# S3 returns at most 1,000 keys a page, whatever MaxKeys asks (S3 API Reference, ListObjectsV2).
MAX_KEYS = 1000
_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n'
_ROOT = '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
# The query parameters a page answered here may carry; any other goes to moto.
_PLAIN = frozenset(
    {"list-type", "prefix", "start-after", "continuation-token", "max-keys", "encoding-type"}
)


class ListingIndex:
    """Each bucket's live keys sorted by name, read from moto's backend when first listed after a
    write (`changed`)."""

    def __init__(self, backend: Callable[[], Any]) -> None:
        self._backend = backend  # moto.s3.models.S3Backend, as it is after a reset
        self._lock = threading.Lock()
        self._sorted: dict[str, tuple[list[str], list[Any]]] = {}

    def changed(self) -> None:
        """Something was written: the next listing reads the bucket anew."""
        with self._lock:
            self._sorted.clear()

    def _keys(self, bucket: str) -> tuple[list[str], list[Any]] | None:
        with self._lock:
            found = self._sorted.get(bucket)
            if found is None:
                backend = self._backend()
                if bucket not in backend.buckets:
                    return None
                stored = backend.get_bucket(bucket)
                # moto's own listing, everything at once: its live keys (no delete markers)
                every = backend.list_objects(stored, None, None, None, None)[0]
                every = sorted(every, key=lambda k: k.name)
                found = self._sorted[bucket] = ([k.name for k in every], every)
            return found

    def page(self, bucket: str, query: str) -> bytes | None:
        """The body of the page `query` asks of `bucket`; None for moto to answer (a listing
        with a delimiter or owners, a bucket that does not exist, a token not from here)."""
        args = parse_qs(query, keep_blank_values=True)
        if not set(args) <= _PLAIN or args.get("list-type") != ["2"]:
            return None
        one = {name: values[-1] for name, values in args.items()}
        prefix = one.get("prefix", "")
        encoded = one.get("encoding-type") == "url"
        if "encoding-type" in one and not encoded:
            return None
        try:
            max_keys = int(one.get("max-keys", MAX_KEYS))
        except ValueError:
            return None
        if max_keys < 1:
            return None
        token = one.get("continuation-token")
        after = _key_of(token) if token is not None else one.get("start-after", "")
        if after is None:
            return None
        found = self._keys(bucket)
        if found is None:
            return None
        names, keys = found
        i = bisect_left(names, prefix)
        if after:
            i = max(i, bisect_right(names, after))
        page = []
        while i < len(names) and len(page) < min(max_keys, MAX_KEYS):
            if not names[i].startswith(prefix):
                break
            page.append(keys[i])
            i += 1
        truncated = bool(page) and i < len(names) and names[i].startswith(prefix)
        return _xml(bucket, prefix, max_keys, page, truncated, one, encoded)


def _token(key: str) -> str:
    # S3's token is opaque ("obfuscated and is not a real key"); this one names the last key.
    return base64.urlsafe_b64encode(key.encode()).decode()


def _key_of(token: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode() if token else None
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _xml(
    bucket: str,
    prefix: str,
    max_keys: int,
    page: list[Any],
    truncated: bool,
    query: dict[str, str],
    encoded: bool,
) -> bytes:
    """The page in the output's order (S3 API Reference, ListObjectsV2 response syntax)."""

    def name(text: str) -> str:  # keys, prefix and StartAfter: encoded when asked
        return quote(text) if encoded else text

    parts = [_ROOT, _element("IsTruncated", "true" if truncated else "false")]
    for key in page:
        checksum = key.checksum_algorithm
        parts.append(
            "<Contents>"
            + _element("Key", name(key.name))
            + _element("LastModified", key.last_modified_ISO8601)
            + _element("ETag", key.etag)
            + (_element("ChecksumAlgorithm", checksum) if checksum else "")
            + _element("Size", str(key.size))
            + _element("StorageClass", key.storage_class or "STANDARD")
            + "</Contents>"
        )
    parts += [
        _element("Name", bucket),
        _element("Prefix", name(prefix)),
        _element("MaxKeys", str(max_keys)),
    ]
    if encoded:
        parts.append(_element("EncodingType", "url"))
    parts.append(_element("KeyCount", str(len(page))))
    if "continuation-token" in query:
        parts.append(_element("ContinuationToken", query["continuation-token"]))
    if truncated:
        parts.append(_element("NextContinuationToken", _token(page[-1].name)))
    if query.get("start-after"):
        parts.append(_element("StartAfter", name(query["start-after"])))
    parts.append("</ListBucketResult>")
    return _HEAD + "".join(parts).encode()


def _element(tag: str, text: str) -> str:
    return f"<{tag}>{escape(text)}</{tag}>" if text else f"<{tag}/>"
