"""The guard's one run over a scan of in-process fakes: what is new is said once, a window a
source could not read is scanned again by the next run."""

from __future__ import annotations

from datetime import timedelta

from support.fakes import (
    WINDOW,
    fake_sources,
    silent_green,
)

from forensics.config import Settings
from forensics.guard import GuardOptions, run_guard
from forensics.model import rfc3339
from forensics.scan.run import ScanRun
from forensics.scan.scope import ScanScope


def world():
    sources = fake_sources()
    silent_green(sources)
    return sources


def guard(sources, options, since=None, until=rfc3339(WINDOW.end)):
    windows = []

    def scan(window):
        windows.append(window)
        return ScanRun(sources, window, ScanScope()).run()

    outcome = run_guard(
        Settings(), ScanScope(), since=since, until=until, options=options, scan=scan
    )
    return outcome, windows[0]


def test_a_finding_is_new_once(tmp_path):
    sources = world()
    options = GuardOptions(state=str(tmp_path / "state.json"))
    first, _ = guard(sources, options, since=rfc3339(WINDOW.start))
    assert [f["new"] for f in first.report_doc["findings"]] == [True]
    assert first.report.complete and first.report.findings and first.state_written
    second, window = guard(sources, options)
    # The next run starts where the first ended, less the overlap, and finds it again: not new.
    assert window.start == WINDOW.end - options.overlap
    assert [f["new"] for f in second.report_doc["findings"]] == []
    third, _ = guard(sources, options, since=rfc3339(WINDOW.start))
    assert [f["new"] for f in third.report_doc["findings"]] == [False]


def test_a_window_loki_could_not_read_is_scanned_again(tmp_path):
    sources = world()
    sources.loki.fail(WINDOW.start, WINDOW.end)
    options = GuardOptions(state=str(tmp_path / "state.json"))
    first, _ = guard(sources, options, since=rfc3339(WINDOW.start))
    assert not first.report.complete and first.report_doc["gaps"]
    _, window = guard(sources, options, until=rfc3339(WINDOW.end + timedelta(hours=1)))
    assert window.start == WINDOW.start  # the open gap's start, not the last end less overlap
