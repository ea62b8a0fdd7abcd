"""Where a command's result goes: a report path that is a symbolic link, a device or a FIFO is
written as a shell's `>` would (a link stays a link, a device is never replaced by a file); a
file or a stdout the system refuses is one line and exit 2, never a traceback, and a scan whose
report file fails after the scan still prints its result."""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from support.cli import run, use_sandbox
from support.scan import WINDOW

from forensics.cli import common
from forensics.cli.common import check_writable_file, emit, write_atomically
from forensics.errors import OutputError
from forensics.fsutil import FileSet, write_atomic


def test_a_symbolic_link_stays_a_link_and_its_file_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "reports" / "latest.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    check_writable_file(str(link), "--report")
    write_atomic(link, b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["latest.json"]  # no temp left


def test_a_dangling_link_writes_the_file_it_names(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to(tmp_path / "made.json")
    write_atomic(link, b"x")
    assert link.is_symlink() and (tmp_path / "made.json").read_bytes() == b"x"


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    check_writable_file(str(fifo), "--report")
    write_atomic(fifo, b"through the pipe")
    reader.join(timeout=10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO: the old code renamed a file over it


def test_a_file_set_keeps_a_linked_file_a_link(tmp_path: Path) -> None:
    real = tmp_path / "requirements-real.txt"
    real.write_bytes(b"a\n")
    link = tmp_path / "requirements.txt"
    link.symlink_to(real.name)
    files = FileSet({link: b"a\n"})
    files.write({link: b"b\n"})
    assert link.is_symlink() and real.read_bytes() == b"b\n"


def test_a_file_the_system_refuses_is_an_output_error_naming_it(tmp_path: Path) -> None:
    gone = tmp_path / "gone" / "report.json"  # its folder removed after the up-front check
    with pytest.raises(OutputError) as e:
        write_atomically(str(gone), "{}")
    assert str(e.value) == f"{gone}: not written (No such file or directory)"


def test_a_stdout_that_refuses_the_result_is_an_output_error(monkeypatch) -> None:
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(common.sys, "stdout", Full())
    with pytest.raises(OutputError) as e:
        emit("{}")
    assert str(e.value) == "standard output: not written (No space left on device)"


def test_a_reader_that_stopped_reading_is_left_to_the_process_end(monkeypatch) -> None:
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(common.sys, "stdout", Closed())
    with pytest.raises(BrokenPipeError):  # `process.end` makes it exit 1, quietly
        emit("{}")


@pytest.mark.integration
def test_a_report_file_refused_after_the_scan_keeps_the_result_on_stdout(
    box, tmp_path, monkeypatch, capsys
) -> None:
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"

    def refused(path: str, text: str) -> None:  # what the kernel says of an immutable file
        raise OutputError(path, os.strerror(errno.EPERM))

    monkeypatch.setattr("forensics.cli.scan.write_atomically", refused)
    code, out, err = run(["scan", *WINDOW, "-o", "json", "--report", report], capsys)
    assert code == 2
    assert json.loads(out)["summary"]["affected"] > 0  # the result was not lost
    assert err.strip().splitlines()[-1] == (
        f"elastic-audit: error: --report {report}: not written (Operation not permitted; "
        "the result went to standard output only)"
    )
    assert "Traceback" not in err and not report.exists()


@pytest.mark.integration
def test_a_scan_report_through_a_link_keeps_the_link(box, tmp_path, monkeypatch, capsys) -> None:
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)
    kept = tmp_path / "kept.json"
    kept.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(kept)
    code, out, _ = run(["scan", *WINDOW, "-o", "json", "--report", link], capsys)
    assert code == 1
    assert link.is_symlink()
    assert json.loads(kept.read_text()) == json.loads(out)
