"""Tarballs built in memory, for the tests of what refuses to unpack them."""

from __future__ import annotations

import gzip
import io
import tarfile


def tarball(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    """A .tar.gz of the members; a member with data is a file of that data."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(buf.getvalue())


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info
