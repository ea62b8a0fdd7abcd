"""Writing files safely: one file atomically, or a set of files all or nothing (Ctrl-C included)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def _mode_and_owner(path: Path) -> tuple[int, tuple[int, int] | None]:
    try:
        st = path.stat()
    except FileNotFoundError:
        return 0o644, None
    return st.st_mode & 0o7777, (st.st_uid, st.st_gid)


def _stage(path: Path, data: bytes, suffix: str) -> str:
    """A temp file beside `path` holding `data` on disk, with `path`'s mode (and owner as root)."""
    mode, owner = _mode_and_owner(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if owner and os.geteuid() == 0:  # keep the owner when run as root (sudo, CI)
            os.chown(tmp, *owner)
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _unlink(tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


REGULAR, DIRECTORY = "a regular file", "a directory"
_KINDS = {
    stat.S_IFREG: REGULAR,
    stat.S_IFDIR: DIRECTORY,
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def file_kind(path: Path | str) -> str | None:
    """What is at `path`, a symbolic link followed (`REGULAR`, `DIRECTORY`, `a FIFO`, ...); None
    when nothing is (a dangling link included). OSError when it cannot be looked at (a folder
    on the way that may not be searched, a link loop); ValueError for a NUL in it."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def is_special(path: Path) -> bool:
    """Whether `path` is (or links to) something other than a regular file or a directory: a
    device such as /dev/null or /dev/stdout, a FIFO, a socket."""
    try:
        kind = file_kind(path)
    except (OSError, ValueError):
        return False
    return kind not in (None, REGULAR, DIRECTORY)


def replaced(path: Path) -> Path:
    """The file a write of `path` replaces: the file a symbolic link points at (the link stays a
    link), else `path` itself."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def write_atomic(path: Path | str, data: bytes, *, suffix: str = ".tmp") -> None:
    """Replace `path` by `data`; an existing file keeps its mode (and owner when run as root).
    A symbolic link stays a link (`replaced`); a device or a FIFO (`is_special`) is written
    into, as a shell's `>` does, never replaced by a file."""
    path = Path(path)
    if is_special(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    target = replaced(path)
    tmp = _stage(target, data, suffix)
    try:
        os.replace(tmp, target)
    except BaseException:
        _unlink(tmp)
        raise


class WriteFailed(Exception):
    """Writing `path` failed with `error`; every file was put back except those in `unrestored`."""

    def __init__(self, path: Path, error: OSError, unrestored: list[Path]) -> None:
        super().__init__(f"writing {path} failed: {error}")
        self.path = path
        self.error = error
        self.unrestored = unrestored


class FileSet:
    """Files written all or nothing, and put back as they were on demand.

    `originals` are the bytes each file holds before writing (what the caller computed its new
    content from). `write` stages every new content in a temp file beside its target first, then
    replaces the targets one by one; if anything at all interrupts the replacements (an OSError,
    Ctrl-C, SystemExit) every file already replaced is restored before the exception goes on, so
    the tree is never left half-written. `restore` also undoes a write that completed.
    """

    def __init__(self, originals: Mapping[Path, bytes], *, suffix: str = ".tmp") -> None:
        self.originals = dict(originals)
        self.suffix = suffix
        self.times: dict[Path, tuple[int, int]] = {}
        for path in self.originals:
            try:
                st = path.stat()
            except OSError:
                continue
            self.times[path] = (st.st_atime_ns, st.st_mtime_ns)
        self.written: list[Path] = []

    @classmethod
    def snapshot(cls, paths: Iterable[Path], *, suffix: str = ".tmp") -> FileSet:
        """The files as they are now, for a process that rewrites them in place (`uv lock`):
        `restore` puts back whichever of them it changed."""
        files = cls({path: path.read_bytes() for path in paths}, suffix=suffix)
        files.written = list(files.originals)
        return files

    def write(self, updates: Mapping[Path, bytes]) -> None:
        """Write every file of `updates` (each must be one of `originals`) or none of them.

        An OSError is raised as WriteFailed after the restore; any other exception as it is.
        """
        unknown = [path for path in updates if path not in self.originals]
        if unknown:
            raise ValueError(f"{unknown[0]}: not one of the files this set was read from")
        order = sorted(updates)
        staged: dict[Path, str] = {}
        try:
            for path in order:  # every new content on disk before the first target changes
                staged[path] = _stage(replaced(path), updates[path], self.suffix)
            for path in order:
                # Listed first: restore() compares bytes, so a file the replace never reached is
                # left alone, and one it reached (Ctrl-C right after it) is put back.
                self.written.append(path)
                os.replace(staged[path], replaced(path))
                del staged[path]
        except OSError as e:
            raise WriteFailed(path, e, self.restore()) from e
        except BaseException:
            self.restore()
            raise
        finally:
            for tmp in staged.values():
                _unlink(tmp)

    def restore(self) -> list[Path]:
        """Put every written file back; returns the files that could not be restored."""
        failed = []
        for path in reversed(self.written):
            try:
                if path.read_bytes() != self.originals[path]:
                    write_atomic(path, self.originals[path], suffix=self.suffix)
                if path in self.times:  # as it was, timestamps included (make, CI caches)
                    os.utime(path, ns=self.times[path])
            except OSError:
                failed.append(path)
        self.written = [p for p in self.written if p in failed]
        return failed
