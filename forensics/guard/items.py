"""What a guard run remembers between runs (docs/deployment.md): the state it reads, the window
that follows from it, findings and pending attempts keyed by execution/node/attempt, who claimed
them for a notification, and the open gaps."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from forensics.guard.state import (
    RESET_STATE,
    STATE,
    GuardState,
    StateConflict,
    StateStore,
    parse_optional,
)
from forensics.model import UTC, Report, Window, rfc3339
from forensics.params import ParamConfigError, ParamError
from forensics.timeutil import SINCE, UNTIL, parse_until, parse_window

# A claim (a run delivering a notification) younger than this keeps other runs from notifying
# the same items; an older one is a run that died mid-delivery, and its items are sent again.
CLAIM_LEASE = timedelta(minutes=10)


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


def overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a["source"] != b["source"]:
        return False
    a0, a1 = parse_optional(a["start"]), parse_optional(a["end"])
    b0, b1 = parse_optional(b["start"]), parse_optional(b["end"])
    lo = datetime.min.replace(tzinfo=UTC)
    hi = datetime.max.replace(tzinfo=UTC)
    return (a0 or lo) <= (b1 or hi) and (b0 or lo) <= (a1 or hi)


def clamped(gap: dict[str, Any], window: Window) -> dict[str, Any]:
    """A gap within the window (Admin gaps span an execution's life, which may start earlier)."""
    start = parse_optional(gap.get("start"))
    end = parse_optional(gap.get("end"))
    start = window.start if start is None else max(start, window.start)
    end = window.end if end is None else min(max(end, start), window.end)
    return {**gap, "start": rfc3339(start), "end": rfc3339(end)}


def track_items(
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
                if not claimed_by_other(entry, run_id, now):
                    to_notify.append((k, item))
    # Items an earlier run could not deliver that this window no longer reaches: sent again
    # from the state (at least once, docs/deployment.md).
    for k, entry in state.items.items():
        if k not in keep and not entry["notified"] and "doc" in entry:
            if not claimed_by_other(entry, run_id, now):
                to_notify.append((k, entry["doc"]))
    return keep, to_notify


def uncovered(gaps: list[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
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


def claimed_by_other(entry: dict[str, str], run_id: str, now: datetime) -> bool:
    by, at = entry.get("claimed_by"), parse_optional(entry.get("claimed_at"))
    return bool(by) and by != run_id and at is not None and now - at < CLAIM_LEASE


def settle_claims(
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
    state: GuardState, gaps: list[dict[str, Any]], window: Window
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """This run's gaps (clamped to the window) and those of them that are new.

    A gap is new unless an open gap of the last run (same source, overlapping) was already
    notified; this run's gaps become the open gaps (its window covers the old ones). An explicit
    --since/--until window may not cover every open gap: what lies outside it stays open.
    """
    gaps_now = [clamped(g, window) for g in gaps]
    new_gaps = []
    for g in gaps_now:
        old = [o for o in state.open_gaps if overlaps(o, g)]
        g["notified"] = any(o["notified"] for o in old)
        if not g["notified"]:
            new_gaps.append(g)
    for g in gaps_now:
        state.source_errors_total[g["source"]] = state.source_errors_total.get(g["source"], 0) + 1
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
        s = parse_optional(g["start"])
        if s is not None:
            start = min(start, s)
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
