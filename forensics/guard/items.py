"""What a guard run remembers between runs (docs/deployment.md): the state it reads, the window
that follows from it, findings and pending attempts keyed by execution/node/attempt, who claimed
them for a notification, and the open gaps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from forensics.guard.state import (
    RESET_STATE,
    STATE,
    GuardState,
    OpenGap,
    StateConflict,
    StateStore,
    parse_optional,
)
from forensics.model import UTC, AttemptRef, Finding, Gap, Pending, Report, Window, rfc3339
from forensics.params import ParamConfigError, ParamError
from forensics.timeutil import SINCE, UNTIL, parse_until, parse_window

# A claim (a run delivering a notification) younger than this keeps other runs from notifying
# the same items; an older one is a run that died mid-delivery, and its items are sent again.
CLAIM_LEASE = timedelta(minutes=10)


def item_key(kind: str, ref: AttemptRef) -> str:
    """`finding:project:domain:name/node/attempt` (or `pending:…`): an item's key in the state."""
    return f"{kind}:{ref}"


def overlaps(a: Gap, b: Gap) -> bool:
    if a.source != b.source:
        return False
    lo = datetime.min.replace(tzinfo=UTC)
    hi = datetime.max.replace(tzinfo=UTC)
    return (a.start or lo) <= (b.end or hi) and (b.start or lo) <= (a.end or hi)


def clamped(gap: Gap, window: Window) -> Gap:
    """A gap within the window (Admin gaps span an execution's life, which may start earlier)."""
    start = window.start if gap.start is None else max(gap.start, window.start)
    end = window.end if gap.end is None else min(max(gap.end, start), window.end)
    return replace(gap, start=start, end=end)


Item = Finding | Pending


def track_items(
    state: GuardState,
    findings: Sequence[Finding],
    pending: Sequence[Pending],
    run_id: str,
    now: datetime,
) -> tuple[list[Finding], set[str], list[tuple[str, Item]]]:
    """Record this run's findings and pending attempts in the state (first seen, counters);
    return the findings with `new` set, the keys reported and the items to notify."""
    before = set(state.items)
    keep: set[str] = set()
    to_notify: list[tuple[str, Item]] = []
    marked: list[Finding] = []
    items: list[tuple[str, Item]] = [("finding", f) for f in findings]
    items += [("pending", p) for p in pending]
    for kind, item in items:
        k = item_key(kind, item.attempt)
        keep.add(k)
        entry = state.items.get(k)
        verdict = str(item.verdict) if isinstance(item, Finding) else "pending"
        if entry is None:
            entry = {
                "kind": kind,
                "verdict": verdict,
                "first_seen": rfc3339(now) or "",
                "notified": "",
            }
            state.items[k] = entry
            if kind == "finding":
                state.new_findings_total[verdict] = state.new_findings_total.get(verdict, 0) + 1
        if isinstance(item, Finding):
            item = replace(item, new=k not in before)
            marked.append(item)
            entry["verdict"] = verdict  # suspected may become affected
        if not entry["notified"]:
            entry["doc"] = item
            if not claimed_by_other(entry, run_id, now):
                to_notify.append((k, item))
    # Items an earlier run could not deliver that this window no longer reaches: sent again
    # from the state (at least once, docs/deployment.md).
    for k, entry in state.items.items():
        if k not in keep and not entry["notified"] and "doc" in entry:
            if not claimed_by_other(entry, run_id, now):
                to_notify.append((k, entry["doc"]))
    return marked, keep, to_notify


def uncovered(gaps: list[OpenGap], window: Window) -> list[OpenGap]:
    """The parts of `gaps` outside `window`."""
    out = []
    for o in gaps:
        start, end = o.gap.start, o.gap.end
        if start is not None and start < window.start:
            cut = window.start if end is None else min(end, window.start)
            out.append(OpenGap(replace(o.gap, end=cut), o.notified))
        if end is not None and end > window.end:
            cut = window.end if start is None else max(start, window.end)
            out.append(OpenGap(replace(o.gap, start=cut), o.notified))
    return out


def claimed_by_other(entry: dict[str, str], run_id: str, now: datetime) -> bool:
    by, at = entry.get("claimed_by"), parse_optional(entry.get("claimed_at"))
    return bool(by) and by != run_id and at is not None and now - at < CLAIM_LEASE


def settle_claims(
    state: GuardState,
    run_id: str,
    delivered: bool,
    now: datetime,
    new_gaps: list[OpenGap],
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
            g.notified = True


def write_final(
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


def track_gaps(
    state: GuardState, gaps: Sequence[Gap], window: Window
) -> tuple[list[OpenGap], list[OpenGap]]:
    """This run's gaps (clamped to the window) and those of them that are new.

    A gap is new unless an open gap of the last run (same source, overlapping) was already
    notified; this run's gaps become the open gaps (its window covers the old ones). An explicit
    --since/--until window may not cover every open gap: what lies outside it stays open.
    """
    gaps_now = []
    for g in gaps:
        gap = clamped(g, window)
        notified = any(o.notified for o in state.open_gaps if overlaps(o.gap, gap))
        gaps_now.append(OpenGap(gap, notified))
    new_gaps = [g for g in gaps_now if not g.notified]
    for g in gaps_now:
        source = g.gap.source
        state.source_errors_total[source] = state.source_errors_total.get(source, 0) + 1
    state.open_gaps = gaps_now + uncovered(state.open_gaps, window)
    return gaps_now, new_gaps


def window_for(
    state: GuardState | None,
    since: str | None,
    until: str | None,
    overlap: timedelta,
    now: datetime,
    *,
    location: str | None,
) -> Window:
    """`since` when given; else from `scanned_until - overlap` or the earliest open gap."""
    if since is not None:
        return parse_window(since, until, now=now)
    if state is None or state.scanned_until is None:
        if location is None:
            raise ParamError(SINCE, " is required (or ", STATE, " with an earlier run's state)")
        raise ParamError(
            SINCE, f" is required for the first run: state {location} does not exist yet"
        )
    end = parse_until(until, now)
    start = state.scanned_until - overlap
    for g in state.open_gaps:
        if g.gap.start is not None:
            start = min(start, g.gap.start)
    if start >= end:
        raise ParamError(
            UNTIL, f" ({rfc3339(end)}) is not after the state's window start ({rfc3339(start)})"
        )
    return Window(start, end)


def read_state(
    store: StateStore | None, reset: bool, scope_doc: dict[str, list[str]]
) -> tuple[GuardState | None, str | None]:
    """The state and its version token; a state written for another scope is refused."""
    if store is None:
        return None, None
    if reset:
        _, token = store.read_raw()  # start over, but still only if nobody wrote meanwhile
        return None, token
    state, token = store.read()
    if state is not None and state.scope != scope_doc:
        raise ParamConfigError(
            f"state {store.location} was written for {scope_text(state.scope)}, this run scans "
            f"{scope_text(scope_doc)}; use one ",
            STATE,
            " per scope (or ",
            RESET_STATE,
            ")",
        )
    return state, token


def advance(
    state: GuardState, window: Window, report: Report, finished: datetime, keep: set[str]
) -> None:
    """Move the progress mark (never back), count the run, forget what is long gone."""
    if state.scanned_until is None or window.end > state.scanned_until:
        state.scanned_until = window.end
    if report.complete:
        state.last_complete_scan = finished
    state.runs += 1
    state.prune(finished, keep)


def scope_text(scope: dict[str, list[str]]) -> str:
    p = ",".join(scope["projects"]) or "every project"
    d = ",".join(scope["domains"]) or "the configured domains"
    return f"{p} / {d}"
