"""Pure evidence parsing: log lines -> death signals and corroboration; pod names -> attempts."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from forensics.model import LogEntry, SignalHit

__all__ = [
    "DEFAULT_DOMAINS",
    "GENERATED_NAME_MAX_LENGTH",
    "MAX_SCAN_CHARS",
    "SIGNAL_LINE_REGEX",
    "UNIQUE_NODE_ID_MAX_LENGTH",
    "PodName",
    "PropellerEvent",
    "corroboration",
    "generated_name",
    "hash_id",
    "namespace_for",
    "namespace_to_project_domain",
    "parse_pod_name",
    "parse_propeller_line",
    "parse_signal",
    "pod_name_for",
    "signal_line_matched",
    "unique_node_id",
    "unwrap_runtime",
]

# Only this much of a line is ever examined: evidence lines are short, and a multi-megabyte line
# (a dumped tensor, a base64 blob) must not cost more than a short one.
MAX_SCAN_CHARS = 64 * 1024

# ---------------------------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------------------------

# Linux numbering (pods run Linux, whatever the auditor runs on), as Python's `signal.Signals`
# names them. SIGKILL and SIGSTOP are absent: they cannot be handled, so torch never logs them.
_LINUX_SIGNALS: dict[int, str] = {
    1: "SIGHUP",
    2: "SIGINT",
    3: "SIGQUIT",
    4: "SIGILL",
    5: "SIGTRAP",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    10: "SIGUSR1",
    11: "SIGSEGV",
    12: "SIGUSR2",
    13: "SIGPIPE",
    14: "SIGALRM",
    15: "SIGTERM",
    16: "SIGSTKFLT",
    17: "SIGCHLD",
    18: "SIGCONT",
    20: "SIGTSTP",
    21: "SIGTTIN",
    22: "SIGTTOU",
    23: "SIGURG",
    24: "SIGXCPU",
    25: "SIGXFSZ",
    26: "SIGVTALRM",
    27: "SIGPROF",
    28: "SIGWINCH",
    29: "SIGIO",
    30: "SIGPWR",
    31: "SIGSYS",
    34: "SIGRTMIN",
    64: "SIGRTMAX",
}
_SIGNAL_NUMBERS: dict[str, int] = {name: num for num, name in _LINUX_SIGNALS.items()}
_SIGNAL_NUMBERS.update({"SIGIOT": 6, "SIGCLD": 17, "SIGPOLL": 29})

# How torch renders `sigval`: `15` (str() on Python >= 3.11, any f-string) or `Signals.SIGTERM`
# (%-formatting on Python 3.10).
_SIG = r"(?:(?P<num>0|[1-9][0-9]{0,2})|Signals\.(?P<name>SIG[A-Z0-9]+))"
_SIG_LOOSE = r"(?:[0-9]+|Signals\.SIG[A-Z0-9]+)"

_AGENT_MSG = rf"Received {_SIG} death signal, shutting down workers"
_BARRIER_MSG = rf"Got termination signal: {_SIG}"
_FLYTEKIT_MSG = (
    rf"Elastic launch agent process terminating: Process (?P<pid>[0-9]+) got signal: {_SIG}"
)

SIGNAL_LINE_REGEX: str = (
    rf"Received {_SIG_LOOSE} death signal, shutting down workers"
    rf"|Got termination signal: {_SIG_LOOSE}"
    rf"|Elastic launch agent process terminating: Process [0-9]+ got signal: {_SIG_LOOSE}"
)
"""One RE2 regex (no lookarounds, no backreferences) for Loki's `|~`: every line `parse_signal`
accepts matches it, raw or wrapped (JSON encoders escape no character of these phrases). It
contains backslashes, so put it in LogQL between backticks."""

# The prefixes torch's loggers put before a message:
# - torch._logging's glog style: `[rank0]:W1130 05:57:21.199000 10814 torch/.../api.py:753] `,
#   optionally followed by ` [trace id]` / ` [__artifact]` tags;
# - `TORCH_LOGS_FORMAT=short` (logging.BASIC_FORMAT): `WARNING:torch.distributed...api:`.
_GLOG_PREFIX = (
    r"(?:\[rank[0-9]+\]:)?[VIWEC][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6} [0-9]+ "
    r"[^\s\]]+:[0-9]+\](?: \[[^\]\n]*\])* "
)
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_LOGGER_NAME = r"[A-Za-z_][\w.-]{0,200}"
# logging.BASIC_FORMAT, `LEVEL:logger.name:`; the logger must then be torch's (checked in code).
_BASIC_PREFIX = rf"{_LEVEL}:(?P<basic_logger>{_LOGGER_NAME}):"
# A Python logging format with a timestamp first, as teams configure it
# (`%(asctime)s %(levelname)s %(name)s: %(message)s`, `... - %(name)s - %(levelname)s - ...`,
# the OpenTelemetry/Datadog log-correlation formats
# `%(asctime)s %(levelname)s [%(name)s] [%(filename)s:%(lineno)d] [trace_id=... span_id=...] - `):
# the timestamp, then up to six fields (level, logger, `[file:line]`, a `[key=value ...]` block),
# then a separator. The fields are re-read in code to find the logger name.
_ASCTIME = (
    r"\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?\]?"
)
_KV = r"[\w.]{1,64}=[^\s\]]{0,256}"
_PY_FIELD = (
    rf"(?:\[?{_LEVEL}\]?|\[{_LOGGER_NAME}\]|{_LOGGER_NAME}|\[[\w./-]{{1,200}}:[0-9]{{1,6}}\]"
    rf"|\[{_KV}(?: {_KV}){{0,15}}\]|\[?[0-9]{{1,10}}\]?)"
)
_PY_PREFIX = rf"(?P<pylog>{_ASCTIME}(?:(?: - | \| | |: ){_PY_FIELD}){{1,6}}(?: - |: | \| | ))"
# Syslog headers, when lines travel over syslog and the receiver keeps the whole message (Alloy's
# `loki.source.syslog` with `use_rfc5424_message`, rsyslog forwarding): RFC 5424
# `<PRI>1 TIMESTAMP HOST APP PROCID MSGID [SD]... ` and RFC 3164 `<PRI>Mmm dd hh:mm:ss HOST TAG[PID]: `.
_SYSLOG = (
    r"(?:<[0-9]{1,3}>[0-9]{1,2} \S{1,64} \S{1,255} \S{1,48} \S{1,128} \S{1,32} "
    r"(?:-|(?:\[[^\]\n]{0,1024}\]){1,8}) \ufeff?"
    r"|(?:<[0-9]{1,3}>)?[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} \S{1,255} "
    r"[^\s:\[]{1,48}(?:\[[0-9]{1,10}\])?: )"
)
_LINE_PREFIX = rf"(?:{_GLOG_PREFIX}|{_BASIC_PREFIX}|{_PY_PREFIX})?"
# Trace-correlation fields appended after the message (` trace_id=... span_id=...`, bracketed or
# not, Datadog's `dd.trace_id=`): key=value pairs of which at least one names a trace or span.
_TRACE_KV = r"[\w.]{0,32}(?:trace|span)[\w.]{0,32}=[^\s\]]{0,256}"
_SUFFIX = rf"(?:[ \t]+\[?(?:{_KV} ){{0,15}}{_TRACE_KV}(?: {_KV}){{0,15}}\]?)?"

_AGENT_RE = re.compile(rf"^{_LINE_PREFIX}{_AGENT_MSG}{_SUFFIX}[ \t\r]*$", re.MULTILINE)
_BARRIER_RE = re.compile(rf"^{_LINE_PREFIX}{_BARRIER_MSG}{_SUFFIX}[ \t\r]*$", re.MULTILINE)
# flytekit's handler is `logger.exception(f"...: {e}")`: JSON by default in a pod, else
# `[flytekit] <msg>` (or a Python logging prefix naming the flytekit logger), with the traceback on
# the following lines.
_FLYTEKIT_RE = re.compile(
    rf"^(?:\[(?P<text_logger>flytekit(?:\.[\w.]+)?)\] |{_LINE_PREFIX}){_FLYTEKIT_MSG}{_SUFFIX}"
    r"[ \t\r]*$",
    re.MULTILINE,
)
_ASCTIME_RE = re.compile(_ASCTIME)
_BRACKETED_META_RE = re.compile(r"\[[^\]]*[=:][^\]]*\]")
_NOT_LOGGER_RE = re.compile(rf"{_LEVEL}|[0-9]+")
_SIGNAL_FILTER_RE = re.compile(SIGNAL_LINE_REGEX)


def _signal_of(m: re.Match[str]) -> tuple[str, int] | None:
    """(name, number) of the signal a match captured, or None if it is no handleable signal."""
    if m.group("num") is not None:
        num = int(m.group("num"))
        name = _LINUX_SIGNALS.get(num)
        return (name, num) if name else None
    num = _SIGNAL_NUMBERS.get(m.group("name"))
    return (_LINUX_SIGNALS[num], num) if num is not None else None


def _prefix_loggers(m: re.Match[str]) -> list[str]:
    """The logger names a matched line's text prefix states (none for glog or a bare line)."""
    names = []
    if m.group("basic_logger"):
        names.append(m.group("basic_logger"))
    pylog = m.group("pylog")
    if pylog:
        # After the timestamp, every field that is no level, number, `[file:line]` or
        # `[key=value ...]` block is the logger's name.
        rest = _BRACKETED_META_RE.sub(" ", pylog[_ASCTIME_RE.match(pylog).end() :])  # type: ignore[union-attr]
        for token in re.split(r"[ |]+", rest):
            name = token.strip("[]:-")
            if name and not _NOT_LOGGER_RE.fullmatch(name):
                names.append(name)
    return names


