"""The demo's incident page and `show -o html` in a real browser (Debian's Chromium, headless,
through playwright; no skip: .ci/run installs it): they open with no console error and no request
leaving the file, every attempt is a bar and every signal and false success a marker, counted in
the DOM against the JSON report and `show -o json`, no text runs out of the page at 390 and
1280 px, dark mode and print. A screenshot of each is kept (its path printed)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from support.browser import chromium, visit
from support.cli import run
from support.page_checks import (
    ARTIFACTS,
    COUNT_JS,
    OVERFLOW_JS,
    WIDTHS,
    check_page,
    keep,
    opened_cleanly,
    scan_page,
    show_json,
)
from support.scan import CONFIG, WINDOW, sandbox_fixtures

from forensics.model import UTC, Window
from forensics.sandbox.incident import REFERENCE, reference_scenario
from forensics.sandbox.loki_server import FaultRule

pytestmark = pytest.mark.e2e

box, env = sandbox_fixtures(reference_scenario)


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def test_the_demos_page_draws_every_attempt_and_marker_the_report_has(browser, tmp_path, capsys):
    html, report = scan_page(tmp_path, capsys, *WINDOW)
    assert report["findings"]
    check_page(browser, html, report, "demo", capsys)


def test_the_page_follows_dark_mode_and_prints_light(browser, tmp_path, capsys):
    html, _ = scan_page(tmp_path, capsys, *WINDOW)
    bg = "() => getComputedStyle(document.body).backgroundColor"
    with visit(browser, html, 1280, scheme="dark") as v:
        assert v.page.evaluate(bg) == "rgb(13, 17, 23)"
        keep(v, "demo-dark-1280", capsys)
        v.page.emulate_media(media="print", color_scheme="dark")
        assert v.page.evaluate(bg) == "rgb(255, 255, 255)"
        pdf = ARTIFACTS / "demo-print.pdf"
        assert v.page.evaluate("() => document.querySelectorAll('section').length") > 5
    with visit(browser, html, 1280) as v:
        assert v.page.evaluate(bg) == "rgb(255, 255, 255)"
    # Printing (Chromium's own PDF) works without any request either.
    with visit(browser, html, 1280) as v:
        v.page.pdf(path=str(pdf))
        assert pdf.stat().st_size > 10_000
        assert len(v.requests) == 1


def test_show_html_draws_the_execution_with_every_evidence_line(browser, tmp_path, capsys):
    ref = ":".join(REFERENCE)
    code, out, err = run(["show", ref, "-o", "html"], capsys)
    assert code == 0, err
    html = tmp_path / "show.html"
    html.write_text(out, encoding="utf-8")
    data = show_json(capsys, dict(zip(("project", "domain", "name"), REFERENCE, strict=True)))
    for width in WIDTHS:
        with visit(browser, html, width) as v:
            opened_cleanly(v, html)
            (d,) = v.page.evaluate(COUNT_JS)
            assert len(d["bars"]) == len(data["attempts"])
            assert d["signals"] == sum(a["signal_at"] is not None for a in data["attempts"])
            items = v.page.evaluate("() => document.querySelectorAll('.events li').length")
            assert items == len(data["timeline"])
            assert v.page.evaluate(OVERFLOW_JS) == []
            keep(v, f"show-{width}", capsys)


def test_gaps_are_drawn_where_they_are_on_the_time_axis(box, browser, tmp_path, capsys):
    # Loki fails for one day (quick retries): the report's gap is drawn over that day.
    (tmp_path / "elastic-audit.toml").write_text(
        CONFIG.replace("[loki]\n", "[loki]\nretries = 1\nretry_backoff = 0.01\n")
    )
    day = Window(datetime(2026, 9, 6, tzinfo=UTC), datetime(2026, 9, 7, tzinfo=UTC))
    box.loki.faults.rules.append(FaultRule(500, count="always", window=day))
    report_file = tmp_path / "report.json"
    try:
        code, out, err = run(
            ["scan", *WINDOW, "-o", "html", "--report", report_file, "--no-progress"], capsys
        )
    finally:
        box.loki.faults.rules.clear()
    assert code == 3, err
    report = json.loads(report_file.read_text())
    html = tmp_path / "gaps.html"
    html.write_text(out, encoding="utf-8")
    start, end = (datetime.fromisoformat(report["window"][k]) for k in ("start", "end"))
    span = (end - start).total_seconds()
    with visit(browser, html, 1280) as v:
        opened_cleanly(v, html)
        drawn = v.page.evaluate(
            "() => [...document.querySelectorAll('#coverage rect.bar.gap')]"
            ".map(r => Number(r.getAttribute('x')))"
        )
        assert len(drawn) == len(report["gaps"]) > 0
        for x, gap in zip(
            sorted(drawn), sorted(report["gaps"], key=lambda g: g["start"]), strict=True
        ):
            at = (datetime.fromisoformat(gap["start"]) - start).total_seconds() / span * 1000
            assert abs(x - at) < 0.01
        assert "INCOMPLETE" in v.page.evaluate(
            "() => document.querySelector('#coverage').innerText"
        )
        keep(v, "demo-gaps-1280", capsys)
