"""One guard run (docs/deployment.md): state → window → scan → what is new → notify → state → metrics.

The scan itself is the ordinary one (`scan.run.scan` → Report); this module only decides the
window from the state and works on the report: findings and pending attempts keyed by
execution/node/attempt, gaps by source and time.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from forensics.cli.verbosity import add_secret
from forensics.config import Settings
from forensics.errors import SourceError, UsageError
from forensics.guard.items import (
    advance,
    pending_items,
    read_state,
    settle_claims,
    track_gaps,
    track_items,
    window_for,
    write_final,
)
from forensics.guard.metrics import GuardCollector, Snapshot, push, registry_for, write_textfile
from forensics.guard.notify import FORMATS, Delivery, Message, check_webhook, deliver, safe_url
from forensics.guard.state import (
    GuardState,
    StateConflict,
    StateStore,
    open_store,
)
from forensics.model import UTC, Report, Window, rfc3339
from forensics.timeutil import parse_duration

log = logging.getLogger("elastic-audit")


class Terminated(BaseException):
    """SIGTERM arrived outside a state write: the run stops, nothing is written."""


@dataclass(frozen=True)
class GuardOptions:
    """The guard flags of `scan` and `watch`, checked."""

    state: str | None = None
    overlap: timedelta = timedelta(hours=2)
    reset_state: bool = False
    notify: tuple[str, ...] = ()
    notify_format: str = "json"
    metrics_file: str | None = None
    pushgateway: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.state or self.notify or self.metrics_file or self.pushgateway)


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
    if state is not None:
        open_store(state)  # a bad path or URI is a usage error now, not after the scan
    return GuardOptions(
        state=state,
        overlap=lap,
        reset_state=reset_state,
        notify=tuple(notify),
        notify_format=notify_format,
        metrics_file=metrics_file,
        pushgateway=pushgateway,
    )


# -- signals ------------------------------------------------------------------------------------


class _Signals:
    """SIGTERM stops a scan at once (nothing written) but waits for a state write to finish;
    Ctrl-C likewise waits for the write (a half-delivered claim would otherwise linger)."""

    def __init__(self) -> None:
        self.critical = False
        self.deferred: int | None = None
        self.terminated = False
        self.wrote = False  # a state write or delivery section completed in this run

    def handler(self, signum: int, frame: Any) -> None:
        if self.critical:
            self.deferred = signum
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.terminated = True
        raise Terminated()

    @contextmanager
    def installed(self) -> Iterator[_Signals]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = {s: signal.signal(s, self.handler) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    @contextmanager
    def write_section(self) -> Iterator[None]:
        self.critical = True
        try:
            yield
            self.wrote = True
        finally:
            self.critical = False
        if self.deferred is not None:
            signum, self.deferred = self.deferred, None
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.terminated = True
            raise Terminated()


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one guard run did; `exit_code` follows docs/exit-codes.md (3 also for a failed delivery)."""

    report: Report
    report_doc: dict[str, Any]
    exit_code: int
    deliveries: list[Delivery] = field(default_factory=list)
    new_notified: int = 0


def run_once(
    settings: Settings,
    scope: Any,
    *,
    since: str | None,
    until: str | None,
    options: GuardOptions,
    scan: Callable[[Window], Report],
    collector: GuardCollector | None = None,
    signals: _Signals | None = None,
    watch: bool = False,
    page_url: Callable[[], str | None] = lambda: None,
) -> Outcome:
    """One guard run; raises StateConflict (exit 2) when another run wrote the state meanwhile."""
    sig = signals or _Signals()
    now = datetime.now(UTC)
    store: StateStore | None = open_store(options.state) if options.state else None
    scope_doc = {"projects": sorted(scope.projects), "domains": sorted(scope.domains)}
    state, token = read_state(store, options.reset_state, scope_doc)
    # watch: --since is only where the very first run starts
    first_since = since if not (watch and state is not None and state.scanned_until) else None
    window = window_for(state, first_since, until, options.overlap, now, location=options.state)

    started = time.monotonic()
    report = scan(window)
    duration = time.monotonic() - started
    finished = datetime.now(UTC)

    state = state or GuardState(scope=scope_doc)
    run = _Run(store, state, token, uuid.uuid4().hex, finished, sig)
    doc = report.as_dict()
    findings_docs: list[dict[str, Any]] = doc["findings"]  # type: ignore[assignment]
    pending_docs = pending_items(report, doc)
    if pending_docs and "pending" not in doc:
        doc["pending"] = pending_docs
    keep, to_notify = track_items(state, findings_docs, pending_docs, run.run_id, finished)
    gaps_now, new_gaps = track_gaps(state, doc["gaps"], window)  # type: ignore[arg-type]
    advance(state, window, report, finished, keep)

    outcome = Outcome(report, doc, _exit_code(report))
    if options.notify and (to_notify or new_gaps):
        message = _message(report, window, to_notify, new_gaps, page_url())
        _notify(run, options, message, to_notify, new_gaps, outcome)
    elif store is not None:
        if not options.notify:  # reported on stdout: that is this run's notification
            settle_claims(
                state, run.run_id, True, finished, new_gaps, keys=[k for k, _ in to_notify]
            )
        with sig.write_section():
            store.write(state, run.token)

    snap = _snapshot(state, report, findings_docs, len(pending_docs), len(gaps_now), duration)
    if not _publish(snap, options, collector):
        outcome.exit_code = 3
    return outcome