# ---------------------------------------------------------------------------------------------
# Container-runtime, shipper and logger wrapping
# ---------------------------------------------------------------------------------------------

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
class _Unwrapped:
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
    pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
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
        pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return out, pos
        if text[pos] == close:
            return out, pos + 1
        if isinstance(out, dict):
            key, pos = _partial_value(text, pos, depth + 1)
            if key is _CUT or pos >= len(text):
                return out, len(text)
            if not isinstance(key, str):
                raise _Malformed()
            pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
            if pos >= len(text):
                return out, pos
            if text[pos] != ":":
                raise _Malformed()
            value, pos = _partial_value(text, pos + 1, depth + 1)
            if value is not _CUT:
                out[key] = value
        else:
            value, pos = _partial_value(text, pos, depth + 1)
            if value is not _CUT:
                out.append(value)
        pos = _WS_RE.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return out, pos
        if text[pos] == ",":
            pos += 1
        elif text[pos] != close:
            raise _Malformed()


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
    # flytepropeller's logrus JSON (FACTS §4): level, msg, ts, and the context under `json`.
    return isinstance(obj.get("msg"), str) and isinstance(obj.get("level"), str)


def _candidates(line: str) -> list[_Unwrapped]:
    """Every message a line may carry, outermost wrapping removed first.

    The runtime's CRI prefix; then any JSON object, opened by content rather than by a fixed key
    or key order: a python-json-logger record (flytekit) gives its `message` with its logger
    name, a logrus record (propeller) is kept whole, and any other object — a runtime's or a
    shipper's envelope (docker, Fluent Bit, the OpenTelemetry collector's Loki exporter, Vector)
    — gives every string value it holds, each unwrapped in turn (nested objects too). Anything
    else is the message itself.
    """
    out: list[_Unwrapped] = []
    _collect(line[:MAX_SCAN_CHARS], 0, 1, out)
    return out


