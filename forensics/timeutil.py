"""Parsing of the times and durations users type: `7d`, `36h`, RFC 3339, bare dates."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pytimeparse import parse as parse_duration_seconds

from forensics.model import UTC, Window, rfc3339
from forensics.params import Param, ParamError

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_FRACTION = re.compile(r"(\d{2}:\d{2}:\d{2})\.(\d+)")
# `1M`: a month to many people, a minute to pytimeparse (its units are case-insensitive).
_AMBIGUOUS_M = re.compile(r"\d\s*M(?![A-Za-z])")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_duration(text: str) -> timedelta | None:
    """`90m`, `36h`, `7d`, `2w`, `1d12h` → timedelta; None when it is not a duration.

    Raises ValueError for a duration too long to represent (more than a million days).
    """
    text = text.strip()
    if not text or text.startswith("-"):
        return None
    if _AMBIGUOUS_M.search(text):
        raise ValueError(
            f"{text!r} is ambiguous: M is a month to some and a minute to others; write m or "
            "min for minutes, or days for a month (30d)"
        )
    seconds = parse_duration_seconds(text)
    if seconds is None:
        return None
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None


def fromisoformat(text: str) -> datetime:
    """`datetime.fromisoformat` as Python 3.11+ reads RFC 3339, on 3.10 too: a `Z` suffix, and any
    number of fraction digits (Go's RFC3339Nano writes 9; 3.10 reads only 3 or 6; 3.11+ keep 6)."""
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(
        _FRACTION.sub(lambda m: f"{m[1]}.{m[2][:6].ljust(6, '0')}", text, count=1)
    )


def parse_time(text: str, *, name: str | Param) -> datetime:
    """RFC 3339 (with `Z` or an offset) or a bare date (midnight UTC) → aware UTC datetime.

    `name` says what the text is in an error: a parameter (`Param("since")`) or plain words."""
    raw = text.strip()
    if _DATE.match(raw):
        try:
            return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError as e:
            raise ParamError(name, f": {raw!r} is not a valid date ({e})") from None
    candidate = raw.replace("z", "Z")
    if candidate.endswith("Z"):
        candidate = candidate[:-1] + "+00:00"
    try:
        t = fromisoformat(candidate)
    except ValueError:
        raise ParamError(
            name,
            f": {raw!r} is neither a duration (90m, 36h, 7d, 2w) nor a time "
            "(RFC 3339 such as 2026-09-10T19:45:00Z, or a date such as 2026-09-10)",
        ) from None
    if "T" not in candidate.upper() and " " not in candidate:
        raise ParamError(name, f": {raw!r} is not RFC 3339")
    if t.tzinfo is None:
        raise ParamError(name, f": {raw!r} has no time zone; add Z for UTC (e.g. {raw}Z)")
    return t.astimezone(UTC)


SINCE, UNTIL = Param("since"), Param("until")


def parse_until(until: str | None, now: datetime) -> datetime:
    """`until` (default `now`); a time after `now` is refused: a window that has not happened
    yet cannot be scanned, and a guard state must never record it as scanned."""
    if until is None:
        return now
    end = parse_time(until, name=UNTIL)
    if end > now:
        raise ParamError(
            UNTIL,
            f" {rfc3339(end)} is in the future (now {rfc3339(now.replace(microsecond=0))}): a scan "
            "cannot read what has not happened yet; leave ",
            UNTIL,
            " out to scan up to now",
        )
    return end


def parse_window(since: str, until: str | None, *, now: datetime | None = None) -> Window:
    """The scan window from `since` (duration back from `until`, or a time) and `until`."""
    end = parse_until(until, now or datetime.now(UTC))
    try:
        duration = parse_duration(since)
    except ValueError as e:
        raise ParamError(SINCE, f": {e}") from None
    if duration is not None:
        if duration <= timedelta(0):
            raise ParamError(SINCE, f": {since!r} must be a positive duration")
        if end - EPOCH < duration:  # (also keeps `end - duration` from overflowing)
            raise ParamError(
                SINCE,
                f" {since!r} reaches back before 1970-01-01T00:00:00Z; Loki holds no "
                "logs from before the Unix epoch",
            )
        start = end - duration
    else:
        start = parse_time(since, name=SINCE)
    if start < EPOCH:
        # Loki's timestamps are Unix nanoseconds: nothing can be logged before 1970.
        raise ParamError(
            SINCE,
            f" ({rfc3339(start)}) is before 1970-01-01T00:00:00Z; Loki holds no logs "
            "from before the Unix epoch",
        )
    if start >= end:
        raise ParamError(SINCE, f" ({rfc3339(start)}) must be before ", UNTIL, f" ({rfc3339(end)})")
    return Window(start, end)
