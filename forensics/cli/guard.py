"""Guard mode on the command line: its flags checked, its signals installed, its run said.

The run itself is forensics.guard.run_guard; this module checks `--state`, `--notify`, … up
front, installs the SIGTERM/SIGINT handler for the run, says each delivery and failure on
stderr, prints the report and chooses the exit code (forensics/cli/exits.py).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from forensics.cli import exits
from forensics.cli.common import check_writable_file
from forensics.cli.verbosity import add_secret
from forensics.errors import UsageError
from forensics.guard import GuardOptions, GuardOutcome, Page, Signals, run_guard, scanner
from forensics.guard.notify import FORMATS, Delivery, Message, check_webhook
from forensics.guard.state import open_store
from forensics.secrets import userinfo_secrets
from forensics.timeutil import parse_duration

if TYPE_CHECKING:
    from forensics.config import Settings
    from forensics.model import Report, Window
    from forensics.scan.scope import ScanScope


def guard_options(
    *,
    state: str | None,
    overlap: str,
    reset_state: bool,
    notify: list[str],
    notify_format: str,
    metrics_file: str | None,
    pushgateway: str | None,
) -> GuardOptions:
    """Check the guard flags up front (exit 2 before any scan), secrets never echoed."""
    try:
        lap = parse_duration(overlap)
    except ValueError as e:
        raise UsageError(f"--overlap: {e}") from None
    if lap is None:
        raise UsageError(f"--overlap {overlap!r}: not a duration (90m, 2h, 1d)")
    if reset_state and not state:
        raise UsageError("--reset-state needs --state")
    if notify_format not in FORMATS:
        raise UsageError(f"--notify-format {notify_format!r}: choose json or slack")
    for url in notify:
        check_webhook(url)
        add_secret(url)  # urllib3's -vv debug log prints the request path, the webhook's secret
    if pushgateway is not None and not pushgateway.startswith(("http://", "https://")):
        raise UsageError("--pushgateway: not an http(s) URL")
    for part in userinfo_secrets(pushgateway or ""):
        add_secret(part)  # its user:password (basic auth), masked like every credential
    if state is not None:
        open_store(state)  # a bad path or URI is a usage error now, not after the scan
        if not state.startswith("s3://"):
            check_writable_file(state, "--state")  # a file system that refuses even root
    return GuardOptions(
        state=state,
        overlap=lap,
        reset_state=reset_state,
        notify=tuple(notify),
        notify_format=notify_format,
        metrics_file=metrics_file,
        pushgateway=pushgateway,
    )


@contextmanager
def installed(signals: Signals) -> Iterator[Signals]:
    """`signals` handles SIGTERM and SIGINT while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    old = {s: signal.signal(s, signals.handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield signals
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def say_delivery(d: Delivery, message: Message) -> None:
    if d.error is None:
        said = message.summary.removeprefix("elastic-audit: ")
        print(f"elastic-audit: notified {d.target}: {said}", file=sys.stderr)
    else:
        print(
            f"elastic-audit: error: notify {d.target}: {d.error}; "
            "the items stay unnotified and the next run sends them again",
            file=sys.stderr,
        )


def say_failures(outcome: GuardOutcome) -> None:
    """What the run could not do that is not in the report: the metrics push."""
    if outcome.push_error is not None:
        print(f"elastic-audit: error: {outcome.push_error}", file=sys.stderr)


def _say_page(page: Any) -> None:
    for gap in page.gaps:
        print(f"elastic-audit: error: incident page: {gap.error}", file=sys.stderr)


def cli_scanner(
    settings: Settings, scope: ScanScope, no_progress: bool, page: Page | None = None
) -> Callable[[Window], Report]:
    """The guard's scan of one window as the command line runs it: a progress bar on a
    terminal, flytekit brought into line, the incident page's failures said."""
    from forensics.cli.process import open_sources
    from forensics.cli.progress import Progress

    return scanner(
        settings,
        scope,
        page=page,
        progress=lambda: Progress.for_terminal(no_progress),
        sources=open_sources,
        on_page=_say_page,
    )


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
    signals = Signals()
    page = Page(report_html, wanted=fmt == "html" or report_html is not None)
    with installed(signals):
        outcome = run_guard(
            settings,
            scope,
            since=since,
            until=until,
            options=options,
            scan=cli_scanner(settings, scope, no_progress, page),
            signals=signals,
            page=page,
            on_delivery=say_delivery,
        )
    if outcome.terminated:
        if outcome.state_written:
            print("elastic-audit: terminated after finishing the state write", file=sys.stderr)
        else:
            print(
                "elastic-audit: terminated; the state is as it was before this run", file=sys.stderr
            )
        return exits.TERMINATED
    say_failures(outcome)
    emit_outcome(outcome, fmt, report_path, page.page)
    return exits.for_scan(
        outcome.report,
        exit_zero=exit_zero,
        page_gaps=bool(page.page is not None and page.page.gaps),
        undelivered=not outcome.delivered,
    )


def emit_outcome(
    outcome: GuardOutcome, fmt: str, report_path: str | None, page: Any = None
) -> None:
    """The report on stdout (and in --report): JSON from the guard's document, which adds `new`
    per finding; other formats through the ordinary renderers (`html`: the incident `page`)."""
    from forensics.cli.display import render
    from forensics.fsutil import write_atomic

    text = json.dumps(outcome.report_doc, indent=2) + "\n"
    if report_path:
        write_atomic(report_path, text.encode("utf-8"))
    out = text if fmt == "json" else render(page if fmt == "html" else outcome.report, fmt)
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    sys.stdout.flush()
