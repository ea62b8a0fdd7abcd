"""One guard run (docs/deployment.md): state → window → scan → what is new → notify → state → metrics.

The scan itself is the ordinary one (`scan.run.scan` → Report); this module only decides the
window from the state and works on the report: findings and pending attempts keyed by
execution/node/attempt, gaps by source and time.
"""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from forensics.config import Settings
from forensics.errors import SourceError
from forensics.guard.items import (
    Item,
    advance,
    read_state,
    settle_claims,
    track_gaps,
    track_items,
    window_for,
    write_final,
)
from forensics.guard.metrics import GuardCollector, Snapshot, push, registry_for, write_textfile
from forensics.guard.notify import Delivery, Message, deliver, safe_url
from forensics.guard.state import (
    GuardState,
    OpenGap,
    StateConflict,
    StateStore,
    open_store,
)
from forensics.model import UTC, Finding, Report, Window, rfc3339

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


# -- signals ------------------------------------------------------------------------------------


class Signals:
    """SIGTERM stops a scan at once (nothing written) but waits for a state write to finish;
    Ctrl-C likewise waits for the write (a half-delivered claim would otherwise linger).

    `handler` is what the command line installs for SIGTERM and SIGINT while a run goes on
    (forensics/cli/guard.py); the run marks its state writes with `write_section`."""

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
class GuardOutcome:
    """What one guard run did: the report, its findings marked `new` (None when SIGTERM ended
    the run during its scan), each notification's delivery, whether the metrics reached the
    Pushgateway (`push_error` otherwise), whether a state write completed, whether SIGTERM
    ended the run, and the incident page when one was made."""

    report: Report | None
    deliveries: list[Delivery] = field(default_factory=list)
    new_notified: int = 0
    push_error: SourceError | None = None
    state_written: bool = False
    terminated: bool = False
    page: Any = None  # forensics.page.IncidentPage

    @property
    def report_doc(self) -> dict[str, Any]:
        """The report's JSON document (docs/report.md; findings carry `new`), {} without one."""
        return self.report.as_dict() if self.report is not None else {}

    @property
    def delivered(self) -> bool:
        """Every notification and the metrics push arrived (or none was asked for)."""
        return self.push_error is None and all(d.error is None for d in self.deliveries)


def run_once(
    settings: Settings,
    scope: Any,
    *,
    since: str | None,
    until: str | None,
    options: GuardOptions,
    scan: Callable[[Window], Report],
    collector: GuardCollector | None = None,
    signals: Signals | None = None,
    watch: bool = False,
    page_url: Callable[[], str | None] = lambda: None,
    on_delivery: Callable[[Delivery, Message], None] | None = None,
) -> GuardOutcome:
    """One guard run; raises StateConflict when another run wrote the state meanwhile, and
    Terminated when SIGTERM arrived outside a state write. `on_delivery` hears each
    notification's delivery as soon as it is known."""
    sig = signals or Signals()
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
    findings, keep, to_notify = track_items(
        state, report.findings, report.pending, run.run_id, finished
    )
    report = replace(report, findings=tuple(findings))  # each finding says whether it is new
    gaps_now, new_gaps = track_gaps(state, report.gaps, window)
    advance(state, window, report, finished, keep)

    outcome = GuardOutcome(report)
    if options.notify and (to_notify or new_gaps):
        message = _message(report, window, to_notify, new_gaps, page_url())
        _notify(run, options, message, to_notify, new_gaps, outcome, on_delivery)
    elif store is not None:
        if not options.notify:  # reported on stdout: that is this run's notification
            settle_claims(
                state, run.run_id, True, finished, new_gaps, keys=[k for k, _ in to_notify]
            )
        with sig.write_section():
            store.write(state, run.token)

    snap = _snapshot(state, report, len(gaps_now), duration)
    outcome.push_error = _publish(snap, options, collector)
    outcome.state_written = sig.wrote
    return outcome


@dataclass
class _Run:
    """The state this run writes, with its version token, and who and when it is."""

    store: StateStore | None
    state: GuardState
    token: str | None
    run_id: str
    finished: datetime
    signals: Signals


def _notify(
    run: _Run,
    options: GuardOptions,
    message: Message,
    to_notify: list[tuple[str, Item]],
    new_gaps: list[OpenGap],
    outcome: GuardOutcome,
    on_delivery: Callable[[Delivery, Message], None] | None,
) -> None:
    """Claim the items, deliver, then record the delivery (at least once: a failed one leaves
    the items unnotified for the next run)."""
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
            if on_delivery is not None:
                on_delivery(d, message)
        settle_claims(state, run.run_id, delivered, run.finished, new_gaps)
        if store is not None:
            run.token = write_final(store, state, run.token, run.run_id, delivered, run.finished)
    if delivered:
        outcome.new_notified = len(to_notify)


def _snapshot(state: GuardState, report: Report, gaps: int, duration: float) -> Snapshot:
    """The metric values of this run (counters from the state)."""
    return Snapshot(
        findings={
            v: sum(1 for f in report.findings if f.verdict == v) for v in ("affected", "suspected")
        },
        new_findings_total=dict(state.new_findings_total),
        pending=len(report.pending),
        gaps=gaps,
        complete=report.complete,
        last_complete_scan=(
            state.last_complete_scan.timestamp() if state.last_complete_scan else None
        ),
        duration=duration,
        source_errors_total=dict(state.source_errors_total),
    )


def _publish(
    snap: Snapshot, options: GuardOptions, collector: GuardCollector | None
) -> SourceError | None:
    """Hand the values to `collector` (watch's /metrics), the textfile and the Pushgateway;
    the Pushgateway's error when the push failed."""
    collector = collector or GuardCollector()
    collector.update(snap)
    registry = registry_for(collector)
    if options.metrics_file:
        write_textfile(options.metrics_file, registry)
    if options.pushgateway:
        try:
            push(options.pushgateway, registry)
        except SourceError as e:
            return e
    return None


def _message(
    report: Report,
    window: Window,
    items: list[tuple[str, Item]],
    gaps: list[OpenGap],
    page_url: str | None = None,
) -> Message:
    """What is new, in the report's JSON shapes (the webhook's payload)."""
    findings = [i for _, i in items if isinstance(i, Finding)]
    pending = [i.as_dict() for _, i in items if not isinstance(i, Finding)]
    counts = {v: sum(1 for f in findings if f.verdict == v) for v in ("affected", "suspected")}
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
        findings=[f.as_dict() for f in findings],
        pending=pending,
        gaps=[g.gap.as_dict() for g in gaps],
        page_url=page_url,
    )


__all__ = [
    "GuardOptions",
    "GuardOutcome",
    "Signals",
    "StateConflict",
    "Terminated",
    "run_once",
    "safe_url",
]
