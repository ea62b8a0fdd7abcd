"""Unpacking a tarball that came from elsewhere (a GitHub archive, a PyPI sdist) without trusting it.

Every member is checked before anything is written: no absolute paths, no `..`, no links out of the
archive, no devices, and a cap on bytes and members (decompression bombs). Python's own `data`
filter is used on top where the interpreter has it; it arrived in 3.10.12, 3.11.4 and 3.12, and the
tool supports older patch releases (Debian 12's python3 is 3.11.2), so the checks here do not rely
on it.
"""

from __future__ import annotations

import posixpath
import re
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

EXTRACT_LIMIT = 1024**3  # bytes unpacked
MEMBER_LIMIT = 100_000


class UnsafeArchive(Exception):
    """The archive holds a member that could escape its directory, or unpacks past the limit."""


def unsafe_member(m: tarfile.TarInfo) -> str | None:
    """Why this member must not be unpacked, or None."""
    name = m.name
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "absolute path"
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "path with '..'"
    if m.ischr() or m.isblk() or m.isfifo():
        return "device or fifo"
    if m.issym() or m.islnk():
        if m.linkname.startswith("/"):
            return "link to an absolute path"
        base = posixpath.dirname(name) if m.issym() else ""
        target = posixpath.normpath(posixpath.join(base, m.linkname))
        if target == ".." or target.startswith("../"):
            return "link out of the archive"
    elif not (m.isfile() or m.isdir()):
        return "unsupported member type"
    return None


def extract_tarball(
    archive: Path, into: Path, *, max_bytes: int = EXTRACT_LIMIT, max_members: int = MEMBER_LIMIT
) -> Path:
    """Unpack `archive` under `into`; returns its single top directory, else `into`.

    Raises UnsafeArchive, with nothing written, when a member is refused or the limits are passed;
    and when the file is not a readable tarball.
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = []
            total = 0
            for m in tar:
                why = unsafe_member(m)
                if why:
                    raise UnsafeArchive(f"member {m.name!r}: {why}")
                total += max(m.size, 0)
                if total > max_bytes or len(members) >= max_members:
                    raise UnsafeArchive("unpacks to more than the limit")
                members.append(m)
            into.mkdir(parents=True, exist_ok=True)
            extra: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(into, members=members, **extra)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise UnsafeArchive(f"cannot be unpacked: {e}") from None
    entries = list(into.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into
