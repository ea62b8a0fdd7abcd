"""The guard's one run over a scan of in-process fakes: what is new is said once, a window a
source could not read is scanned again by the next run."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest
from support.fakes import (
    WINDOW,
    fake_sources,
    silent_green,
)

from forensics.config import Settings
from forensics.errors import ConfigError
from forensics.guard import GuardOptions, run_guard
from forensics.guard.items import track_gaps, track_items
from forensics.guard.state import GuardState
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


def _stored(report) -> GuardState:
    """A state holding the report's findings as unnotified items and its gaps as open ones."""
    state = GuardState()
    _, _, to_notify = track_items(state, report.findings, report.pending, "run", WINDOW.end)
    track_gaps(state, report.gaps, WINDOW)
    assert to_notify
    return state


def test_the_state_holds_the_typed_report_and_writes_back_what_it_read(tmp_path):
    sources = world()
    sources.loki.fail(WINDOW.start, WINDOW.start + timedelta(hours=1))
    report = ScanRun(sources, WINDOW, ScanScope()).run()
    state = _stored(report)
    assert state.open_gaps
    data = state.to_json()
    again = GuardState.from_json(data, "state.json")
    (entry,) = again.items.values()
    assert entry["doc"] == replace(report.findings[0], new=True)  # typed, as reported
    assert [o.gap for o in again.open_gaps] == [
        replace(g, start=max(g.start, WINDOW.start), end=min(g.end, WINDOW.end))
        for g in report.gaps
    ]
    assert again.to_json() == data


def test_a_stale_state_whose_item_is_no_finding_is_refused_in_one_line(tmp_path):
    sources = world()
    doc = json.loads(_stored(ScanRun(sources, WINDOW, ScanScope()).run()).to_json())
    (entry,) = doc["items"].values()
    del entry["doc"]["checkpoint"]  # as a state written by hand, or by another tool
    with pytest.raises(ConfigError) as err:
        GuardState.from_json(json.dumps(doc).encode(), "state.json")
    assert "state state.json: malformed (KeyError: 'checkpoint')" in str(err.value)
    assert "\n" not in str(err.value)
