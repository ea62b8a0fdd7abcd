"""A loopback Loki-API server for tests, benchmarks and `demo`: query_range with Loki's semantics.

It speaks the parts of Loki's HTTP API the tool uses (FACTS §6.1; checked against grafana/loki
`pkg/loghttp/params.go`, `pkg/loghttp/query.go`, `pkg/util/server/error.go`,
`pkg/querier/queryrange/limits.go`, `pkg/logqlmodel/error.go`): GET and POST (form) on
`/loki/api/v1/query_range`, `/loki/api/v1/series`, `/loki/api/v1/labels`, `/ready` and
`/loki/api/v1/status/buildinfo`; LogQL stream selectors with line filters only; Loki's error
texts and status codes; optional tenant and gateway auth; and injected faults.

Lines live per stream in time-sorted arrays (bisect on time, filters applied lazily, stream labels
stored once), so a million lines stay quick to query. Regexes run on Python's `re`, translated from
RE2 where the two differ (`\\z`, `(?<name>`); RE2-only Unicode classes are refused, and Perl features
RE2 rejects (lookaround, backreferences) are rejected as Loki would.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import heapq
import hmac
import json
import math
import re
import socket
import struct
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import compress, islice, repeat
from operator import contains, not_
from typing import Any
from urllib.parse import parse_qs, urlsplit

from forensics.model import Window, to_ns
from forensics.sandbox.scenario import SandboxLogLine
from forensics.sources.logql import quote_string as go_quote

NS = 1_000_000_000
SANDBOX_VERSION = "3.4.2"  # the Loki release whose texts this server reproduces

ERR_END_BEFORE_START = "end timestamp must not be before or equal to start time"
ERR_LIMIT = "limit must be a positive value"
ERR_STEP = "zero or negative query resolution step widths are not accepted. Try a positive integer"
ERR_RESOLUTION = (
    "exceeded maximum resolution of 11,000 points per time series. "
    "Try increasing the value of the step parameter"
)
# The 400 for a limit over the tenant's max_entries_limit_per_query, in both wordings Loki uses:
# v3's query frontend (pkg/util/validation/validate.go ErrMaxEntriesLimit) and its querier /
# older releases (pkg/querier/http.go validateMaxEntriesLimits).
ERR_MAX_ENTRIES = (
    "max entries limit per query exceeded, limit > max_entries_limit_per_query ({} > {})"
)
ERR_MAX_ENTRIES_QUERIER = (
    "max entries limit per query exceeded, limit > max_entries_limit ({} > {})"
)
ENTRY_LIMIT_WORDINGS = {"frontend": ERR_MAX_ENTRIES, "querier": ERR_MAX_ENTRIES_QUERIER}
ERR_QUERY_TOO_LONG = "the query time range exceeds the limit (query length: {}, limit: {})"
ERR_EMPTY_MATCHERS = (
    "queries require at least one regexp or equality matcher that does not have an "
    'empty-compatible value. For instance, app=~".*" does not meet this requirement, '
    'but app=~".+" will'
)
ERR_DEADLINE = (
    "request timed out, decrease the duration of the request or add more label matchers "
    "(prefer exact match over regex match) to reduce the amount of data processed"
)
FAULT_BODIES = {
    429: "too many outstanding requests",
    500: "rpc error: code = Internal desc = injected fault",
    502: "502 Bad Gateway",
    503: "503 Service Unavailable",
    504: ERR_DEADLINE,
}
FAULT_KINDS = frozenset([*FAULT_BODIES, "truncated", "nonjson", "reset", "timeout"])


class BadRequest(Exception):
    """A request Loki answers with HTTP 400 and this plain-text body."""


class QueryTimeout(Exception):
    """A query Loki gave up on at its query_timeout: HTTP 504 with ERR_DEADLINE
    (pkg/util/server/error.go maps context.DeadlineExceeded to it)."""


# ---------------------------------------------------------------------------------------------
# Go / Prometheus formatting and parsing
# ---------------------------------------------------------------------------------------------


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


def _parse_seconds_or_duration(value: str) -> int:
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


def _atoi(value: str, default: int) -> int:
    if value == "":
        return default
    if not _GO_INT.match(value) or not -(2**63) <= int(value) < 2**63:
        why = "invalid syntax" if not _GO_INT.match(value) else "value out of range"
        raise BadRequest(f"strconv.Atoi: parsing {go_quote(value)}: {why}")
    return int(value)


# ---------------------------------------------------------------------------------------------
# LogQL subset: stream selector + line filters
# ---------------------------------------------------------------------------------------------

_SUBSET = (
    "the sandbox Loki understands log queries made of a stream selector and the line filters "
    "|=, !=, |~ and !~ only"
)
_TOKENS = ("=~", "!~", "!=", "|=", "|~", "{", "}", ",", "=", "|", "(", ")")
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
}


@dataclass(frozen=True)
class _Tok:
    kind: str  # a token text from _TOKENS, "IDENTIFIER", "STRING", or "$end"
    text: str
    line: int
    col: int


def _parse_error(tok: _Tok | None, msg: str) -> BadRequest:
    if tok is None:
        return BadRequest(f"parse error : {msg}")
    return BadRequest(f"parse error at line {tok.line}, col {tok.col}: {msg}")


def _unquote(raw: str, tok: _Tok) -> str:
    """Go's strconv.Unquote as Prometheus' strutil uses it: escapes in "...", none in `...`."""
    if raw[0] == "`":
        return raw[1:-1].replace("\r", "")
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogatepass")
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt].encode()
            i += 2
        elif nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise _parse_error(tok, "invalid syntax")
            v = int(digits, 16)
            if nxt == "x":
                out.append(v)
            elif v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                raise _parse_error(tok, "invalid syntax")
            else:
                out += chr(v).encode()
            i += 2 + width
        elif nxt and nxt in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not all(d in "01234567" for d in digits) or int(digits, 8) > 255:
                raise _parse_error(tok, "invalid syntax")
            out.append(int(digits, 8))
            i += 4
        else:
            raise _parse_error(tok, "invalid syntax")
    return out.decode("utf-8", errors="surrogateescape")


def _lex(q: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, line, line_start = 0, 1, 0
    while True:
        while i < len(q) and q[i] in " \t\r\n":
            if q[i] == "\n":
                line, line_start = line + 1, i + 1
            i += 1
        col = i - line_start + 1
        if i >= len(q):
            toks.append(_Tok("$end", "", line, col))
            return toks
        c = q[i]
        if c == "#":  # a comment runs to the end of the line
            while i < len(q) and q[i] != "\n":
                i += 1
            continue
        if c in '"`':
            j = i + 1
            while j < len(q) and q[j] != c:
                if c == '"' and q[j] == "\n":
                    break
                j += 2 if c == '"' and q[j] == "\\" else 1
            if j >= len(q) or q[j] != c:
                raise _parse_error(_Tok("STRING", q[i:], line, col), "literal not terminated")
            tok = _Tok("STRING", q[i : j + 1], line, col)
            toks.append(_Tok("STRING", _unquote(tok.text, tok), line, col))
            i = j + 1
            continue
        for t in _TOKENS:
            if q.startswith(t, i):
                toks.append(_Tok(t, t, line, col))
                i += len(t)
                break
        else:
            m = _IDENT.match(q, i)
            end = m.end() if m else i + 1
            toks.append(_Tok("IDENTIFIER", q[i:end], line, col))
            i = end


def _re2_to_python(pattern: str) -> str:
    """RE2 syntax → Python `re`, refusing what RE2 refuses (lookaround, backreferences)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt.isdigit() and nxt != "0":
                raise ValueError(f"invalid escape sequence: `\\{nxt}`")
            if nxt in "pP":
                raise ValueError(f"the sandbox cannot evaluate Unicode classes (`\\{nxt}`)")
            out.append("\\Z" if nxt == "z" else pattern[i : i + 2])
            i += 2
            continue
        if pattern.startswith("(?", i):
            for perl in ("(?=", "(?!", "(?<=", "(?<!", "(?P="):
                if pattern.startswith(perl, i):
                    raise ValueError(f"invalid or unsupported Perl syntax: `{perl}`")
            if pattern.startswith("(?<", i):
                out.append("(?P<")
                i += 3
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _compile(pattern: str, tok: _Tok, anchored: bool) -> re.Pattern[str]:
    try:
        # Prometheus anchors label regexes as ^(?s:...)$; line filter regexes are unanchored.
        py = _re2_to_python(pattern)
        return re.compile(f"(?s:{py})" if anchored else py)
    except (ValueError, re.error) as e:
        msg = e.msg if isinstance(e, re.error) else str(e)
        raise _parse_error(tok, f"error parsing regexp: {msg}: `{pattern}`") from None


