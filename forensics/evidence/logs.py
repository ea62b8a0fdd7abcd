"""Log lines as evidence: torch/flytekit death signals, corroborating lines, propeller events."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from forensics.evidence.envelopes import (
    MAX_SCAN_CHARS,
    Unwrapped,
    message_candidates,
    unwrap,
    unwrap_runtime,
)
from forensics.evidence.line_time import own_time
from forensics.model import LogEntry, SignalHit

__all__ = [
    "SIGNAL_LINE_REGEX",
    "PropellerEvent",
    "corroboration",
    "parse_propeller_line",
    "parse_signal",
    "signal_line_matched",
]

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
# Death signals
# ---------------------------------------------------------------------------------------------


def _torch_logger(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def _flytekit_logger(name: str) -> bool:
    return name == "flytekit" or name.startswith("flytekit.")


def _match_signal(u: Unwrapped) -> tuple[str, re.Match[str]] | None:
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
    parser by construction. The hit's time is the line's own (CRI prefix, glog or Python logging
    prefix: `line_time.own_time`), else Loki's timestamp for the entry; namespace, pod and
    container come from the stream labels. Without a namespace or pod label the line cannot be
    attributed and None is returned.
    """
    namespace = entry.label(namespace_label)
    pod = entry.label(pod_label)
    if not namespace or not pod or not signal_line_matched(entry.line):
        return None
    for u in message_candidates(entry.line):
        found = _match_signal(u)
        if found is None:
            continue
        kind, m = found
        sig = _signal_of(m)
        if sig is None:
            continue
        name, number = sig
        at, at_source = own_time(entry.line, m.group(0), m.groupdict().get("pylog"), entry.at)
        return SignalHit(
            signal=name,
            number=number,
            at=at,
            at_source=at_source,
            loki_at=entry.at if at != entry.at else None,
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


def parse_utc_time(value: object) -> datetime | None:
    """An RFC 3339 / ISO 8601 time with a zone (`Z` included) as UTC; None for anything else."""
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
        obj = json.loads(unwrap(line).text.strip())
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
        ts=parse_utc_time(obj.get("ts")),
        exec_id=field("exec_id"),
        ns=field("ns"),
        node=field("node"),
        wf=field("wf"),
        tasktype=field("tasktype"),
        src=field("src"),
    )
