"""Checks of the incident page in the browser, shared by the browser tests: counts in the DOM
against the JSON report and `show -o json`, overflow, a clean load, kept screenshots."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from support.browser import visit
from support.cli import run

ARTIFACTS = Path(
    os.environ.get(
        "ELASTIC_AUDIT_ARTIFACTS", Path(tempfile.gettempdir()) / "elastic-audit-artifacts"
    )
)
WIDTHS = (390, 1280)

COUNT_JS = """() => [...document.querySelectorAll('section.execution')].map(s => ({
  execution: s.dataset.execution,
  attempts: Number(s.dataset.attempts),
  bars: [...s.querySelectorAll('rect.bar')].map(b => b.dataset.verdict),
  signals: s.querySelectorAll('line.marker.signal').length,
  false_successes: s.querySelectorAll('line.marker.false-success').length,
  checkpoint_writes: s.querySelectorAll('line.marker.checkpoint').length,
}))"""

SERIES_JS = """() => Object.fromEntries([...document.querySelectorAll('.series')].map(s =>
  [s.dataset.series, [...s.querySelectorAll('rect.count')].reduce((n, r) => n + Number(r.dataset.count), 0)]))"""

# Every box that pokes out of the viewport, and every block whose text is wider than it.
OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth, bad = [];
  if (document.documentElement.scrollWidth > vw) bad.push('page scrolls sideways');
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + 0.5 || r.left < -0.5) bad.push(`${el.tagName} ${r.left}-${r.right}`);
    if (!(el instanceof SVGElement) && el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
      bad.push(`${el.tagName} text wider than its box: ${(el.textContent || '').slice(0, 60)}`);
  }
  return bad.slice(0, 10);
}"""


def keep(v, name: str, capsys) -> Path:
    """A full-page screenshot kept as the test's artefact (its path printed)."""
    path = ARTIFACTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    v.page.screenshot(path=str(path), full_page=True)
    with capsys.disabled():
        print(f"\nscreenshot: {path}")
    return path


def opened_cleanly(v, html: Path) -> None:
    assert v.errors == [] and v.dialogs == []
    assert [m for m in v.console if m[0] in ("error", "warning")] == []
    assert v.requests == [html.resolve().as_uri()], "a request left the file"


def scan_page(tmp_path: Path, capsys, *args: str) -> tuple[Path, dict]:
    """`scan -o html --report FILE`: one run, the page on stdout and the JSON report beside it."""
    report = tmp_path / "report.json"
    code, out, err = run(["scan", *args, "-o", "html", "--report", report, "--no-progress"], capsys)
    assert code == 1, err
    html = tmp_path / "page.html"
    html.write_text(out, encoding="utf-8")
    return html, json.loads(report.read_text())


def show_json(capsys, execution: dict) -> dict:
    ref = f"{execution['project']}:{execution['domain']}:{execution['name']}"
    code, out, err = run(["show", ref, "-o", "json"], capsys)
    assert code == 0, err
    return json.loads(out)


def check_counts(v, report: dict, capsys) -> None:
    """Bars and markers in the DOM against the report and each execution's `show -o json`."""
    drawn = {d["execution"]: d for d in v.page.evaluate(COUNT_JS)}
    by_execution: dict[str, list[dict]] = {}
    for f in report["findings"]:
        e = f["execution"]
        by_execution.setdefault(f"{e['project']}:{e['domain']}:{e['name']}", []).append(f)
    assert set(drawn) == set(by_execution)
    for ref, findings in by_execution.items():
        d = drawn[ref]
        shown = [show_json(capsys, findings[0]["execution"])]
        again = next((f["relaunched_as"] for f in findings if f["relaunched_as"]), None)
        if again:
            shown.append(show_json(capsys, again))
        attempts = [a for s in shown for a in s["attempts"]]
        assert len(d["bars"]) == d["attempts"] == len(attempts), ref
        for verdict in ("affected", "suspected"):
            assert d["bars"].count(verdict) == sum(f["verdict"] == verdict for f in findings)
        assert d["signals"] == sum(a["signal_at"] is not None for a in attempts), ref
        assert d["false_successes"] == len(findings), ref
        # one marker per object under each finding's checkpoint prefix
        writes = sum(f["checkpoint"]["objects"] for f in findings)
        assert d["checkpoint_writes"] == writes, ref
    # The hourly chart counts what the report counts.
    s, totals = report["summary"], v.page.evaluate(SERIES_JS)
    signalled = sum(
        n for k, n in s["cleared"].items() if k.startswith("signal-") and "not-a-flyte" not in k
    )
    assert totals["signals"] == s["affected"] + s["pending"] + signalled + len(report["unresolved"])
    assert totals["silent"] == len(report["findings"])
    assert totals["retried"] == s["cleared"].get("signal-then-failed-and-retried", 0)
    assert totals["relaunches"] == len(
        {json.dumps(f["relaunched_as"]) for f in report["findings"] if f["relaunched_as"]}
    )


def check_page(browser, html: Path, report: dict, name: str, capsys) -> None:
    for width in WIDTHS:
        with visit(browser, html, width) as v:
            opened_cleanly(v, html)
            assert v.page.title() != "pwned"
            check_counts(v, report, capsys)
            assert v.page.evaluate(OVERFLOW_JS) == [], width
            keep(v, f"{name}-{width}", capsys)
