"""Unpacking sdists and source archives on every Python the README supports.

`TarFile.extractall(filter=...)` and `tarfile.data_filter` arrived in 3.10.12, 3.11.4 and 3.12;
Debian 12's python3 is 3.11.2. A CI run under that interpreter failed every plugin-fix test with
"extractall() got an unexpected keyword argument 'filter'". These tests give the tool that older
tarfile and check that the fix's sdist still unpacks, and that the tool's own checks still refuse
what the data filter would have.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from support.tarballs import member, tarball

from forensics.errors import UsageError
from forensics.plugin_fix import build


@pytest.fixture
def old_tarfile(monkeypatch: pytest.MonkeyPatch) -> None:
    """tarfile as Python 3.11.2 has it: no data filter, and extractall takes no `filter`."""
    original = tarfile.TarFile.extractall

    def extractall(self, path=".", members=None, *, numeric_owner=False, **kwargs):
        if kwargs:
            raise TypeError(
                f"extractall() got an unexpected keyword argument {next(iter(kwargs))!r}"
            )
        return original(self, path, members, numeric_owner=numeric_owner)

    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)


def _sdist(path: Path, *members: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    path.write_bytes(tarball(*members))
    return path


def test_sdist_unpacks_where_tarfile_has_no_data_filter(tmp_path: Path, old_tarfile) -> None:
    sdist = _sdist(
        tmp_path / "plugin-1.0.tar.gz",
        (member("plugin-1.0/setup.py"), b"__version__ = '1.0'\n"),
        (member("plugin-1.0/pkg/task.py"), b"x = 1\n"),
    )
    top = build._unpack(sdist, tmp_path / "src")
    assert top == tmp_path / "src/plugin-1.0"
    assert (top / "pkg/task.py").read_text() == "x = 1\n"


@pytest.mark.parametrize(
    ("hostile", "why"),
    [
        ((member("plugin-1.0/../../escaped.py"), b"x"), "path with '..'"),
        (
            (member("plugin-1.0/link", tarfile.SYMTYPE, "../../etc"), None),
            "link out of the archive",
        ),
    ],
)
def test_hostile_sdist_is_refused_without_the_data_filter(
    tmp_path: Path, old_tarfile, hostile, why
) -> None:
    sdist = _sdist(tmp_path / "plugin-1.0.tar.gz", (member("plugin-1.0/ok.py"), b"x"), hostile)
    with pytest.raises(UsageError, match=f"plugin-1.0.tar.gz: member .*: {why}"):
        build._unpack(sdist, tmp_path / "src")
    assert not (tmp_path / "src").exists()
    assert not (tmp_path / "escaped.py").exists()
