"""Guard mode (docs/deployment.md): `scan` on a schedule with memory — state, notifications, metrics.

`run_guard` is one guard run as a library call: it prints nothing and chooses no exit code; the
command line (forensics/cli/guard.py) and the Flyte task (deploy/flyte/guard_workflow.py) say
what its `GuardOutcome` means.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forensics.guard.notify import Delivery, Message
from forensics.guard.run import (
    GuardOptions,
    GuardOutcome,
    Signals,
    StateConflict,
    Terminated,
    run_once,
)

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from forensics.config import Settings
    from forensics.model import Report, Window
    from forensics.progress import Progress
    from forensics.scan.scope import ScanScope
    from forensics.sources import Sources


@dataclass
class Page:
    """The incident page of a run: where it goes (`target`: a file, an s3:// key, or None for
    no copy), whether one is made at all, and once made the page and its link (an s3://
    target's HTTPS address, which notifications carry)."""

    target: str | None
    wanted: bool
    page: Any = None  # forensics.page.IncidentPage
    url: str | None = None


def run_guard(
    settings: Settings,
    scope: ScanScope,
    *,
    since: datetime | timedelta | str | None = None,
    until: datetime | str | None = None,
    options: GuardOptions,
    scan: Callable[[Window], Report] | None = None,
    signals: Signals | None = None,
    page: Page | None = None,
    on_delivery: Callable[[Delivery, Message], None] | None = None,
) -> GuardOutcome:
    """One guard run: state → window → scan → what is new → notify → state → metrics.

    `scan` scans one window (default: `scanner(settings, scope, page=page)`); `signals` is
    the run's SIGTERM/SIGINT handler when the caller installed one; with `page` the incident
    page is made right after the scan, so the notification can link to it. A SIGTERM ends the
    run with `terminated` set (and `state_written` saying whether a state write finished first);
    StateConflict and the other errors of a run are raised. `since`/`until` take what the CLI's
    `--since`/`--until` take, or a datetime (`since` a timedelta too)."""
    from forensics.arguments import since_text, until_text

    since, until = since_text(since), until_text(until)
    sig = signals or Signals()
    page = page or Page(None, wanted=False)
    try:
        outcome = run_once(
            settings,
            scope,
            since=since,
            until=until,
            options=options,
            scan=scan or scanner(settings, scope, page=page),
            signals=sig,
            page_url=lambda: page.url,
            on_delivery=on_delivery,
        )
    except Terminated:
        return GuardOutcome(None, state_written=sig.wrote, terminated=True, page=page.page)
    outcome.page = page.page
    return outcome


def scanner(
    settings: Settings,
    scope: ScanScope,
    *,
    page: Page | None = None,
    progress: Callable[[], AbstractContextManager[Progress]] | None = None,
    sources: Callable[[Settings], Sources] | None = None,
    on_page: Callable[[Any], None] | None = None,
) -> Callable[[Window], Report]:
    """The ordinary scan of one window, with fresh sources each time (the guard's `scan`),
    then the incident page when asked for (made before anyone is notified; `on_page` hears it).
    `progress` makes each scan's progress (a context: a bar is shown while it is open),
    `sources` opens the clients (default: the production ones)."""

    def scan_window(window: Window) -> Report:
        from forensics.progress import NULL
        from forensics.scan.run import scan
        from forensics.sources import Sources

        with (
            progress() if progress else nullcontext(NULL) as shown,
            (sources or Sources.from_settings)(settings) as clients,
        ):
            report = scan(clients, window, scope, progress=shown)
            if page is not None and page.wanted:
                from forensics.page_publish import publish_page

                page.page, page.url = publish_page(clients, report, page.target)
                if on_page is not None:
                    on_page(page.page)
            return report

    return scan_window


__all__ = [
    "GuardOptions",
    "GuardOutcome",
    "Page",
    "Signals",
    "StateConflict",
    "Terminated",
    "run_guard",
    "run_once",
    "scanner",
]
