"""Container-runtime, shipper and JSON-logger wrapping: what message a raw log line carries."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["MAX_SCAN_CHARS", "Unwrapped", "message_candidates", "unwrap", "unwrap_runtime"]

# Only this much of a line is ever examined: evidence lines are short, and a multi-megabyte line
# (a dumped tensor, a base64 blob) must not cost more than a short one.
MAX_SCAN_CHARS = 64 * 1024

# Syslog headers, when lines travel over syslog and the receiver keeps the whole message (Alloy's
# `loki.source.syslog` with `use_rfc5424_message`, rsyslog forwarding): RFC 5424
# `<PRI>1 TIMESTAMP HOST APP PROCID MSGID [SD]... ` and RFC 3164 `<PRI>Mmm dd hh:mm:ss HOST TAG[PID]: `.
_SYSLOG = (
    r"(?:<[0-9]{1,3}>[0-9]{1,2} \S{1,64} \S{1,255} \S{1,48} \S{1,128} \S{1,32} "
    r"(?:-|(?:\[[^\]\n]{0,1024}\]){1,8}) \ufeff?"
    r"|(?:<[0-9]{1,3}>)?[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} \S{1,255} "
    r"[^\s:\[]{1,48}(?:\[[0-9]{1,10}\])?: )"
)
# CRI (containerd, CRI-O): `<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <message>`.
_CRI_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[^ ]+ (?:stdout|stderr) [A-Z](?::[^ ]*)?(?: |$)")
_SYSLOG_RE = re.compile(_SYSLOG)
# JSON envelopes nest (Fluent Bit's `log` holding docker's JSON holding flytekit's record): this
# many levels are opened, and at most this many string values examined per line.
_MAX_DEPTH = 4
_MAX_LEAVES = 256
# Keys whose value is the message in the envelopes and records met so far (docker/Fluent Bit
# `log`, Vector/python-json-logger `message`, OTel `body`, logrus `msg`, journald `MESSAGE`).
# Only for choosing what to *show*: detection looks at every string value, whatever its key.
_MESSAGE_KEYS = frozenset({"log", "message", "body", "msg", "MESSAGE", "line", "_msg"})


@dataclass(frozen=True)
class Unwrapped:
    """One message a line may carry, and how likely it is the one to show."""

    text: str
    logger: str | None  # the Python logger name when the line came from a JSON logger
    rank: int = 1  # 0 a logger record's message, 1 a message-like value, 2 any other value


def _decode_json_fragment(body: str) -> str:
    """The text of a JSON string body that may have been cut anywhere, even mid-escape."""
    for cut in range(min(len(body), 6) + 1):
        try:
            return json.loads('"' + body[: len(body) - cut] + '"')
        except ValueError:
            continue
    return body


def _load_object(text: str) -> dict[str, object] | None:
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return _load_partial(text)
    except RecursionError:  # nested deeper than any log record: not one
        return None
    return obj if isinstance(obj, dict) else None


class _Malformed(Exception):
    """Not JSON cut short, but text that is no JSON at all."""


_WS_RE = re.compile(r"[ \t\n\r]*")
_STRING_RE = re.compile(r'"((?:[^"\\]|\\.)*)(")?', re.DOTALL)
_SCALAR_RE = re.compile(r"-?[0-9][0-9.eE+-]*|true|false|null")
_CUT = object()  # a value the text ended inside of


def _load_partial(text: str) -> dict[str, object] | None:
    """A JSON object cut short (by a collector's line limit or MAX_SCAN_CHARS): what it holds
    up to the cut, the last string value decoded as far as it goes. None when the text is not
    the start of a JSON object."""
    try:
        value, _ = _partial_value(text, 0, 0)
    except _Malformed:
        return None
    return value if isinstance(value, dict) else None


def _partial_value(text: str, pos: int, depth: int) -> tuple[object, int]:
    pos = _skip_ws(text, pos)
    if pos >= len(text):
        return _CUT, pos
    c = text[pos]
    if c == '"':
        m = _STRING_RE.match(text, pos)
        assert m is not None  # the pattern matches any text starting with a quote
        if m.group(2) is None:  # cut inside the string
            return _decode_json_fragment(m.group(1)), len(text)
        try:
            return json.loads(m.group(0)), m.end()
        except ValueError:
            raise _Malformed() from None
    if c in "{[" and depth < 32:
        return _partial_container(text, pos, depth)
    m = _SCALAR_RE.match(text, pos)
    if m is None:
        raise _Malformed()
    return None, m.end()


def _partial_container(text: str, pos: int, depth: int) -> tuple[object, int]:
    is_obj = text[pos] == "{"
    out: dict[str, object] | list[object] = {} if is_obj else []
    close = "}" if is_obj else "]"
    pos += 1
    while True:
        pos = _skip_ws(text, pos)
        if pos >= len(text):
            return out, pos
        if text[pos] == close:
            return out, pos + 1
        if isinstance(out, dict):
            pos = _partial_member(text, pos, depth, out)
        else:
            value, pos = _partial_value(text, pos, depth + 1)
            if value is not _CUT:
                out.append(value)
        pos = _skip_ws(text, pos)
        if pos >= len(text):
            return out, pos
        if text[pos] == ",":
            pos += 1
        elif text[pos] != close:
            raise _Malformed()


def _partial_member(text: str, pos: int, depth: int, out: dict[str, object]) -> int:
    """Read one `"key": value` into `out`; the position after it (the text's end when cut)."""
    key, pos = _partial_value(text, pos, depth + 1)
    if key is _CUT or pos >= len(text):
        return len(text)
    if not isinstance(key, str):
        raise _Malformed()
    pos = _skip_ws(text, pos)
    if pos >= len(text):
        return pos
    if text[pos] != ":":
        raise _Malformed()
    value, pos = _partial_value(text, pos + 1, depth + 1)
    if value is not _CUT:
        out[key] = value
    return pos


def _skip_ws(text: str, pos: int) -> int:
    return _WS_RE.match(text, pos).end()  # type: ignore[union-attr]


def _strip_cri(text: str) -> str:
    """The text after a CRI prefix, then after a syslog header (neither names a logger)."""
    m = _CRI_RE.match(text)
    if m:
        text = text[m.end() :]
    m = _SYSLOG_RE.match(text)
    return text[m.end() :] if m else text


def _is_logger_record(obj: dict[str, object]) -> bool:
    # python-json-logger's shape, as flytekit configures it: asctime, name, levelname, message.
    return isinstance(obj.get("message"), str) and ("levelname" in obj or "name" in obj)


def _is_logrus_record(obj: dict[str, object]) -> bool:
    # flytepropeller's logrus JSON (flyteorg/flyte flytestdlib/logger/logger.go: JSONFormatter with
    # DataKey "json"): level, msg, ts, and the context under `json`.
    return isinstance(obj.get("msg"), str) and isinstance(obj.get("level"), str)


def message_candidates(line: str) -> list[Unwrapped]:
    """Every message a line may carry, outermost wrapping removed first.

    The runtime's CRI prefix; then any JSON object, opened by content rather than by a fixed key
    or key order: a python-json-logger record (flytekit) gives its `message` with its logger
    name, a logrus record (propeller) is kept whole, and any other object — a runtime's or a
    shipper's envelope (docker, Fluent Bit, the OpenTelemetry collector's Loki exporter, Vector)
    — gives every string value it holds, each unwrapped in turn (nested objects too). Anything
    else is the message itself.
    """
    out: list[Unwrapped] = []
    _collect(line[:MAX_SCAN_CHARS], 0, 1, out)
    return out


def _collect(text: str, depth: int, rank: int, out: list[Unwrapped]) -> None:
    text = _strip_cri(text)
    stripped = text.strip()
    if stripped.startswith("{") and depth < _MAX_DEPTH:
        obj = _load_object(stripped)
        if obj is not None:
            _collect_object(obj, stripped, depth, rank, out)
            return
    out.append(Unwrapped(text.rstrip("\r\n") if depth else text, None, rank))


def _collect_object(
    obj: dict[str, object], text: str | None, depth: int, rank: int, out: list[Unwrapped]
) -> None:
    if _is_logger_record(obj):
        name = obj.get("name")
        message = obj["message"]
        assert isinstance(message, str)
        out.append(Unwrapped(message, name if isinstance(name, str) else None, 0))
        return
    if _is_logrus_record(obj):
        out.append(Unwrapped(text if text is not None else json.dumps(obj), None, rank))
        return
    for key, value in obj.items():
        if len(out) >= _MAX_LEAVES:
            return
        inner = rank if key in _MESSAGE_KEYS else 2
        if isinstance(value, str):
            _collect(value, depth + 1, inner, out)
        elif isinstance(value, dict) and depth + 1 < _MAX_DEPTH:
            _collect_object(value, None, depth + 1, inner, out)


def unwrap(line: str) -> Unwrapped:
    found = message_candidates(line)
    if not found:  # an envelope with no string in it: show it as it came
        return Unwrapped(_strip_cri(line[:MAX_SCAN_CHARS]), None)
    return min(found, key=lambda u: u.rank)  # the first of the best rank


def unwrap_runtime(line: str) -> str:
    """The log message inside any container-runtime, shipper and JSON-logger wrapping.

    Strips CRI (`<ts> stderr F <msg>`, partial `P` lines too), docker json-file
    (`{"log": "<msg>\\n", ...}`) and shippers' JSON envelopes (Fluent Bit, the OpenTelemetry
    collector's Loki exporter, Vector; keys in any order), then a python-json-logger record
    (flytekit's pod format) down to its `message`. A propeller (logrus) JSON line is kept whole.
    Anything else comes back unchanged. Only the first `MAX_SCAN_CHARS` characters are looked at;
    JSON cut short still yields the text it holds.
    """
    return unwrap(line).text
