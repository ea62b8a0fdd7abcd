"""forensics.guard.run_guard as a library call (docs/deployment.md): one guard run against the
sandbox returns what happened — the report, the deliveries, whether the state was written —
and prints nothing; the exit code is the command line's (forensics/cli/exits.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from support.guard import HTTPRecorder
from support.scan import CONFIG

from forensics import notices
from forensics.cli.exits import for_scan
from forensics.config import load_settings
from forensics.guard import GuardOptions, run_guard
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox
from forensics.scan.scope import ScanScope

pytestmark = pytest.mark.integration


def test_run_guard_returns_what_happened_and_prints_nothing(tmp_path, capsys):
    heard: list[notices.Retrying] = []
    previous = notices.listen(heard.append)
    hook = HTTPRecorder()
    try:
        with sandbox(reference_scenario()) as box, box.apply_env():
            cfg = tmp_path / "cfg.toml"
            cfg.write_text(CONFIG)
            state = tmp_path / "state.json"
            settings = load_settings(config=str(cfg))
            options = GuardOptions(state=str(state), overlap=timedelta(hours=2), notify=(hook.url,))
            first = run_guard(settings, ScanScope((), ()), since="2026-09-04", options=options)
            assert first.report is not None and first.report.findings
            assert first.delivered and first.state_written and not first.terminated
            assert len(first.deliveries) == 1 and len(hook.posts()) == 1
            new = [f for f in first.report_doc["findings"] if f.get("new")]
            assert len(new) == len(first.report.findings)
            assert for_scan(first.report, undelivered=not first.delivered) == 1
            # The next run continues from the state: nothing new, nobody notified again.
            second = run_guard(settings, ScanScope((), ()), options=options)
            assert second.report is not None and second.deliveries == []
            assert len(hook.posts()) == 1
            assert json.loads(state.read_text())["runs"] == 2
    finally:
        hook.close()
        notices.listen(previous)
    out, err = capsys.readouterr()
    assert out == "" and err == ""  # the command line says things; the library does not
    assert heard == []  # the sandbox answered at once: no retry to tell anyone about


def test_run_guard_takes_a_timedelta_or_a_datetime_where_the_cli_takes_text(tmp_path):
    from datetime import datetime

    from forensics.model import UTC

    with sandbox(reference_scenario()) as box, box.apply_env():
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(CONFIG)
        settings = load_settings(config=str(cfg))
        until = datetime(2026, 9, 11, tzinfo=UTC)
        windows = []
        for n, since in enumerate((timedelta(days=7), datetime(2026, 9, 4, tzinfo=UTC))):
            options = GuardOptions(state=str(tmp_path / f"state{n}.json"), overlap=timedelta(0))
            outcome = run_guard(
                settings, ScanScope((), ()), since=since, until=until, options=options
            )
            windows.append(outcome.report.window)
    assert windows[0] == windows[1]
    assert windows[0].start == datetime(2026, 9, 4, tzinfo=UTC)
