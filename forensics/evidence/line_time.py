"""The time a log line carries itself, as opposed to the timestamp its shipper pushed to Loki.

Loki keeps the timestamp the shipper sent; without a time-parsing stage (Promtail's `cri` stage,
Alloy's `stage.cri`, Fluent Bit's `Time_Key`) that is when the shipper read the line, seconds or
more after it was written. The line's own time is often still in it (docs/upstream.md, "Shapes
read from Flyte's source"):

- the CRI prefix `<RFC3339Nano> <stdout|stderr> <P|F>` that containerd and CRI-O write (the
  kubelet's log format, `k8s.io/cri-api` `ContainerLogPath`), nanoseconds with a zone;
- torch's glog prefix `W0910 19:45:22.830000 <pid> <file>:<line>]` (torch `_logging` /
  `torch.distributed.elastic` `log` format), month and day but no year, in the process's local
  time — UTC in a container unless TZ is set;
- a Python logging prefix starting with `%(asctime)s` (`2026-09-10 19:45:22,830`), local time
  unless it carries an offset.

The first of these a line has wins, in that order (the runtime's stamp is the most precise and
the only one with a zone). A time more than `MAX_AHEAD` after Loki's, or more than `MAX_BEHIND`
before it, is not believed (a line replayed from elsewhere, a wrong TZ): Loki's stands.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

__all__ = ["MAX_AHEAD", "MAX_BEHIND", "own_time"]

MAX_AHEAD = timedelta(minutes=5)  # a node's clock ahead of the shipper's: no more than this
MAX_BEHIND = timedelta(days=1)  # a shipper's backlog: no more than this

_CRI_TIME_RE = re.compile(
    r'(?:^|")([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?'
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})) (?:stdout|stderr) [PF](?::[^ ]*)?(?: |$)"
)
_GLOG_TIME_RE = re.compile(
    r"^(?:\[rank[0-9]+\]:)?[VIWEC]([0-9]{2})([0-9]{2}) "
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{6}) "
)
_ASCTIME_RE = re.compile(
    r"^\[?([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{2}:[0-9]{2}:[0-9]{2})(?:[.,]([0-9]{1,9}))?"
    r"(Z|[+-][0-9]{2}:?[0-9]{2})?"
)


def _fraction(digits: str | None) -> int:
    """Microseconds from up to nine fractional digits (nanoseconds are cut, as datetime must)."""
    return int((digits or "0")[:6].ljust(6, "0"))


def cri_time(line: str) -> datetime | None:
    """The CRI prefix's time, at the line's start or at the start of a JSON string in it (a
    shipper that wrapped the runtime's line unparsed)."""
    m = _CRI_TIME_RE.search(line, 0, 4096)
    if m is None:
        return None
    text = m.group(1)
    head, _, rest = text.partition(".")
    if rest:
        digits = re.match(r"[0-9]+", rest).group(0)  # type: ignore[union-attr]
        zone = rest[len(digits) :]
    else:
        digits, zone = "", head[19:]
        head = head[:19]
    zone = "+00:00" if zone == "Z" else zone
    try:
        t = datetime.fromisoformat(f"{head}{zone}")
    except ValueError:
        return None
    return t.replace(microsecond=_fraction(digits)).astimezone(timezone.utc)


def glog_time(text: str, reference: datetime) -> datetime | None:
    """glog's `MMDD HH:MM:SS.ffffff` as UTC, the year taken so it lies nearest `reference`."""
    m = _GLOG_TIME_RE.match(text)
    if m is None:
        return None
    month, day, hh, mm, ss, us = (int(g) for g in m.groups())
    best = None
    for year in (reference.year - 1, reference.year, reference.year + 1):
        try:
            t = datetime(year, month, day, hh, mm, ss, us, tzinfo=timezone.utc)
        except ValueError:  # 29 February of a common year
            continue
        if best is None or abs(t - reference) < abs(best - reference):
            best = t
    return best


def logging_time(prefix: str) -> datetime | None:
    """A Python logging prefix's `%(asctime)s` (UTC unless it carries an offset)."""
    m = _ASCTIME_RE.match(prefix)
    if m is None:
        return None
    day, clock, digits, zone = m.groups()
    if zone and zone != "Z" and ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    zone = "+00:00" if zone in (None, "Z") else zone
    try:
        t = datetime.fromisoformat(f"{day}T{clock}{zone}")
    except ValueError:
        return None
    return t.replace(microsecond=_fraction(digits)).astimezone(timezone.utc)


def own_time(raw: str, matched: str, pylog: str | None, loki_at: datetime) -> tuple[datetime, str]:
    """The time of a signal line and where it comes from: `cri`, `glog`, `logging` or `loki`.

    `raw` is the line as Loki holds it, `matched` the signal line found in it (after any
    envelope), `pylog` its Python logging prefix if it has one.
    """
    found = (
        (cri_time(raw), "cri"),
        (glog_time(matched, loki_at), "glog"),
        (logging_time(pylog) if pylog else None, "logging"),
    )
    for t, source in found:
        if t is not None and loki_at - MAX_BEHIND <= t <= loki_at + MAX_AHEAD:
            return t, source
    return loki_at, "loki"