def _collect(text: str, depth: int, rank: int, out: list[_Unwrapped]) -> None:
    text = _strip_cri(text)
    stripped = text.strip()
    if stripped.startswith("{") and depth < _MAX_DEPTH:
        obj = _load_object(stripped)
        if obj is not None:
            _collect_object(obj, stripped, depth, rank, out)
            return
    out.append(_Unwrapped(text.rstrip("\r\n") if depth else text, None, rank))


def _collect_object(
    obj: dict[str, object], text: str | None, depth: int, rank: int, out: list[_Unwrapped]
) -> None:
    if _is_logger_record(obj):
        name = obj.get("name")
        message = obj["message"]
        assert isinstance(message, str)
        out.append(_Unwrapped(message, name if isinstance(name, str) else None, 0))
        return
    if _is_logrus_record(obj):
        out.append(_Unwrapped(text if text is not None else json.dumps(obj), None, rank))
        return
    for key, value in obj.items():
        if len(out) >= _MAX_LEAVES:
            return
        inner = rank if key in _MESSAGE_KEYS else 2
        if isinstance(value, str):
            _collect(value, depth + 1, inner, out)
        elif isinstance(value, dict) and depth + 1 < _MAX_DEPTH:
            _collect_object(value, None, depth + 1, inner, out)


