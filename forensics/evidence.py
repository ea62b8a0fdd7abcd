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
_BASIC_PREFIX = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):torch(?:\.\w+)*:"
_TORCH_PREFIX = rf"(?:{_GLOG_PREFIX}|{_BASIC_PREFIX})?"

_AGENT_RE = re.compile(rf"^{_TORCH_PREFIX}{_AGENT_MSG}[ \t\r]*$", re.MULTILINE)
_BARRIER_RE = re.compile(rf"^{_TORCH_PREFIX}{_BARRIER_MSG}[ \t\r]*$", re.MULTILINE)
# flytekit's handler is `logger.exception(f"...: {e}")`: JSON by default in a pod, else
# `[flytekit] <msg>`, with the traceback on the following lines.
_FLYTEKIT_RE = re.compile(rf"^{_FLYTEKIT_MSG}[ \t\r]*$", re.MULTILINE)
_FLYTEKIT_TEXT_RE = re.compile(
    rf"^\[flytekit(?:\.[\w.]+)?\] {_FLYTEKIT_MSG}[ \t\r]*$", re.MULTILINE
)


def _signal_of(m: re.Match[str]) -> tuple[str, int] | None:
    """(name, number) of the signal a match captured, or None if it is no handleable signal."""
    if m.group("num") is not None:
        num = int(m.group("num"))
        name = _LINUX_SIGNALS.get(num)
        return (name, num) if name else None
    num = _SIGNAL_NUMBERS.get(m.group("name"))
    return (_LINUX_SIGNALS[num], num) if num is not None else None


# ---------------------------------------------------------------------------------------------
# Container-runtime and logger wrapping
# ---------------------------------------------------------------------------------------------

# CRI (containerd, CRI-O): `<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <message>`.
_CRI_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[^ ]+ (?:stdout|stderr) [A-Z](?::[^ ]*)?(?: |$)")
# The start of one JSON string value, up to the end of the text or the closing quote; used to
# recover a value from JSON that a collector cut short.
_JSON_STR = r'"((?:[^"\\]|\\.)*)'
_DOCKER_START_RE = re.compile(r'\{\s*"log"\s*:')
_DOCKER_PARTIAL_RE = re.compile(r'^\{\s*"log"\s*:\s*' + _JSON_STR)
_MESSAGE_PARTIAL_RE = re.compile(r'"message"\s*:\s*' + _JSON_STR)
_NAME_PARTIAL_RE = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class _Unwrapped:
    text: str
    logger: str | None  # the Python logger name when the line came from a JSON logger


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
        return None
    return obj if isinstance(obj, dict) else None


def _strip_runtime(text: str) -> str:
    """The message inside CRI or docker json-file wrapping (one layer each, CRI first)."""
    m = _CRI_RE.match(text)
    if m:
        text = text[m.end() :]
    stripped = text.lstrip()
    if _DOCKER_START_RE.match(stripped):
        obj = _load_object(stripped)
        if obj is not None and isinstance(obj.get("log"), str):
            text = obj["log"]
        else:
            partial = _DOCKER_PARTIAL_RE.match(stripped)
            if partial:
                text = _decode_json_fragment(partial.group(1))
        text = text.rstrip("\r\n")
    return text


def _unwrap(line: str) -> _Unwrapped:
    text = _strip_runtime(line[:MAX_SCAN_CHARS])
    stripped = text.strip()
    if not stripped.startswith("{") or '"message"' not in stripped:
        return _Unwrapped(text, None)
    obj = _load_object(stripped)
    if obj is not None:
        message = obj.get("message")
        # python-json-logger's shape, as flytekit configures it: asctime, name, levelname, message.
        if isinstance(message, str) and ("levelname" in obj or "name" in obj):
            name = obj.get("name")
            return _Unwrapped(message, name if isinstance(name, str) else None)
        return _Unwrapped(text, None)
    partial = _MESSAGE_PARTIAL_RE.search(stripped)
    if partial is None or not stripped.startswith('{"asctime"'):
        return _Unwrapped(text, None)
    name_m = _NAME_PARTIAL_RE.search(stripped, 0, partial.start())
    name = _decode_json_fragment(name_m.group(1)) if name_m else None
    return _Unwrapped(_decode_json_fragment(partial.group(1)), name)


def unwrap_runtime(line: str) -> str:
    """The log message inside any container-runtime and JSON-logger wrapping.

    Strips CRI (`<ts> stderr F <msg>`, partial `P` lines too) and docker json-file
    (`{"log": "<msg>\\n", ...}`) wrapping, then a python-json-logger record (flytekit's pod
    format) down to its `message`. Anything else comes back unchanged. Only the first
    `MAX_SCAN_CHARS` characters are looked at; JSON cut short still yields the text it holds.
    """
    return _unwrap(line).text


# ---------------------------------------------------------------------------------------------
# Death signals
# ---------------------------------------------------------------------------------------------


def _match_signal(u: _Unwrapped) -> tuple[str, re.Match[str]] | None:
    """Which known structure the unwrapped line is; a JSON record counts only from its logger."""
    if u.logger is None or u.logger == "torch" or u.logger.startswith("torch."):
        for kind, pattern in (("agent", _AGENT_RE), ("exit_barrier", _BARRIER_RE)):
            m = pattern.search(u.text)
            if m:
                return kind, m
    if u.logger is None:
        m = _FLYTEKIT_TEXT_RE.search(u.text)
    elif u.logger == "flytekit" or u.logger.startswith("flytekit."):
        m = _FLYTEKIT_RE.search(u.text)
    else:
        # e.g. flytekit's `user_space` logger: a user's own message, whatever it says
        m = None
    return ("flytekit", m) if m else None


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
    `[rankN]:`-prefixed) or after `LEVEL:logger.name:`;
    - `flytekit`: `Elastic launch agent process terminating: Process N got signal: <sig>` from the
    `flytekit` logger (its JSON record, or `[flytekit] ` text format).
    `<sig>` is `15` or `Signals.SIGTERM` (Python 3.10). Any of these may be wrapped by the
    container runtime. The hit's time is Loki's timestamp for the entry; namespace, pod and
    container come from the stream labels. Without a namespace or pod label the line cannot be
    attributed and None is returned.
    """
    namespace = entry.label(namespace_label)
    pod = entry.label(pod_label)
    if not namespace or not pod:
        return None
    found = _match_signal(_unwrap(entry.line))
    if found is None:
        return None
    kind, m = found
    sig = _signal_of(m)
    if sig is None:
        return None
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

    Context fields live under the formatter's `json` data key; flat lines are read as well.
    Lines that are not complete JSON objects with a string `msg` and `level` give None.
    """
    obj = _load_object(_strip_runtime(line[:MAX_SCAN_CHARS]).strip())
    if obj is None:
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