@dataclass(frozen=True)
class Matcher:
    """One label matcher of a stream selector."""

    name: str
    op: str
    value: str
    regex: re.Pattern[str] | None = None

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = self.regex is not None and self.regex.fullmatch(value) is not None
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True)
class LineFilter:
    """One line filter stage; `selectors` maps lines to truthy/falsy keep flags in C."""

    op: str
    value: str
    regex: re.Pattern[str] | None = None

    def selectors(self, lines: Iterator[str]) -> Iterator[Any]:
        if self.op in ("|=", "!="):
            hits: Iterator[Any] = map(contains, lines, repeat(self.value))
        else:
            assert self.regex is not None
            hits = map(self.regex.search, lines)
        return hits if self.op in ("|=", "|~") else map(not_, hits)

    def keep(self, line: str) -> bool:
        if self.op in ("|=", "!="):
            hit = self.value in line
        else:
            assert self.regex is not None
            hit = self.regex.search(line) is not None
        return hit if self.op in ("|=", "|~") else not hit


@dataclass(frozen=True)
class LogQuery:
    """A parsed log query of the subset: matchers and line filters."""

    matchers: tuple[Matcher, ...]
    filters: tuple[LineFilter, ...]

    def selects(self, labels: dict[str, str]) -> bool:
        return all(m.matches(labels.get(m.name, "")) for m in self.matchers)


