"""How the sandbox Loki reads request parameters: Go's and Prometheus's number, time and duration
syntax, and form values as Go's `r.Form`. Pure: no state, no I/O. Upstream: docs/upstream.md,
"The sandbox servers".
"""

from __future__ import annotations

import calendar
import math
import re
import time
from urllib.parse import parse_qs

from forensics.sources.logql import quote_string as go_quote

NS = 1_000_000_000


class BadRequest(Exception):
    """A request Loki answers with HTTP 400 and this plain-text body."""


def go_duration(ns: int) -> str:
    """Go's time.Duration.String(): `744h0m0s`, `1.5s`, `300ms`, `0s`."""
    if ns == 0:
        return "0s"
    sign, u = ("-" if ns < 0 else ""), abs(ns)

    def frac(v: int, prec: int) -> str:
        whole, rest = divmod(v, 10**prec)
        digits = f"{rest:0{prec}d}".rstrip("0")
        return f"{whole}.{digits}" if digits else str(whole)

    if u < NS:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{frac(u, 3)}µs"
        return f"{sign}{frac(u, 6)}ms"
    secs, rest = divmod(u, NS)
    out = frac((secs % 60) * NS + rest, 9) + "s"
    minutes = secs // 60
    if minutes:
        out = f"{minutes % 60}m{out}"
        if minutes // 60:
            out = f"{minutes // 60}h{out}"
    return sign + out


def prom_duration(ns: int) -> str:
    """Prometheus model.Duration.String(): `30d1h` for 721h; years and weeks only when exact."""
    ms = abs(int(ns / 1_000_000))
    if ms == 0:
        return "0s"
    out = []
    for unit, mult, exact in (
        ("y", 365 * 86_400_000, True),
        ("w", 7 * 86_400_000, True),
        ("d", 86_400_000, False),
        ("h", 3_600_000, False),
        ("m", 60_000, False),
        ("s", 1_000, False),
        ("ms", 1, False),
    ):
        if exact and ms % mult:
            continue
        if ms // mult:
            out.append(f"{ms // mult}{unit}")
            ms %= mult
    return ("-" if ns < 0 else "") + "".join(out)


_PROM_DURATION = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?\Z"
)
_PROM_UNITS_MS = (365 * 86_400_000, 7 * 86_400_000, 86_400_000, 3_600_000, 60_000, 1_000, 1)


def parse_prom_duration(text: str) -> int:
    """Prometheus model.ParseDuration (`7d`, `1h30m`, `0`) → ns; ValueError with Go's text."""
    if text == "0":
        return 0
    m = _PROM_DURATION.match(text)
    if not text or m is None:
        raise ValueError(f"not a valid duration string: {go_quote(text)}")
    ms = sum(int(g) * mult for g, mult in zip(m.groups(), _PROM_UNITS_MS, strict=True) if g)
    return ms * 1_000_000


def _go_round(x: float) -> float:
    # Go's math.Round rounds half away from zero (Python's round() rounds half to even).
    return math.copysign(math.floor(abs(x) + 0.5), x)


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})\Z"
)
_GO_INT = re.compile(r"[+-]?\d+\Z")
_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE
)


def _rfc3339_ns(value: str) -> int | None:
    m = _RFC3339.match(value)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]):
        return None
    if h > 23 or mi > 59 or s > 59:
        return None
    secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    zone = m.group(8)
    if zone != "Z":
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        secs -= offset if zone[0] == "+" else -offset
    return secs * NS + int((m.group(7) or "").ljust(9, "0"))


def parse_timestamp(value: str) -> int:
    """Loki v3's `parseTimestamp` → ns: RFC 3339, float seconds (with '.'), int seconds or ns.

    Integers up to 1e10 (and floats whose whole part is up to 1e10) are seconds, others
    nanoseconds; fractional seconds are rounded to milliseconds. ValueError carries Go's text.
    """
    ns = _rfc3339_ns(value)
    if ns is not None:
        return ns
    if "." in value:
        if not _GO_FLOAT.match(value):
            raise ValueError(f"strconv.ParseFloat: parsing {go_quote(value)}: invalid syntax")
        t = float(value)
        if math.isnan(t) or (math.isinf(t) and "inf" in value.lower()):
            raise ValueError("floating point timestamp is NaN or Inf")
        if math.isinf(t):
            raise ValueError(f"strconv.ParseFloat: parsing {go_quote(value)}: value out of range")
        low, high = math.modf(t)
        if not -(2.0**63) <= high <= 2.0**63:
            raise ValueError("floating point timestamp exceeds integer range")
        if high <= 1e10:
            low = _go_round(low * 1000) / 1000
            return int(high) * NS + int(low * NS)
        return int(high)
    if not _GO_INT.match(value):
        raise ValueError(f"strconv.ParseInt: parsing {go_quote(value)}: invalid syntax")
    v = int(value)
    if not -(2**63) <= v < 2**63:
        raise ValueError(f"strconv.ParseInt: parsing {go_quote(value)}: value out of range")
    return v * NS if v <= 10_000_000_000 else v


def parse_seconds_or_duration(value: str) -> int:
    if _GO_FLOAT.match(value) or _GO_INT.match(value):
        seconds = float(value)
        if math.isfinite(seconds):
            ns = seconds * NS
            if abs(ns) > 2**63:
                raise BadRequest(
                    f"cannot parse {go_quote(value)} to a valid duration. It overflows int64"
                )
            return int(ns)
    try:
        return parse_prom_duration(value)
    except ValueError:
        raise BadRequest(f"cannot parse {go_quote(value)} to a valid duration") from None


def atoi(value: str, default: int) -> int:
    if value == "":
        return default
    if not _GO_INT.match(value) or not -(2**63) <= int(value) < 2**63:
        why = "invalid syntax" if not _GO_INT.match(value) else "value out of range"
        raise BadRequest(f"strconv.Atoi: parsing {go_quote(value)}: {why}")
    return int(value)


class Params:
    """Form values as Go's r.Form: POST body values first, then the URL's."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def get(self, name: str) -> str:
        for k, v in self.pairs:
            if k == name:
                return v
        return ""

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def first_values(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.pairs:
            out.setdefault(k, v)
        return out


def form_pairs(text: str) -> list[tuple[str, str]]:
    return [(k, v) for k, vs in parse_qs(text, keep_blank_values=True).items() for v in vs]


def bounds(params: Params) -> tuple[int, int]:
    """A request's [start, end) in ns as Loki reads them: `end` defaults to now, `start` to
    `since` (default 1h) before the earlier of `end` and now."""
    now = time.time_ns()
    since = 3600 * NS
    if params.get("since"):
        try:
            since = parse_prom_duration(params.get("since"))
        except ValueError as e:
            raise BadRequest(f"could not parse 'since' parameter: {e}") from None
    try:
        end = parse_timestamp(params.get("end")) if params.get("end") else now
    except ValueError as e:
        raise BadRequest(f"could not parse 'end' parameter: {e}") from None
    try:
        start = parse_timestamp(params.get("start")) if params.get("start") else None
    except ValueError as e:
        raise BadRequest(f"could not parse 'start' parameter: {e}") from None
    if start is None:
        start = min(end, now) - since
    return start, end
