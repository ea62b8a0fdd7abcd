"""Log lines are untrusted input: one shaped like HTML is shown as text on the incident page and
on `show -o html`, and nothing in it runs (checked in Chromium, not by reading the HTML)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.browser import chromium, visit
from support.cli import run
from support.page_checks import keep, opened_cleanly
from support.scan import CONFIG, WINDOW, sandbox_fixtures

from forensics.evidence.logs import SIGNAL_LINE_REGEX
from forensics.model import Window, from_ns
from forensics.sandbox.incident import REFERENCE, WINDOW_END, WINDOW_START, reference_scenario

pytestmark = pytest.mark.e2e

PAYLOAD = (
    "<img src=x onerror=\"document.title='pwned'\">"
    "<script>document.title='pwned'</script></code></li>&amp;"
)


def _scenario():
    """The reference incident plus two lines carrying markup: an evidence line of the reference
    pod (`show` lists it), and the window's earliest death-signal line in a stream without a
    pod label, which the scan cannot read and shows as its example."""
    scenario = reference_scenario()
    pod = f"{REFERENCE[2]}-n0-0"
    line = next(
        e
        for e in scenario.log_lines
        if pod in e.labels.values() and re.search(SIGNAL_LINE_REGEX, e.line)
    )
    scenario.log_lines.append(
        replace(line, ts_ns=line.ts_ns + 10**9, line=f"{line.line} {PAYLOAD}")
    )
    window = Window(WINDOW_START, WINDOW_END)
    first = min(
        (
            e
            for e in scenario.log_lines
            if from_ns(e.ts_ns) in window and re.search(SIGNAL_LINE_REGEX, e.line)
        ),
        key=lambda e: e.ts_ns,
    )
    labels = {k: v for k, v in first.labels.items() if k != "pod"}
    scenario.log_lines.append(
        replace(first, ts_ns=first.ts_ns - 10**9, labels=labels, line=f"{first.line} {PAYLOAD}")
    )
    return scenario


box, env = sandbox_fixtures(_scenario, CONFIG)


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def test_log_lines_shaped_like_html_are_shown_as_text_and_never_run(browser, tmp_path, capsys):
    pages = []
    for name, args, codes in (
        ("xss-show", ["show", ":".join(REFERENCE), "-o", "html"], (0, 1)),
        # the scan reads the payload's stream, which has no pod label: a gap naming the label
        ("xss-scan", ["scan", *WINDOW, "-o", "html", "--no-progress"], (3,)),
    ):
        code, out, err = run(args, capsys)
        assert code in codes, err
        assert code != 3 or "pod_label = pod" in err, err
        html = tmp_path / f"{name}.html"
        html.write_text(out, encoding="utf-8")
        pages.append(html)
    for html in pages:
        with visit(browser, html, 1280) as v:
            opened_cleanly(v, html)
            assert v.page.title() != "pwned"
            markup = "() => document.querySelectorAll('script, img, iframe, object, embed').length"
            assert v.page.evaluate(markup) == 0
            assert PAYLOAD in v.page.evaluate("() => document.body.innerText"), html.name
            keep(v, html.stem, capsys)
