"""Atomic file replacement: a temp file in the same directory, fsync, rename — all or nothing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: bytes, *, suffix: str = ".tmp") -> None:
    """Replace `path` by `data`; an existing file keeps its mode (and owner when run as root)."""
    path = Path(path)
    try:
        st = path.stat()
        mode, owner = st.st_mode & 0o7777, (st.st_uid, st.st_gid)
    except FileNotFoundError:
        mode, owner = 0o644, None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if owner and os.geteuid() == 0:  # keep the owner when run as root (sudo, CI)
            os.chown(tmp, *owner)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