@dataclass
class _Run:
    """The state this run writes, with its version token, and who and when it is."""

    store: StateStore | None
    state: GuardState
    token: str | None
    run_id: str
    finished: datetime
    signals: _Signals


def _notify(
    run: _Run,
    options: GuardOptions,
    message: Message,
    to_notify: list[tuple[str, dict[str, Any]]],
    new_gaps: list[dict[str, Any]],
    outcome: Outcome,
) -> None:
    """Claim the items, deliver, then record the delivery (at least once: a failed one leaves
    the items unnotified for the next run, exit 3)."""
    state, store, sig = run.state, run.store, run.signals
    for k, _ in to_notify:  # claim them first: a concurrent run now leaves them alone
        state.items[k]["claimed_by"] = run.run_id
        state.items[k]["claimed_at"] = rfc3339(run.finished) or ""
    if store is not None:
        with sig.write_section():
            run.token = store.write(state, run.token)
    with sig.write_section():
        outcome.deliveries = deliver(options.notify, message, options.notify_format)
        delivered = all(d.error is None for d in outcome.deliveries)
        for d in outcome.deliveries:
            _say_delivery(d, message)
        settle_claims(state, run.run_id, delivered, run.finished, new_gaps)
        if store is not None:
            run.token = write_final(store, state, run.token, run.run_id, delivered, run.finished)
    if delivered:
        outcome.new_notified = len(to_notify)
    else:
        outcome.exit_code = 3


def _say_delivery(d: Delivery, message: Message) -> None:
    if d.error is None:
        said = message.summary.removeprefix("elastic-audit: ")
        print(f"elastic-audit: notified {d.target}: {said}", file=sys.stderr)
    else:
        print(
            f"elastic-audit: error: notify {d.target}: {d.error}; "
            "the items stay unnotified and the next run sends them again",
            file=sys.stderr,
        )


def _snapshot(
    state: GuardState,
    report: Report,
    findings: list[dict[str, Any]],
    pending: int,
    gaps: int,
    duration: float,
) -> Snapshot:
    """The metric values of this run (counters from the state)."""
    return Snapshot(
        findings={
            v: sum(1 for f in findings if f.get("verdict") == v) for v in ("affected", "suspected")
        },
        new_findings_total=dict(state.new_findings_total),
        pending=pending,
        gaps=gaps,
        complete=report.complete,
        last_complete_scan=(
            state.last_complete_scan.timestamp() if state.last_complete_scan else None
        ),
        duration=duration,
        source_errors_total=dict(state.source_errors_total),
    )


def _publish(snap: Snapshot, options: GuardOptions, collector: GuardCollector | None) -> bool:
    """Hand the values to `collector` (watch's /metrics), the textfile and the Pushgateway;
    False when the push failed (said on stderr)."""
    collector = collector or GuardCollector()
    collector.update(snap)
    registry = registry_for(collector)
    if options.metrics_file:
        write_textfile(options.metrics_file, registry)
    if options.pushgateway:
        try:
            push(options.pushgateway, registry)
        except SourceError as e:
            print(f"elastic-audit: error: {e}", file=sys.stderr)
            return False
    return True


def _exit_code(report: Report) -> int:
    """docs/exit-codes.md as `scan` applies it: pending attempts and unresolved Flyte pods exit 1 too."""
    if not report.complete:
        return 3
    unresolved = getattr(report, "unresolved", ())
    return 1 if (report.findings or pending_items(report, {}) or unresolved) else 0


def _message(
    report: Report,
    window: Window,
    items: list[tuple[str, dict[str, Any]]],
    gaps: list[dict[str, Any]],
    page_url: str | None = None,
) -> Message:
    findings = [i for k, i in items if k.startswith("finding:")]
    pending = [i for k, i in items if k.startswith("pending:")]
    counts = {
        v: sum(1 for f in findings if f.get("verdict") == v) for v in ("affected", "suspected")
    }
    w = window.as_dict()
    summary = (
        f"elastic-audit: {counts['affected']} new affected, {counts['suspected']} new suspected, "
        f"{len(pending)} new pending, {len(gaps)} new gap(s) in {w['start']} – {w['end']}"
        + ("" if report.complete else " (scan INCOMPLETE)")
    )
    return Message(
        summary=summary,
        window=w,
        complete=report.complete,
        findings=findings,
        pending=pending,
        gaps=[{k: v for k, v in g.items() if k != "notified"} for g in gaps],
        page_url=page_url,
    )


__all__ = [
    "GuardOptions",
    "Outcome",
    "StateConflict",
    "Terminated",
    "guard_options",
    "run_once",
    "safe_url",
]