def _unwrap(line: str) -> _Unwrapped:
    found = _candidates(line)
    if not found:  # an envelope with no string in it: show it as it came
        return _Unwrapped(_strip_cri(line[:MAX_SCAN_CHARS]), None)
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
    return _unwrap(line).text


# ---------------------------------------------------------------------------------------------
# Death signals
# ---------------------------------------------------------------------------------------------


def _torch_logger(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def _flytekit_logger(name: str) -> bool:
    return name == "flytekit" or name.startswith("flytekit.")


def _match_signal(u: _Unwrapped) -> tuple[str, re.Match[str]] | None:
    """Which known structure the unwrapped message is; every logger it names must fit it.

    torch's agent and exit-barrier lines: from a torch logger or none named; flytekit's line: from
    the flytekit logger only (its JSON record, `[flytekit] `, or a logging prefix naming it).
    """
    for kind, pattern in (("agent", _AGENT_RE), ("exit_barrier", _BARRIER_RE)):
        for m in pattern.finditer(u.text):
            loggers = _prefix_loggers(m) + ([u.logger] if u.logger is not None else [])
            if all(_torch_logger(n) for n in loggers):
                return kind, m
    for m in _FLYTEKIT_RE.finditer(u.text):
        loggers = _prefix_loggers(m) + ([u.logger] if u.logger is not None else [])
        if m.group("text_logger"):
            loggers.append(m.group("text_logger"))
        # e.g. flytekit's `user_space` logger: a user's own message, whatever it says
        if loggers and all(_flytekit_logger(n) for n in loggers):
            return "flytekit", m
    return None


def signal_line_matched(line: str) -> bool:
    """Whether Loki's `|~ SIGNAL_LINE_REGEX` filter lets `line` through (the part examined)."""
    return _SIGNAL_FILTER_RE.search(line[:MAX_SCAN_CHARS]) is not None


def parse_signal(
    entry: LogEntry,
    *,
    namespace_label: str = "namespace",
    pod_label: str = "pod",
    container_label: str = "container",
) -> SignalHit | None:
    """The death signal a pod's log line records, or None.

    Recognised (anchored: the whole physical line must be one of these, so a user's print that
    merely mentions the phrase does not count):
    - `agent`: torch's `Received <sig> death signal, shutting down workers`;
    - `exit_barrier`: torch's `Got termination signal: <sig>`;
    both bare, after torch's glog prefix (`W1130 05:57:21.199000 10814 path.py:753] `, optionally
    `[rankN]:`-prefixed), after `LEVEL:torch.logger:`, or after a Python logging prefix that
    starts with a timestamp (and names a torch logger, if it names one);
    - `flytekit`: `Elastic launch agent process terminating: Process N got signal: <sig>` from the
    `flytekit` logger (its JSON record, `[flytekit] ` text format, or a logging prefix naming it).
    `<sig>` is `15` or `Signals.SIGTERM` (Python 3.10). Any of these may carry a syslog header
    before and trace-correlation fields (` trace_id=... span_id=...`) after, and may be wrapped by
    the container runtime and by a log shipper's JSON envelope (see `unwrap_runtime`). Only a line
    Loki's `SIGNAL_LINE_REGEX` filter matches is ever accepted, so the query is a superset of the
    parser by construction. The hit's time is Loki's timestamp for the entry; namespace, pod and
    container come from the stream labels. Without a namespace or pod label the line cannot be
    attributed and None is returned.
    """
    namespace = entry.label(namespace_label)
    pod = entry.label(pod_label)
    if not namespace or not pod or not signal_line_matched(entry.line):
        return None
    for u in _candidates(entry.line):
        found = _match_signal(u)
        if found is None:
            continue
        kind, m = found
        sig = _signal_of(m)
        if sig is None:
            continue
        name, number = sig
        return SignalHit(
            signal=name,
            number=number,
            at=entry.at,
            namespace=namespace,
            pod=pod,
            container=entry.label(container_label),
            kind=kind,
            line=m.group(0).rstrip(),
        )
    return None


# ---------------------------------------------------------------------------------------------
# Corroborating lines
# ---------------------------------------------------------------------------------------------

_CORROBORATION: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ignore_outputs",
        re.compile(r"User-scoped IgnoreOutputs received! Outputs\.pb will not be uploaded"),
    ),
    ("closing_process", re.compile(r"Closing process [0-9]+ via signal SIG[A-Z0-9]+")),
    ("signal_exception", re.compile(rf"SignalException: Process [0-9]+ got signal: {_SIG_LOOSE}")),
)
_NO_OUTPUT_READER_RE = re.compile(r"Plugin \[([^\]]+)\] returned no outputReader")