def _unexpected(tok: _Tok, expecting: str) -> BadRequest:
    got = tok.kind if tok.kind in ("$end", "IDENTIFIER", "STRING") else tok.text
    return _parse_error(tok, f"syntax error: unexpected {got}, expecting {expecting}")


def _at(toks: list[_Tok], i: int) -> _Tok:
    return toks[min(i, len(toks) - 1)]  # the last token is always $end


def _parse_selector(toks: list[_Tok], pos: int) -> tuple[list[Matcher], int]:
    tok = toks[pos]
    if tok.kind != "{":
        if tok.kind == "IDENTIFIER" and _at(toks, pos + 1).kind == "(":
            raise _parse_error(None, f"{_SUBSET}; metric queries such as {tok.text}(...) are not")
        raise _unexpected(tok, "{")
    pos += 1
    matchers: list[Matcher] = []
    while True:
        name, op, val = _at(toks, pos), _at(toks, pos + 1), _at(toks, pos + 2)
        if name.kind == "}" and not matchers:
            raise _parse_error(None, ERR_EMPTY_MATCHERS)
        if name.kind != "IDENTIFIER" or not _IDENT.fullmatch(name.text):
            raise _unexpected(name, "IDENTIFIER")
        if op.kind not in ("=", "!=", "=~", "!~"):
            raise _unexpected(op, "= or != or =~ or !~")
        if val.kind != "STRING":
            raise _unexpected(val, "STRING")
        regex = _compile(val.text, val, anchored=True) if op.kind in ("=~", "!~") else None
        matchers.append(Matcher(name.text, op.kind, val.text, regex))
        sep = _at(toks, pos + 3)
        pos += 4
        if sep.kind == "}":
            return matchers, pos
        if sep.kind != ",":
            raise _unexpected(sep, ", or }")


def parse_log_query(query: str) -> LogQuery:
    """Parse the LogQL subset; BadRequest with a Loki-style `parse error ...` text otherwise."""
    toks = _lex(query)
    matchers, pos = _parse_selector(toks, 0)
    if not any(not m.matches("") for m in matchers):
        raise _parse_error(None, ERR_EMPTY_MATCHERS)
    filters: list[LineFilter] = []
    while toks[pos].kind != "$end":
        op, val = toks[pos], _at(toks, pos + 1)
        if op.kind == "|":
            stage = val.text if val.kind == "IDENTIFIER" else val.kind
            raise _parse_error(None, f"{_SUBSET}; the stage | {stage} is not")
        if op.kind not in ("|=", "!=", "|~", "!~"):
            raise _unexpected(op, "|= or != or |~ or !~ or |")
        if val.kind != "STRING":
            raise _unexpected(val, "STRING")
        regex = _compile(val.text, val, anchored=False) if op.kind in ("|~", "!~") else None
        filters.append(LineFilter(op.kind, val.text, regex))
        pos += 2
    return LogQuery(tuple(matchers), tuple(filters))


