"""Guard mode (docs/deployment.md): `scan` on a schedule with memory — state, notifications, metrics."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forensics.guard.run import GuardOptions, Outcome, Terminated, _Signals, guard_options, run_once

if TYPE_CHECKING:
    from forensics.config import Settings
    from forensics.model import Report, Window
    from forensics.scan.scope import ScanScope


def scan_command(
    settings: Settings,
    scope: ScanScope,
    *,
    since: str | None,
    until: str | None,
    options: GuardOptions,
    fmt: str,
    report_path: str | None,
    exit_zero: bool,
    no_progress: bool,
    report_html: str | None = None,
) -> int:
    """`scan` with guard flags: one run, the report printed (JSON findings carry `new`), and
    the exit code of docs/exit-codes.md (3 also when a notification could not be delivered).
    With --report-html the page is written right after the scan, so the notification can link
    to it (an s3:// target: the object's HTTPS address, docs/deployment.md)."""
    signals = _Signals()
    page = _Page(report_html, wanted=fmt == "html" or report_html is not None)
    try:
        with signals.installed():
            outcome = run_once(
                settings,
                scope,
                since=since,
                until=until,
                options=options,
                scan=_scanner(settings, scope, no_progress, page),
                signals=signals,
                page_url=lambda: page.url,
            )
    except Terminated:
        if signals.wrote:
            print("elastic-audit: terminated after finishing the state write", file=sys.stderr)
        else:
            print(
                "elastic-audit: terminated; the state is as it was before this run", file=sys.stderr
            )
        return 143
    emit_outcome(outcome, fmt, report_path, page.page)
    if page.page is not None and page.page.gaps and outcome.exit_code < 3:
        outcome.exit_code = 3  # the page's timelines are incomplete (said on stderr)
    if outcome.exit_code == 1 and exit_zero:
        return 0
    return outcome.exit_code


@dataclass
class _Page:
    """The incident page of this run: where it goes, and once written the page and its link."""

    target: str | None
    wanted: bool
    page: Any = None  # forensics.page.IncidentPage
    url: str | None = None


def _scanner(
    settings: Settings, scope: ScanScope, no_progress: bool, page: _Page | None = None
) -> Callable[[Window], Report]:
    """The ordinary scan of one window, with fresh sources each time (the guard's `scan`),
    then the incident page when asked for (written before anyone is notified)."""

    def scan_window(window: Window) -> Report:
        from forensics.cli.progress import Progress
        from forensics.scan.run import scan
        from forensics.sources import Sources

        with (
            Progress.for_terminal(no_progress) as progress,
            Sources.from_settings(settings) as sources,
        ):
            report = scan(sources, window, scope, progress=progress)
            if page is not None and page.wanted:
                from forensics.page_publish import publish_page

                page.page, page.url = publish_page(sources, report, page.target)
                for gap in page.page.gaps:
                    print(f"elastic-audit: error: incident page: {gap.error}", file=sys.stderr)
            return report

    return scan_window


def emit_outcome(outcome: Outcome, fmt: str, report_path: str | None, page: Any = None) -> None:
    """The report on stdout (and in --report): JSON from the guard's document, which adds `new`
    per finding; other formats through the ordinary renderers (`html`: the incident `page`)."""
    from forensics.formats import render
    from forensics.fsutil import write_atomic

    text = json.dumps(outcome.report_doc, indent=2) + "\n"
    if report_path:
        write_atomic(report_path, text.encode("utf-8"))
    out = text if fmt == "json" else render(page if fmt == "html" else outcome.report, fmt)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    sys.stdout.flush()


__all__ = ["GuardOptions", "emit_outcome", "guard_options", "run_once", "scan_command"]
