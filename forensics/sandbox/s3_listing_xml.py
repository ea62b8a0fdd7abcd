"""The sandbox S3's ListObjectsV2 pages, written as moto writes them, without moto's serializer.

moto turns every answer into XML with a serializer driven by botocore's service model, whose CPU
lands on the scan's machine and made the benchmark's S3 phase measure moto (docs/performance.md,
"The benchmark's own servers on the scan's core"). For the pages a scan asks (no delimiter, no
owner) this writes the same bytes directly; anything else goes through moto's serializer.
`tests/sandbox/test_s3_server.py` compares the two byte for byte.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

_HEAD = b'<?xml version="1.0" encoding="utf-8"?>\n'
_ROOT = '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
# The members a plain page has, in the output shape's order (moto writes them in that order).
_AFTER_CONTENTS = (
    "Name",
    "Prefix",
    "MaxKeys",
    "EncodingType",  # "url", which botocore asks for: moto has encoded the keys already
    "KeyCount",
    "NextContinuationToken",
    "StartAfter",
)
_PAGE = frozenset({"IsTruncated", "Contents", *_AFTER_CONTENTS})
_OBJECT = frozenset({"Key", "LastModified", "ETag", "Size", "StorageClass"})
_CHECKSUM = "ChecksumAlgorithm"  # a list: one element each, after ETag (the shape's order)


def listing_xml(result: dict[str, Any]) -> bytes | None:
    """The body of a plain ListObjectsV2 page from moto's result dict; None for any other."""
    contents = result.get("Contents", ())
    if not set(result) <= _PAGE or any(set(o) - {_CHECKSUM} != _OBJECT for o in contents):
        return None
    parts = [_ROOT, _element("IsTruncated", "true" if result["IsTruncated"] else "false")]
    parts += [
        "<Contents>"
        + "".join(_element(m, str(o[m])) for m in ("Key", "LastModified", "ETag"))
        + "".join(_element(_CHECKSUM, a) for a in o.get(_CHECKSUM, ()))
        + _element("Size", str(o["Size"]))
        + _element("StorageClass", o["StorageClass"])
        + "</Contents>"
        for o in contents
    ]
    parts += [_element(m, str(result[m])) for m in _AFTER_CONTENTS if m in result]
    parts.append("</ListBucketResult>")
    return _HEAD + "".join(parts).encode()


def _element(name: str, text: str) -> str:
    """As moto's serializer writes it: an empty one self-closed."""
    return f"<{name}>{escape(text)}</{name}>" if text else f"<{name}/>"


def install() -> Any:
    """Answer plain ListObjectsV2 pages with `listing_xml`; returns what `uninstall` restores."""
    from moto import settings
    from moto.s3.responses import S3Response

    original = S3Response.serialized

    def serialized(self: Any, action_result: Any) -> Any:
        if self.data.get("Action") == "ListObjectsV2" and not settings.PRETTIFY_RESPONSES:
            body = listing_xml(action_result.result)
            if body is not None:
                headers = {"Content-Type": "application/xml"}
                headers.update(self.response_headers)
                return 200, headers, body
        return original(self, action_result)

    S3Response.serialized = serialized
    return original


def uninstall(original: Any) -> None:
    from moto.s3.responses import S3Response

    S3Response.serialized = original