def corroboration(line: str) -> str | None:
    """The kind of corroborating evidence a line is, or None.

    `ignore_outputs` (flytekit uploaded nothing), `closing_process` (torch tearing down workers),
    `signal_exception` (a traceback's `SignalException: Process N got signal: 15`) and
    `propeller_no_output_reader` (propeller saw the plugin succeed — logged on every success, so
    corroboration only, never proof).
    """
    text = unwrap_runtime(line)
    for kind, pattern in _CORROBORATION:
        if pattern.search(text):
            return kind
    event = parse_propeller_line(line)
    msg = event.msg if event is not None else text
    if _NO_OUTPUT_READER_RE.search(msg):
        return "propeller_no_output_reader"
    return None


@dataclass(frozen=True)
class PropellerEvent:
    """One flytepropeller logrus JSON line: the context fields it carries and the message."""

    level: str
    msg: str
    ts: datetime | None
    exec_id: str | None
    ns: str | None
    node: str | None  # nested node ids joined by "/", e.g. "n0/dn1"
    wf: str | None = None  # "project:domain:name"
    tasktype: str | None = None
    src: str | None = None

    @property
    def node_path(self) -> tuple[str, ...]:
        """The node ids from the outermost to the innermost."""
        return tuple(self.node.split("/")) if self.node else ()

    @property
    def plugin(self) -> str | None:
        """The plugin named by a `Plugin [x] returned no outputReader` message."""
        m = _NO_OUTPUT_READER_RE.search(self.msg)
        return m.group(1) if m else None


def _parse_ts(value: object) -> datetime | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    return t.astimezone(timezone.utc)


def parse_propeller_line(line: str) -> PropellerEvent | None:
    """A propeller JSON log line (`{"json": {...}, "level", "msg", "ts"}`), or None.

    Context fields live under the formatter's `json` data key; flat lines are read as well, and
    so is a line inside a runtime's or shipper's envelope. Lines that are not complete JSON objects
    with a string `msg` and `level` give None.
    """
    try:
        obj = json.loads(_unwrap(line).text.strip())
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    msg, level = obj.get("msg"), obj.get("level")
    if not isinstance(msg, str) or not isinstance(level, str):
        return None
    data = obj.get("json")
    fields = data if isinstance(data, dict) else obj

    def field(key: str) -> str | None:
        v = fields.get(key)
        return v if isinstance(v, str) else None

    return PropellerEvent(
        level=level,
        msg=msg,
        ts=_parse_ts(obj.get("ts")),
        exec_id=field("exec_id"),
        ns=field("ns"),
        node=field("node"),
        wf=field("wf"),
        tasktype=field("tasktype"),
        src=field("src"),
    )


# ---------------------------------------------------------------------------------------------
# Generated names (flyteplugins encoding.FixedLengthUniqueIDForParts)
# ---------------------------------------------------------------------------------------------

GENERATED_NAME_MAX_LENGTH = 50  # propeller's task.IDMaxLength
UNIQUE_NODE_ID_MAX_LENGTH = 20  # propeller's nodes/common maxUniqueIDLength

_B32_STD = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_FLYTE = b"abcdefghijklmnopqrstuvwxyz123456"
_B32_TABLE = bytes.maketrans(_B32_STD, _B32_FLYTE)
_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def hash_id(value: str) -> str:
    """`"f"` + unpadded base32 (alphabet `a-z1-6`) of FNV-32a over the UTF-8 bytes: 8 chars."""
    h = _FNV32_OFFSET
    for byte in value.encode("utf-8"):
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    encoded = base64.b32encode(h.to_bytes(4, "big")).translate(_B32_TABLE)
    return "f" + encoded.decode("ascii").rstrip("=")


