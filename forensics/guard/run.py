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

from forensics.config import Settings
from forensics.errors import ConfigError, SourceError, UsageError
from forensics.guard.metrics import GuardCollector, Snapshot, push, registry_for, write_textfile
from forensics.guard.notify import FORMATS, Delivery, Message, check_webhook, deliver, safe_url
from forensics.guard.state import (
    GuardState,
    StateConflict,
    StateStore,
    open_store,
    parse_optional,
)
from forensics.model import UTC, Report, Window, rfc3339
from forensics.timeutil import parse_duration, parse_time, parse_window
from forensics.verbosity import add_secret

log = logging.getLogger("elastic-audit")

# A claim (a run delivering a notification) younger than this keeps other runs from notifying
# the same items; an older one is a run that died mid-delivery, and its items are sent again.
CLAIM_LEASE = timedelta(minutes=10)


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


# -- keys and items -----------------------------------------------------------------------------


def item_key(kind: str, item: dict[str, Any]) -> str:
    e = item["execution"]
    return f"{kind}:{e['project']}:{e['domain']}:{e['name']}/{item['node_id']}/{item['attempt']}"


def pending_items(report: Report, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's pending attempts in their JSON shape (docs/report.md): the report's own `pending`
    list when it has one, else `report.pending` items (objects with `as_dict()`, or dicts);
    empty when the report has none."""
    listed = doc.get("pending")
    items = listed if isinstance(listed, list) else getattr(report, "pending", ()) or ()
    out = []
    for p in items:
        d = p.as_dict() if hasattr(p, "as_dict") else p
        if isinstance(d, dict) and "execution" in d:
            out.append(d)
    return out


def _overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["source"] != b["source"]:
        return False
    a0, a1 = parse_optional(a["start"]), parse_optional(a["end"])
    b0, b1 = parse_optional(b["start"]), parse_optional(b["end"])
    lo = datetime.min.replace(tzinfo=UTC)
    hi = datetime.max.replace(tzinfo=UTC)
    return (a0 or lo) <= (b1 or hi) and (b0 or lo) <= (a1 or hi)


def _clamped(gap: dict[str, Any], window: Window) -> dict[str, Any]:
    """A gap within the window (Admin gaps span an execution's life, which may start earlier)."""
    start = parse_optional(gap.get("start"))
    end = parse_optional(gap.get("end"))
    start = window.start if start is None else max(start, window.start)
    end = window.end if end is None else min(max(end, start), window.end)
    return {**gap, "start": rfc3339(start), "end": rfc3339(end)}


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one guard run did; `exit_code` follows docs/exit-codes.md (3 also for a failed delivery)."""

    report: Report
    report_doc: dict[str, Any]
    exit_code: int
    deliveries: list[Delivery] = field(default_factory=list)
    new_notified: int = 0


def window_for(
    state: GuardState | None,
    since: str | None,
    until: str | None,
    overlap: timedelta,
    now: datetime,
    *,
    location: str | None,
) -> Window:
    """`--since` when given; else from `scanned_until - overlap` or the earliest open gap."""
    if since is not None:
        return parse_window(since, until, now=now)
    if state is None or state.scanned_until is None:
        if location is None:
            raise UsageError("--since is required (or --state with an earlier run's state)")
        raise UsageError(
            f"--since is required for the first run: state {location} does not exist yet"
        )
    end = parse_time(until, flag="--until") if until is not None else now
    start = state.scanned_until - overlap
    for g in state.open_gaps:
        s = parse_optional(g["start"])
        if s is not None:
            start = min(start, s)
    if start >= end:
        raise UsageError(
            f"--until ({rfc3339(end)}) is not after the state's window start ({rfc3339(start)})"
        )
    return Window(start, end)


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
) -> Outcome:
    """One guard run; raises StateConflict (exit 2) when another run wrote the state meanwhile."""
    sig = signals or _Signals()
    now = datetime.now(UTC)
    store: StateStore | None = open_store(options.state) if options.state else None
    state: GuardState | None = None
    token: str | None = None
    if store is not None:
        if options.reset_state:
            _, token = store.read_raw()  # start over, but still only if nobody wrote meanwhile
        else:
            state, token = store.read()
    scope_doc = {"projects": sorted(scope.projects), "domains": sorted(scope.domains)}
    if state is not None and state.scope != scope_doc:
        raise ConfigError(
            f"state {options.state} was written for {_scope_text(state.scope)}, this run scans "
            f"{_scope_text(scope_doc)}; use one --state per scope (or --reset-state)"
        )
    # watch: --since is only where the very first run starts
    first_since = since if not (watch and state is not None and state.scanned_until) else None
    window = window_for(state, first_since, until, options.overlap, now, location=options.state)

    started = time.monotonic()
    report = scan(window)
    duration = time.monotonic() - started
    finished = datetime.now(UTC)

    state = state or GuardState(scope=scope_doc)
    run_id = uuid.uuid4().hex

    doc = report.as_dict()
    findings_docs: list[dict[str, Any]] = doc["findings"]  # type: ignore[assignment]
    pending_docs = pending_items(report, doc)
    if pending_docs and "pending" not in doc:
        doc["pending"] = pending_docs
    keep, to_notify = _track_items(state, findings_docs, pending_docs, run_id, finished)

    # Gaps: a gap is new unless an open gap of the last run (same source, overlapping) was
    # already notified; this run's gaps become the open gaps (its window covers the old ones).
    gaps_now = [_clamped(g, window) for g in doc["gaps"]]  # type: ignore[union-attr]
    new_gaps = []
    for g in gaps_now:
        old = [o for o in state.open_gaps if _overlaps(o, g)]
        g["notified"] = any(o["notified"] for o in old)
        if not g["notified"]:
            new_gaps.append(g)
    for g in gaps_now:
        state.source_errors_total[g["source"]] = state.source_errors_total.get(g["source"], 0) + 1
    # An explicit --since/--until window may not cover every open gap: what lies outside it
    # stays open (and the progress mark never moves back).
    state.open_gaps = gaps_now + _uncovered(state.open_gaps, window)
    if state.scanned_until is None or window.end > state.scanned_until:
        state.scanned_until = window.end
    if report.complete:
        state.last_complete_scan = finished
    state.runs += 1
    state.prune(finished, keep)

    outcome = Outcome(report, doc, _exit_code(report))
    delivered = True
    if options.notify and (to_notify or new_gaps):
        message = _message(report, window, to_notify, new_gaps)
        for k, _ in to_notify:  # claim them first: a concurrent run now leaves them alone
            state.items[k]["claimed_by"] = run_id
            state.items[k]["claimed_at"] = rfc3339(finished) or ""
        if store is not None:
            with sig.write_section():
                token = store.write(state, token)
        with sig.write_section():
            outcome.deliveries = deliver(options.notify, message, options.notify_format)
            delivered = all(d.error is None for d in outcome.deliveries)
            for d in outcome.deliveries:
                if d.error is None:
                    said = message.summary.removeprefix("elastic-audit: ")
                    print(f"elastic-audit: notified {d.target}: {said}", file=sys.stderr)
                else:
                    print(
                        f"elastic-audit: error: notify {d.target}: {d.error}; "
                        "the items stay unnotified and the next run sends them again",
                        file=sys.stderr,
                    )
            _settle_claims(state, run_id, delivered, finished, new_gaps)
            if store is not None:
                token = _write_final(store, state, token, run_id, delivered, finished)
        if delivered:
            outcome.new_notified = len(to_notify)
        else:
            outcome.exit_code = 3
    elif store is not None:
        if not options.notify:  # reported on stdout: that is this run's notification
            _settle_claims(state, run_id, True, finished, new_gaps, keys=[k for k, _ in to_notify])
        with sig.write_section():
            store.write(state, token)

    snap = _snapshot(state, report, findings_docs, len(pending_docs), len(gaps_now), duration)
    if not _publish(snap, options, collector):
        outcome.exit_code = 3
    return outcome


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


def _track_items(
    state: GuardState,
    findings: list[dict[str, Any]],
    pending: list[dict[str, Any]],
    run_id: str,
    now: datetime,
) -> tuple[set[str], list[tuple[str, dict[str, Any]]]]:
    """Record this run's findings and pending attempts in the state (first seen, counters,
    `new` on each finding); return the keys reported and the items to notify."""
    before = set(state.items)
    keep: set[str] = set()
    to_notify: list[tuple[str, dict[str, Any]]] = []
    for kind, docs in (("finding", findings), ("pending", pending)):
        for item in docs:
            k = item_key(kind, item)
            keep.add(k)
            entry = state.items.get(k)
            if entry is None:
                verdict = str(item.get("verdict", "pending"))
                entry = {
                    "kind": kind,
                    "verdict": verdict,
                    "first_seen": rfc3339(now) or "",
                    "notified": "",
                }
                state.items[k] = entry
                if kind == "finding":
                    state.new_findings_total[verdict] = state.new_findings_total.get(verdict, 0) + 1
            if kind == "finding":
                item["new"] = k not in before
                entry["verdict"] = str(item.get("verdict"))  # suspected may become affected
            if not entry["notified"]:
                entry["doc"] = item
                if not _claimed_by_other(entry, run_id, now):
                    to_notify.append((k, item))
    # Items an earlier run could not deliver that this window no longer reaches: sent again
    # from the state (at least once, docs/deployment.md).
    for k, entry in state.items.items():
        if k not in keep and not entry["notified"] and "doc" in entry:
            if not _claimed_by_other(entry, run_id, now):
                to_notify.append((k, entry["doc"]))
    return keep, to_notify


def _uncovered(gaps: list[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
    """The parts of `gaps` outside `window`."""
    out = []
    for g in gaps:
        start, end = parse_optional(g["start"]), parse_optional(g["end"])
        if start is not None and start < window.start:
            cut = window.start if end is None else min(end, window.start)
            out.append({**g, "end": rfc3339(cut)})
        if end is not None and end > window.end:
            cut = window.end if start is None else max(start, window.end)
            out.append({**g, "start": rfc3339(cut)})
    return out


def _scope_text(scope: dict[str, list[str]]) -> str:
    p = ",".join(scope["projects"]) or "every project"
    d = ",".join(scope["domains"]) or "the configured domains"
    return f"{p} / {d}"


def _claimed_by_other(entry: dict[str, str], run_id: str, now: datetime) -> bool:
    by, at = entry.get("claimed_by"), parse_optional(entry.get("claimed_at"))
    return bool(by) and by != run_id and at is not None and now - at < CLAIM_LEASE


def _settle_claims(
    state: GuardState,
    run_id: str,
    delivered: bool,
    now: datetime,
    new_gaps: list[dict[str, Any]],
    keys: list[str] | None = None,
) -> None:
    """Mark this run's claimed items notified (or release them), and its new gaps."""
    for k, entry in state.items.items():
        mine = entry.get("claimed_by") == run_id or (keys is not None and k in keys)
        if not mine:
            continue
        entry.pop("claimed_by", None)
        entry.pop("claimed_at", None)
        if delivered:
            entry["notified"] = rfc3339(now) or ""
            entry.pop("doc", None)
    if delivered:
        for g in new_gaps:
            g["notified"] = True


def _write_final(
    store: StateStore,
    state: GuardState,
    token: str | None,
    run_id: str,
    delivered: bool,
    now: datetime,
) -> str | None:
    """Write the settled state; if another run wrote since the claim, apply only this run's
    delivery outcome to what it wrote (a few tries), never its whole state over theirs."""
    try:
        return store.write(state, token)
    except StateConflict:
        pass
    mine = {k for k, v in state.items.items() if v.get("notified") == rfc3339(now) and delivered}
    for _ in range(5):
        theirs, token = store.read()
        if theirs is None:
            break
        for k, entry in theirs.items.items():
            if entry.get("claimed_by") == run_id or k in mine:
                entry.pop("claimed_by", None)
                entry.pop("claimed_at", None)
                if delivered:
                    entry["notified"] = rfc3339(now) or ""
                    entry.pop("doc", None)
        try:
            return store.write(theirs, token)
        except StateConflict:
            continue
    raise StateConflict(f"state {store.location}: could not record the delivery after 5 tries")


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
