"""What a table says when a report has no findings: never an all-clear where nothing was read."""

from __future__ import annotations

from datetime import UTC, datetime

from forensics.formats.table import render
from forensics.model import Gap, Report, Summary, Window

WINDOW = Window(datetime(2026, 9, 4, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))
GAP = Gap("admin", WINDOW.start, WINDOW.end, "ListProjects: UNAVAILABLE")


def _table(examined: int, gaps: tuple[Gap, ...]) -> str:
    summary = Summary(attempts_examined=examined)
    return render(Report("elastic-audit", WINDOW, gaps, summary, ()))


def test_a_scan_that_examined_nothing_says_so_and_points_at_its_gaps() -> None:
    text = _table(0, (GAP,))
    assert "No attempt was examined; the GAP lines below say what could not be read." in text
    assert "No affected or suspected attempts" not in text  # no all-clear of any kind
    assert text.index("No attempt was examined") < text.index("GAP admin")


def test_a_partly_read_scan_says_nothing_was_found_in_what_it_read() -> None:
    text = _table(12, (GAP,))
    assert "No affected or suspected attempts in what could be read." in text


def test_a_complete_scan_of_nothing_is_plainly_clean() -> None:
    assert "No affected or suspected attempts." in _table(0, ())