def generated_name(parts: Sequence[str | int], max_length: int = GENERATED_NAME_MAX_LENGTH) -> str:
    """A faithful port of flyteplugins' `encoding.FixedLengthUniqueIDForParts` (FNV-32a).

    Parts are joined with `-` (no separator while the result is still empty, as upstream); a
    result longer than `max_length` bytes is replaced by `hash_id` of it. Raises ValueError
    where upstream returns an error: when even the 8-char hash exceeds `max_length`.
    """
    joined = ""
    for i, part in enumerate(parts):
        if i > 0 and joined:
            joined += "-"
        joined += str(part)
    if len(joined.encode("utf-8")) <= max_length:
        return joined
    hashed = hash_id(joined)
    if len(hashed) > max_length:
        raise ValueError(f"max length {max_length} is too small for an encoded id ({hashed})")
    return hashed


def unique_node_id(parent_unique_id: str | None, parent_attempt: int | None, node_id: str) -> str:
    """Admin's node id for a node (propeller `GenerateUniqueID`); top-level: both parents None."""
    parent_attempt_part = "" if parent_attempt is None else str(parent_attempt)
    return generated_name(
        [parent_unique_id or "", parent_attempt_part, node_id], UNIQUE_NODE_ID_MAX_LENGTH
    )


def pod_name_for(
    execution: str, node_id: str, attempt: int, max_length: int = GENERATED_NAME_MAX_LENGTH
) -> str:
    """The pod (or PyTorchJob) name propeller generates for one task attempt."""
    return generated_name([execution, node_id, attempt], max_length)


# ---------------------------------------------------------------------------------------------
# Pod names -> attempts
# ---------------------------------------------------------------------------------------------

_EXEC_RE = re.compile(r"[a-z][a-z0-9-]{0,62}")  # flyteadmin: ^[a-z][a-z\-0-9]*$, <= 63 chars
_GENERATED_EXEC_RE = re.compile(r"[a-z][a-z0-9]{19}")  # flyteadmin's generated names
_NODE_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_ATTEMPT_RE = re.compile(r"0|[1-9][0-9]{0,9}")
_HASHED_RE = re.compile(r"f[a-z1-6]{7}")
_ID = r"(?:[a-z]*n[0-9]+|f[a-z1-6]{7})"  # flytekit's n0 / dn0, or a hashed unique id
_CANONICAL_NODE_RE = re.compile(rf"{_ID}(?:-(?:0|[1-9][0-9]*)-{_ID})*")
_STRUCTURED_NODE_RE = re.compile(r"[a-z0-9]+(?:-(?:0|[1-9][0-9]*)-[a-z0-9]+)*")
_REPLICA_RE = re.compile(r"(?P<job>.+)-(?P<role>worker|master)-(?P<index>0|[1-9][0-9]{0,5})")
_DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")


@dataclass(frozen=True)
class PodName:
    """What a pod name says about its task attempt.

    `candidates` are the (execution, node_id, attempt) splits consistent with Flyte's naming,
    most likely first; each regenerates the name exactly (`pod_name_for`, plus the replica
    suffix for splits of `generated`). `replica` is the PyTorchJob `(role, index)` suffix when the
    name has one: candidates assuming it come first, then any reading of the whole name as a plain
    task pod. `hashed` says the generated name is the `f` + base32 form, which cannot be split:
    resolve it through Admin's task-execution pod names.
    """

    pod: str
    generated: str  # the Flyte generated name (the PyTorchJob name when `replica` is set)
    candidates: tuple[tuple[str, str, int], ...]
    replica: tuple[str, int] | None
    hashed: bool


def _split_rank(split: tuple[str, str, int]) -> tuple[bool, bool, bool, int]:
    execution, node, _ = split
    return (
        not _GENERATED_EXEC_RE.fullmatch(execution),
        not _CANONICAL_NODE_RE.fullmatch(node),
        not _STRUCTURED_NODE_RE.fullmatch(node),
        len(node),
    )