def parse_selector_only(query: str) -> list[Matcher]:
    """A bare stream selector (the series API's `match[]`)."""
    toks = _lex(query)
    matchers, pos = _parse_selector(toks, 0)
    if toks[pos].kind != "$end":
        raise BadRequest("only label matchers are supported")
    return matchers


# ---------------------------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------------------------


class _Stream:
    """One stream: labels (stored once) and its lines, kept sorted by time on demand."""

    __slots__ = ("labels", "key", "ts", "lines", "in_order", "_run")

    def __init__(self, labels: dict[str, str], key: tuple[tuple[str, str], ...]) -> None:
        self.labels = labels
        self.key = key
        self.ts = array("q")
        self.lines: list[str] = []
        self.in_order = True
        self._run: set[str] = set()  # lines at the last timestamp, to drop exact duplicates

    def add(self, ts: int, line: str) -> None:
        if self.in_order and self.ts:
            last = self.ts[-1]
            if ts < last:
                self.in_order = False
            elif ts == last:
                # Loki keeps one copy of an entry repeated with the same timestamp and line.
                if line in self._run:
                    return
                self._run.add(line)
            else:
                self._run = {line}
        elif self.in_order:
            self._run = {line}
        self.ts.append(ts)
        self.lines.append(line)

    def settle(self) -> None:
        if self.in_order:
            return
        order = sorted(range(len(self.ts)), key=self.ts.__getitem__)
        old_ts, old_lines = self.ts, self.lines
        self.ts, self.lines, self.in_order, self._run = array("q"), [], True, set()
        for i in order:
            self.add(old_ts[i], old_lines[i])

    def span(self, start: int, end: int) -> tuple[int, int]:
        return bisect_left(self.ts, start), bisect_left(self.ts, end)


