"""S3 locations as Flyte writes them, parsed without the S3 client (no boto3 import): what the
scan's call plan, the guard's state and the incident page need before a store is made."""

from __future__ import annotations

OUTPUTS_FILE = "outputs.pb"


class UnreadableURI(ValueError):
    """A location this store cannot read: not `s3://`, or no bucket (or key) in it."""


def split_s3_uri(uri: str, *, need_key: bool) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key), raising UnreadableURI with a one-line reason.

    Parsed by hand rather than with urlsplit: S3 keys may contain `?` and `#`.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep:
        raise UnreadableURI(f"unsupported location {uri!r}: not an s3:// URI")
    if scheme.lower() != "s3":
        raise UnreadableURI(f"unsupported scheme {scheme}://: only s3:// is read")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise UnreadableURI(f"malformed URI {uri!r}: no bucket")
    if need_key and not key:
        raise UnreadableURI(f"malformed URI {uri!r}: no object key")
    return bucket, key