def _plain_splits(name: str, max_length: int) -> list[tuple[str, str, int]]:
    """Every (execution, node, attempt) whose generated name is exactly `name`, best first."""
    if len(name.encode("utf-8")) > max_length:
        return []
    rest, dash, attempt = name.rpartition("-")
    if not dash or not _ATTEMPT_RE.fullmatch(attempt):
        return []
    splits: list[tuple[str, str, int]] = []
    for i, ch in enumerate(rest):
        if ch != "-":
            continue
        execution, node = rest[:i], rest[i + 1 :]
        if (
            _EXEC_RE.fullmatch(execution)
            and len(node) <= UNIQUE_NODE_ID_MAX_LENGTH
            and _NODE_RE.fullmatch(node)
        ):
            splits.append((execution, node, int(attempt)))
    return sorted(splits, key=_split_rank)


def parse_pod_name(pod: str, *, max_length: int = GENERATED_NAME_MAX_LENGTH) -> PodName | None:
    """Split a pod name into its possible task attempts; None if it cannot be a Flyte task pod.

    Forms: `<exec>-<unique node id>-<attempt>` (node ids of nested nodes contain dashes, e.g.
    `n0-0-dn1`; user-named executions may too, so several splits can fit), PyTorchJob replicas
    `<generated>-worker-N` / `-master-N`, and hashed names `f` + 7 base32 chars.
    """
    if len(pod) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(pod):
        return None
    plain = _plain_splits(pod, max_length)
    replica_m = _REPLICA_RE.fullmatch(pod)
    if replica_m:
        job = replica_m.group("job")
        job_splits = _plain_splits(job, max_length)
        job_hashed = bool(_HASHED_RE.fullmatch(job))
        if job_splits or job_hashed:
            candidates = tuple(dict.fromkeys([*job_splits, *plain]))
            replica = (replica_m.group("role"), int(replica_m.group("index")))
            return PodName(pod, job, candidates, replica, job_hashed)
    hashed = bool(_HASHED_RE.fullmatch(pod))
    if not plain and not hashed:
        return None
    return PodName(pod, pod, tuple(plain), None, hashed)


# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------

DEFAULT_DOMAINS: tuple[str, ...] = ("development", "staging", "production")

# flyteadmin's own placeholders (`namespaceutils.GetNamespaceName`) are accepted as well, so a
# template copied from its config works unchanged. OSS Flyte has no org: it renders empty.
_ADMIN_PLACEHOLDERS = (("{{ project }}", "{project}"), ("{{ domain }}", "{domain}"))
_ORG_PLACEHOLDERS = ("{{ org }}", "{org}")


def _normalise_template(template: str) -> str:
    for admin, ours in _ADMIN_PLACEHOLDERS:
        template = template.replace(admin, ours)
    for org in _ORG_PLACEHOLDERS:
        template = template.replace(org, "")
    return template


def namespace_for(project: str, domain: str, template: str = "{project}-{domain}") -> str:
    """The Kubernetes namespace flyteadmin maps a project and domain to."""
    return _normalise_template(template).replace("{project}", project).replace("{domain}", domain)


def namespace_to_project_domain(
    ns: str,
    template: str = "{project}-{domain}",
    domains: Sequence[str] = DEFAULT_DOMAINS,
) -> tuple[str, str] | None:
    """The (project, domain) a namespace belongs to, or None when none or several fit.

    Domains must be one of `domains`; projects may contain dashes. When more than one pair
    renders to `ns` (e.g. domains `dev` and `x-dev` for `a-x-dev`) the answer is None: a
    namespace is never attributed to a project by guesswork.
    """
    tpl = _normalise_template(template)
    if "{project}" not in tpl or "{domain}" not in tpl or len(ns) > 253:
        return None
    found: set[tuple[str, str]] = set()
    for domain in dict.fromkeys(d for d in domains if d):
        pattern = _template_regex(tpl.replace("{domain}", domain))
        m = pattern.fullmatch(ns)
        if m and m.group("project"):
            found.add((m.group("project"), domain))
    return found.pop() if len(found) == 1 else None


def _template_regex(template: str) -> re.Pattern[str]:
    pieces = template.split("{project}")
    # Repeated {project} placeholders must all hold the same project.
    body = "(?P<project>.+?)".join([re.escape(pieces[0]), re.escape(pieces[1])])
    for piece in pieces[2:]:
        body += "(?P=project)" + re.escape(piece)
    return re.compile(body, re.DOTALL)