class _Store:
    """All streams, keyed by their sorted label pairs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.streams: dict[tuple[tuple[str, str], ...], _Stream] = {}
        self._ordered: list[_Stream] | None = None

    def add(self, lines: Iterable[SandboxLogLine]) -> int:
        n = 0
        last_labels: object = None
        stream: _Stream | None = None
        with self.lock:
            for entry in lines:
                if entry.labels is not last_labels:
                    key = tuple(sorted(entry.labels.items()))
                    stream = self.streams.get(key)
                    if stream is None:
                        stream = self.streams[key] = _Stream(dict(key), key)
                        self._ordered = None
                    last_labels = entry.labels
                assert stream is not None
                stream.add(int(entry.ts_ns), entry.line)
                n += 1
        return n

    def ordered(self) -> list[_Stream]:
        with self.lock:
            if self._ordered is None:
                self._ordered = sorted(self.streams.values(), key=lambda s: s.key)
            return self._ordered

    def matching(self, select: Callable[[dict[str, str]], bool]) -> list[_Stream]:
        chosen = [s for s in self.ordered() if select(s.labels)]
        with self.lock:
            for s in chosen:
                s.settle()
        return chosen


# ---------------------------------------------------------------------------------------------
# Faults and the request record
# ---------------------------------------------------------------------------------------------


@dataclass
class FaultRule:
    """One injected failure on the data endpoints (query_range, series).

    `status`: 429, 500, 502, 503, 504 (with Loki-like bodies), "truncated" (a 200 cut off
    mid-body), "nonjson" (a 200 that is an HTML page), "reset" (TCP reset, no response),
    "timeout" (stall `sleep` seconds, then answer normally). `count`: how many matching requests
    fail, or "always". `window`: only queries whose [start, end) overlaps it.
    """

    status: int | str
    count: int | str = 1
    window: Window | None = None
    retry_after: str | None = None
    sleep: float = 0.0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.status not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault {self.status!r}; one of {sorted(map(str, FAULT_KINDS))}"
            )
        if self.count != "always" and not (isinstance(self.count, int) and self.count >= 0):
            raise ValueError("count must be a non-negative number or 'always'")
        if self.status == "timeout" and self.sleep <= 0:
            raise ValueError("a timeout fault needs sleep > 0 (longer than the client's timeout)")

    def applies(self, start: int | None, end: int | None) -> bool:
        if self.count != "always" and self.fired >= int(self.count):
            return False
        if self.window is None:
            return True
        if start is None or end is None:
            return False
        return to_ns(self.window.start) < max(end, start + 1) and start < to_ns(self.window.end)


@dataclass
class LokiFaults:
    """Fault injection for a LokiServer: latency on every data request and failure rules."""

    latency: float = 0.0
    rules: list[FaultRule] = field(default_factory=list)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw and answered it (the Authorization header left out)."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    status: int
    bytes: int
    fault: str | None
    at: float  # time.monotonic() when it arrived


class RequestLog:
    """A thread-safe, append-only list of RecordedRequest."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []

    def append(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(self.snapshot())

    def __getitem__(self, i: int) -> RecordedRequest:
        with self._lock:
            return self._items[i]


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


class LokiServer:
    """A Loki-API server on 127.0.0.1 (a free port) serving `lines`; see the module docstring.

    `tenant_required`: requests must send `X-Scope-OrgID` (else 401 `no org id`), and only that
    tenant sees the lines (others get empty results, as an empty tenant in Loki would).
    `bearer_token` / `basic_auth`: a gateway in front that requires one of them (401 otherwise).
    `tenant_max_entries`: per-tenant `max_entries_limit_per_query` overriding `max_entries` (0 is
    no limit; for `A|B` the smallest positive one applies, as in Loki), refused in the
    `entry_limit_wording` of a v3 query frontend (`"frontend"`) or of a querier / older release
    (`"querier"`).
    `query_timeout_lines`: a log query whose range holds more than this many lines in the streams
    it selects (what Loki must scan, before line filters) times out: 504, as Loki answers at its
    `query_timeout`, after `query_timeout_delay` seconds.
    """

    def __init__(
        self,
        lines: Iterable[SandboxLogLine] = (),
        faults: LokiFaults | None = None,
        *,
        max_query_length: timedelta = timedelta(hours=721),
        max_entries: int = 5000,
        tenant_required: str | None = None,
        bearer_token: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        tenant_max_entries: dict[str, int] | None = None,
        entry_limit_wording: str = "frontend",
        query_timeout_lines: int | None = None,
        query_timeout_delay: float = 0.0,
    ) -> None:
        self.faults = faults or LokiFaults()
        self.max_query_length_ns = (max_query_length // timedelta(microseconds=1)) * 1000
        self.max_entries = max_entries
        self.tenant_max_entries = dict(tenant_max_entries or {})
        if entry_limit_wording not in ENTRY_LIMIT_WORDINGS:
            raise ValueError(f"entry_limit_wording: one of {sorted(ENTRY_LIMIT_WORDINGS)}")
        self.entry_limit_wording = entry_limit_wording
        self.query_timeout_lines = query_timeout_lines
        self.query_timeout_delay = query_timeout_delay
        self.tenant_required = tenant_required
        self.bearer_token = bearer_token
        self.basic_auth = basic_auth
        self.requests = RequestLog()
        self._store = _Store()
        self._store.add(lines)
        self._faults_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> str:
        """Listen on a free loopback port; return the base URL (`http://127.0.0.1:PORT`)."""
        if self._httpd is not None:
            return self.url
        handler = type("_BoundHandler", (_Handler,), {"loki": self})
        self._httpd = _HTTPServer(("127.0.0.1", 0), handler)
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self.url

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("LokiServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop listening; stalled (timeout-fault) handlers are released."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LokiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_lines(self, lines: Iterable[SandboxLogLine]) -> int:
        """Add lines (any order, any streams); returns how many were offered."""
        return self._store.add(lines)

    # -- request handling (called from handler threads) -------------------------------------------

    def _pick_fault(self, start: int | None, end: int | None) -> FaultRule | None:
        with self._faults_lock:
            for rule in self.faults.rules:
                if rule.applies(start, end):
                    rule.fired += 1
                    return rule
        return None

    def _check_auth(self, headers: Any) -> str | None:
        if not self.bearer_token and not self.basic_auth:
            return None
        given = headers.get("Authorization") or ""
        scheme, _, cred = given.partition(" ")
        if self.bearer_token and scheme.lower() == "bearer":
            if hmac.compare_digest(cred.strip().encode(), self.bearer_token.encode()):
                return None
        if self.basic_auth and scheme.lower() == "basic":
            try:
                user, _, pw = base64.b64decode(cred.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user, pw = "", ""
            ok_user = hmac.compare_digest(user.encode(), self.basic_auth[0].encode())
            if ok_user and hmac.compare_digest(pw.encode(), self.basic_auth[1].encode()):
                return None
        return "invalid or missing credentials\n"

    def _max_entries(self, org: str | None) -> int:
        """The entry limit for the tenants of a request: Loki's SmallestPositiveNonZeroIntPerTenant
        over `A|B`; a tenant without its own limit has the server's default."""
        limits = [self.tenant_max_entries.get(t, self.max_entries) for t in (org or "").split("|")]
        positive = [n for n in limits if n > 0]
        return min(positive) if positive else 0

    def _tenant_sees_data(self, org: str | None) -> bool:
        if self.tenant_required is None:
            return True
        return self.tenant_required in (org or "").split("|")

    def _bounds(self, params: _Params) -> tuple[int, int]:
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

    def query_range(self, params: _Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/query_range`: validation in Loki's order, then the log query."""
        org = headers.get("X-Scope-OrgID")
        # With this flag Loki adds a third element (metadata) to each value; none is kept here.
        flags = headers.get("X-Loki-Response-Encoding-Flags") or ""
        categorize = "categorize-labels" in flags.split(",")
        start, end = self._bounds(params)
        if end < start:
            raise BadRequest(ERR_END_BEFORE_START)
        limit = _atoi(params.get("limit"), 100)
        if limit <= 0:
            raise BadRequest(ERR_LIMIT)
        direction = (params.get("direction") or "backward").upper()
        if direction not in ("FORWARD", "BACKWARD"):
            raise BadRequest(f"invalid direction '{params.get('direction')}'")
        step = (
            _parse_seconds_or_duration(params.get("step"))
            if params.get("step")
            else max(math.floor((end - start) / NS / 250), 1) * NS
        )
        if step <= 0:
            raise BadRequest(ERR_STEP)
        if (end - start) // step > 11000:
            raise BadRequest(ERR_RESOLUTION)
        if params.get("interval"):
            if _parse_seconds_or_duration(params.get("interval")) < 0:
                raise BadRequest("interval must be >= 0")
            raise BadRequest("the sandbox Loki does not implement the interval parameter")
        query = parse_log_query(params.get("query"))
        max_entries = self._max_entries(org)
        if max_entries and limit > max_entries:
            wording = ENTRY_LIMIT_WORDINGS[self.entry_limit_wording]
            raise BadRequest(wording.format(limit, max_entries))
        # The frontend measures the range at millisecond precision (model.Time).
        length = (end // 1_000_000 - start // 1_000_000) * 1_000_000
        if self.max_query_length_ns and length > self.max_query_length_ns:
            raise BadRequest(
                ERR_QUERY_TOO_LONG.format(
                    go_duration(length), prom_duration(self.max_query_length_ns)
                )
            )
        t0 = time.perf_counter()
        streams = self._store.matching(query.selects) if self._tenant_sees_data(org) else []
        if self.query_timeout_lines is not None:
            scanned = sum(hi - lo for lo, hi in (s.span(start, end) for s in streams))
            if scanned > self.query_timeout_lines:
                self._stopping.wait(self.query_timeout_delay)
                raise QueryTimeout()
        result, returned, scanned, nbytes = self._select(
            streams, query, start, end, limit, forward=direction == "FORWARD"
        )
        elapsed = max(time.perf_counter() - t0, 1e-9)
        data: dict[str, Any] = {
            "resultType": "streams",
            "result": result,
            "stats": _stats(returned, scanned, nbytes, elapsed),
        }
        if categorize:
            for stream in result:
                for value in stream["values"]:
                    value.append({})
            data["encodingFlags"] = ["categorize-labels"]
        return {"status": "success", "data": data}

    @staticmethod
    def _select(
        streams: list[_Stream], query: LogQuery, start: int, end: int, limit: int, *, forward: bool
    ) -> tuple[list[dict[str, Any]], int, int, int]:
        iters = []
        scanned = 0
        for idx, s in enumerate(streams):
            lo, hi = s.span(start, end)
            if lo >= hi:
                continue
            scanned += hi - lo
            if forward:
                ts_it: Iterable[int] = islice(s.ts, lo, hi)

                def lines_it(s: _Stream = s, lo: int = lo, hi: int = hi) -> Iterator[str]:
                    return islice(s.lines, lo, hi)
            else:
                ts_it = reversed(s.ts[lo:hi])

                def lines_it(s: _Stream = s, lo: int = lo, hi: int = hi) -> Iterator[str]:
                    return reversed(s.lines[lo:hi])

            items: Iterator[tuple[int, int, str]] = zip(ts_it, repeat(idx), lines_it())
            if query.filters:
                # The first filter runs at C speed over the whole span; the rest see survivors.
                items = compress(items, query.filters[0].selectors(lines_it()))
                for f in query.filters[1:]:
                    items = filter(lambda it, f=f: f.keep(it[2]), items)
            iters.append(items)
        # (ts, stream index) orders entries, like Loki's merge across streams: limit applies to
        # the first `limit` entries in direction order over all streams.
        chosen = list(islice(heapq.merge(*iters, reverse=not forward), limit))
        grouped: dict[int, list[list[str]]] = {}
        nbytes = 0
        for ts, idx, line in chosen:
            grouped.setdefault(idx, []).append([str(ts), line])
            nbytes += len(line)
        result = [
            {"stream": dict(streams[i].labels), "values": grouped[i]} for i in sorted(grouped)
        ]
        return result, len(chosen), scanned, nbytes

    def series(self, params: _Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/series`: label sets of streams with entries in [start, end)."""
        org = headers.get("X-Scope-OrgID")
        start, end = self._bounds(params)
        groups = params.all("match[]")
        if not groups:
            raise BadRequest("0 matcher groups supplied")
        selectors = [parse_selector_only(g) for g in groups]
        found = []
        if self._tenant_sees_data(org):
            for s in self._store.ordered():
                if any(all(m.matches(s.labels.get(m.name, "")) for m in ms) for ms in selectors):
                    with self._store.lock:
                        s.settle()
                    lo, hi = s.span(start, end)
                    if lo < hi:
                        found.append(dict(s.labels))
        return {"status": "success", "data": found}

    def labels(self, params: _Params, headers: Any) -> dict[str, Any]:
        """`/loki/api/v1/labels`: label names of streams with entries in [start, end)."""
        org = headers.get("X-Scope-OrgID")
        start, end = self._bounds(params)
        names: set[str] = set()
        if self._tenant_sees_data(org):
            for s in self._store.ordered():
                with self._store.lock:
                    s.settle()
                lo, hi = s.span(start, end)
                if lo < hi:
                    names.update(s.labels)
        return {"status": "success", "data": sorted(names)}


def _stats(returned: int, scanned: int, nbytes: int, elapsed: float) -> dict[str, Any]:
    return {
        "summary": {
            "bytesProcessedPerSecond": int(nbytes / elapsed),
            "linesProcessedPerSecond": int(scanned / elapsed),
            "totalBytesProcessed": nbytes,
            "totalLinesProcessed": scanned,
            "execTime": elapsed,
            "queueTime": 0,
            "subqueries": 0,
            "totalEntriesReturned": returned,
            "splits": 0,
            "shards": 0,
            "totalPostFilterLines": returned,
            "totalStructuredMetadataBytesProcessed": 0,
        },
        "querier": {"store": {"totalChunksRef": 0, "totalChunksDownloaded": 0}},
        "ingester": {"totalReached": 1, "totalChunksMatched": 0, "totalBatches": 0},
        "cache": {},
    }


class _Params:
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


def _form(text: str) -> list[tuple[str, str]]:
    return [(k, v) for k, vs in parse_qs(text, keep_blank_values=True).items() for v in vs]


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection; a listen backlog deep enough for many concurrent workers."""

    daemon_threads = True
    request_queue_size = 128


class _Handler(BaseHTTPRequestHandler):
    """Translates HTTP requests into LokiServer calls (no state of its own)."""

    loki: LokiServer
    protocol_version = "HTTP/1.1"
    server_version = "Loki"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def _dispatch(self) -> None:
        arrived = time.monotonic()
        url = urlsplit(self.path)
        body_pairs: list[tuple[str, str]] = []
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if self.command == "POST" and ctype == "application/x-www-form-urlencoded":
            body_pairs = _form(raw.decode("utf-8", errors="replace"))
        params = _Params(body_pairs + _form(url.query))
        self._record_base = (arrived, url.path, params)
        self._fault: str | None = None

        loki = self.loki
        denied = loki._check_auth(self.headers)
        if denied is not None:
            extra = {"WWW-Authenticate": 'Basic realm="loki"'} if loki.basic_auth else {}
            self._text(401, denied, extra)
            return
        routes: dict[str, Callable[[_Params, Any], dict[str, Any]]] = {
            "/loki/api/v1/query_range": loki.query_range,
            "/loki/api/v1/series": loki.series,
            "/loki/api/v1/labels": loki.labels,
            "/loki/api/v1/label": loki.labels,
        }
        if url.path == "/ready":
            self._text(200, "ready\n")
            return
        if url.path == "/loki/api/v1/status/buildinfo":
            self._json(
                200,
                {
                    "version": SANDBOX_VERSION,
                    "revision": "sandbox",
                    "branch": "HEAD",
                    "buildUser": "elastic-audit-sandbox",
                    "buildDate": "",
                    "goVersion": "",
                },
            )
            return
        handler = routes.get(url.path)
        if handler is None:
            self._text(404, "404 page not found\n")
            return
        if loki.tenant_required is not None and not self.headers.get("X-Scope-OrgID"):
            self._text(401, "no org id\n")  # dskit AuthenticateUser: http.Error adds the newline
            return
        if url.path in ("/loki/api/v1/query_range", "/loki/api/v1/series") and self._inject(params):
            return
        try:
            doc = handler(params, self.headers)
        except BadRequest as e:
            self._text(400, str(e))
            return
        except QueryTimeout:
            self._text(504, ERR_DEADLINE)
            return
        self._json(200, doc)

    def _inject(self, params: _Params) -> bool:
        """Apply latency and the first matching fault rule; True when the response is done."""
        loki = self.loki
        if loki.faults.latency > 0:
            loki._stopping.wait(loki.faults.latency)
        try:
            start, end = loki._bounds(params)
        except BadRequest:
            start = end = None
        rule = loki._pick_fault(start, end)
        if rule is None:
            return False
        self._fault = str(rule.status)
        if rule.status == "timeout":
            loki._stopping.wait(rule.sleep)
            return False
        if rule.status == "reset":
            self._reset()
            return True
        if rule.status == "nonjson":
            page = "<html><head><title>Sign in</title></head><body>proxy login</body></html>\n"
            self._send(200, page.encode(), "text/html; charset=utf-8")
            return True
        if rule.status == "truncated":
            body = json.dumps(
                {"status": "success", "data": {"resultType": "streams", "result": []}}
            )
            self._send(200, body.encode(), "application/json; charset=UTF-8", cut=True)
            return True
        extra = {"Retry-After": rule.retry_after} if rule.retry_after is not None else {}
        self._text(int(rule.status), FAULT_BODIES[int(rule.status)], extra)
        return True

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send a TCP RST: the client sees "connection reset by peer".
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self._record(0, 0)
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def _text(self, status: int, text: str, extra: dict[str, str] | None = None) -> None:
        # Loki's WriteError: plain text, nosniff.
        headers = {"X-Content-Type-Options": "nosniff", **(extra or {})}
        self._send(status, text.encode(), "text/plain; charset=utf-8", headers=headers)

    def _json(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        self._send(
            status, body.encode("utf-8", errors="replace"), "application/json; charset=UTF-8"
        )

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        *,
        headers: dict[str, str] | None = None,
        cut: bool = False,
    ) -> None:
        sent = body[: len(body) // 2] if cut else body
        # Record before answering, so whoever got the answer also finds the record.
        self._record(status, len(sent))
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if cut:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(sent)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away (e.g. after its read timeout)
        if cut:
            self.close_connection = True

    def _record(self, status: int, nbytes: int) -> None:
        arrived, path, params = self._record_base
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        self.loki.requests.append(
            RecordedRequest(
                method=self.command,
                path=path,
                params=params.first_values(),
                headers=headers,
                status=status,
                bytes=nbytes,
                fault=self._fault,
                at=arrived,
            )
        )
