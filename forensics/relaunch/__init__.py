"""The one mutating path: re-check, confirm, relaunch exactly once, and audit every action.

Exactly-once rests on the server, not on a local file: every relaunch of execution X is created
under one deterministic name derived from X, so a second call — a rerun, a retry after a lost
response, a second operator — gets Admin's ALREADY_EXISTS and reports the first relaunch.

This module holds what the command and its callers name: the deterministic name, the plan and
outcome of one relaunch, the operator's options, the audit log and the report input;
`relauncher` plans and performs, `recheck` judges an execution by the scan's rules, `assess`
reads the bug and cache facts a plan shows (docs/commands.md, "relaunch EXECUTION...").
"""

from __future__ import annotations

import base64
import fcntl
import getpass
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from forensics import TOOL
from forensics.errors import UsageError
from forensics.identifiers import parse_execution
from forensics.model import UTC, Checkpoint, ExecutionRef, ParentNode, recovered_note, rfc3339
from forensics.params import Param, ParamError
from forensics.report_json import report_from_json

STATUSES = ("relaunched", "already-relaunched", "dry-run", "refused", "failed")


def relaunch_name(ref: ExecutionRef) -> str:
    """The one name every relaunch of `ref` gets: 20 chars like Flyte's, `^[a-z][a-z0-9]*$`."""
    digest = hashlib.sha256(str(ref).encode()).digest()
    return "r" + base64.b32encode(digest).decode().lower().rstrip("=")[:19]


def relaunch_request(ref: ExecutionRef, *, overwrite_cache: bool = True) -> dict[str, object]:
    """The exact ExecutionRelaunchRequest sent (as data, for --dry-run and the audit log)."""
    return {"id": ref.as_dict(), "name": relaunch_name(ref), "overwrite_cache": overwrite_cache}


@dataclass(frozen=True)
class RelaunchPlan:
    """What a relaunch of one execution would do, after the live re-check."""

    execution: ExecutionRef
    verdict: str  # from the re-check: affected / suspected / not-affected / not-examined / ...
    checkpoint: str  # what the relaunch will find in the checkpoint location
    existing: ExecutionRef | None  # a relaunch that exists already (and is not dead)
    refusal: str | None  # why it must not be relaunched (None: go)
    failure: str | None = None  # Admin could not answer what a safe decision needs
    target: ExecutionRef | None = None  # what is relaunched (the top parent, a dead relaunch)
    phase: str | None = None
    parent: ParentNode | None = None
    bug: str = ""  # whether the task it re-runs still carries the bug (what can be known)
    cache: str = ""  # what overwrite_cache will recompute
    chain: tuple[str, ...] = ()  # earlier relaunches that ended silently green too
    existing_state: str = ""  # the existing relaunch's phase and re-check
    request: dict[str, object] | None = None  # the exact request, as data
    create: Any = None  # the CreateExecution request (--to-version), sent as built
    found: Checkpoint | None = None  # the checkpoint the re-check found, as data
    lost: Any = None  # --only-lost: the chain of re-runs (`only_lost.LostChain`)
    recovered: tuple[ExecutionRef, ...] = ()  # RECOVERED copies of it: never the repair

    def details(self) -> dict[str, object]:
        """The plan as data (-o json, the audit log): the prose a person reads (`bug`, `cache`,
        `checkpoint`, `existing`) and the same facts as fields a script can test
        (docs/report.md, `relaunch -o json`)."""
        ck = self.found
        return {
            "verdict": self.verdict,
            "phase": self.phase,
            "parent": self.parent.as_dict() if self.parent else None,
            "target": self.target.as_dict() if self.target else None,
            "chain": list(self.chain),
            "existing": self.existing_state or None,
            "existing_execution": self.existing.as_dict() if self.existing else None,
            "refusal": self.refusal,
            "bug": self.bug,
            "bug_status": bug_status(self.bug),
            "cache": self.cache,
            "overwrite_cache": _overwrite_cache(self.request),
            "checkpoint": self.checkpoint,
            "checkpoint_uri": ck.uri if ck else None,
            "checkpoint_state": ck.state if ck else None,
            "checkpoint_objects": ck.objects if ck else None,
            "checkpoint_latest": rfc3339(ck.latest) if ck else None,
            "checkpoint_written_after_signal": ck.written_after_signal if ck else None,
        } | self._additions()

    def _additions(self) -> dict[str, object]:
        """Fields present only when they say something (--only-lost, a RECOVERED copy), so a
        plan without them reads as it always did."""
        out: dict[str, object] = {}
        if self.lost is not None:
            out["only_lost"] = self.lost.as_dict()
        if self.recovered:
            out["recovered_as"] = [r.as_dict() for r in self.recovered]
        return out

    def lines(self) -> list[str]:
        """The plan for a person: one line per fact (confirmation prompt, --dry-run)."""
        out = [f"verdict: {self.verdict}" + (f"; {self.checkpoint}" if self.checkpoint else "")]
        if self.phase:
            out.append(f"phase: {self.phase}")
        if self.parent:
            out.append(f"parent: {self.parent.execution} node {self.parent.node_id}")
        out += [f"died silently green too: {c}" for c in self.chain]
        if self.existing is not None:
            out.append(f"existing relaunch: {self.existing} ({self.existing_state})")
        if self.target and self.target != self.execution:
            out.append(f"relaunches: {self.target}")
        if self.bug:
            out.append(f"bug: {self.bug}")
        if self.cache:
            out.append(f"cache: {self.cache}")
        out += [recovered_note(r) for r in self.recovered]
        if self.lost is not None:
            out += self.lost.lines()
        return out


def _overwrite_cache(request: dict[str, object] | None) -> bool | None:
    """The request's overwrite_cache: top level (RelaunchExecution) or in `spec` (Create)."""
    if not request:
        return None
    spec = request.get("spec")
    value = request.get(
        "overwrite_cache", spec.get("overwrite_cache") if isinstance(spec, dict) else None
    )
    return bool(value) if value is not None else None


def bug_status(bug: str) -> str | None:
    """`bug` as one word: `yes` (the same task version re-runs), `likely` (same image and
    flytekit), `unknown`, `no-lying-attempt`; null when not assessed. The worst part wins."""
    if not bug:
        return None
    if bug.startswith("nothing to compare"):
        return "no-lying-attempt"
    parts = [p.strip() for p in bug.split(";")]
    if any(p.startswith("YES") for p in parts):
        return "yes"
    if any(p.startswith("LIKELY") for p in parts):
        return "likely"
    return "unknown"


@dataclass(frozen=True)
class RelaunchOutcome:
    """The result for one execution (docs/report.md, `relaunch -o json`)."""

    execution: ExecutionRef
    status: str
    relaunched_as: ExecutionRef | None
    reason: str
    request: dict[str, object] | None = None
    after_retry: bool = False  # Admin's first answer was lost; the retry found the execution
    plan: dict[str, object] | None = None
    console_url: str | None = None  # the new (or existing) execution in the Flyte console

    def as_dict(self) -> dict[str, object]:
        return {
            "execution": self.execution.as_dict(),
            "status": self.status,
            "relaunched_as": self.relaunched_as.as_dict() if self.relaunched_as else None,
            "console_url": self.console_url,
            "reason": self.reason,
            "plan": self.plan,
        }


def default_audit_log(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("ELASTIC_AUDIT_AUDIT_LOG"):  # set by `demo --keep-running`: the sandbox's own log
        return Path(env["ELASTIC_AUDIT_AUDIT_LOG"])
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "elastic-audit" / "audit.jsonl"


class AuditLog:
    """Append-only JSON lines; one `write(2)` per record under an exclusive lock, so concurrent
    operators never interleave or truncate each other's lines."""

    def __init__(self, path: Path | str, *, make_parents: bool = False) -> None:
        self.path = Path(path)
        # Only the default log's directory is created: a named one that does not exist is a
        # typo, and writing there would split the audit trail in two.
        self.make_parents = make_parents
        self._fd: int | None = None

    @classmethod
    def default(cls, env: dict[str, str] | None = None) -> AuditLog:
        """`default_audit_log()`; its directory is created unless a variable named the file."""
        env = dict(os.environ) if env is None else env
        return cls(default_audit_log(env), make_parents=not env.get("ELASTIC_AUDIT_AUDIT_LOG"))

    def open(self) -> AuditLog:
        """Open (creating it, and the default log's directory) and lock the log once, before
        anything is sent: a log that cannot be written — a directory that does not exist
        included — is a configuration error (exit 2) with nothing done, never a traceback after
        a relaunch Admin has already performed (docs/commands.md, relaunch)."""
        from forensics.errors import ConfigError
        from forensics.params import ParamConfigError

        if not self.make_parents and not self.path.parent.is_dir():
            raise ParamConfigError(
                f"audit log {self.path}: directory {self.path.parent} does not exist; nothing "
                "relaunched (create it, or choose another with ",
                Param("audit_log"),
                " FILE or ELASTIC_AUDIT_AUDIT_LOG)",
            )
        try:
            if self.make_parents:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        except OSError as e:
            raise ParamConfigError(
                f"audit log {self.path}: cannot write ({e.strerror}); nothing relaunched "
                "(choose another with ",
                Param("audit_log"),
                " FILE or ELASTIC_AUDIT_AUDIT_LOG)",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # another operator's write finishes first
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as e:
            os.close(fd)
            raise ConfigError(
                f"audit log {self.path}: cannot lock ({e.strerror}); nothing relaunched"
            ) from None
        self._fd = fd
        return self

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> AuditLog:
        return self.open() if self._fd is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(self, outcome: RelaunchOutcome, *, dry_run: bool = False) -> None:
        record = {
            "time": rfc3339(datetime.now(UTC)),
            "user": _user(),
            "host": socket.gethostname(),
            "tool": TOOL,
            "action": outcome.status,
            "original": outcome.execution.as_dict(),
            "new_execution": outcome.relaunched_as.as_dict() if outcome.relaunched_as else None,
            "request": outcome.request,
            "result": outcome.reason,
            "dry_run": dry_run,
            "after_retry": outcome.after_retry,
            "plan": outcome.plan,
        }
        data = (json.dumps(record, sort_keys=True) + "\n").encode()
        opened_here = self._fd is None
        if opened_here:
            self.open()
        fd = self._fd
        assert fd is not None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            if opened_here:
                self.close()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def executions_from_report(path: str) -> list[ExecutionRef]:
    """The executions of a scan report's affected and suspected findings (deduplicated, in
    order), read as the typed report (`report_from_json`). Anything else is a ParamError of one
    line naming the file: unreadable, not JSON, another schema, a finding whose execution is not
    one the command line would accept, or a document that lacks what docs/report.md requires."""
    doc = _report_document(path)
    for i, f in enumerate(doc["findings"]):
        _check_execution(path, i, f)
    try:
        report = report_from_json(doc)
    except (KeyError, TypeError, ValueError) as e:
        why = " ".join(str(e).split())
        raise ParamError(
            Param("from_report"),
            f" {path}: not an elastic-audit scan report: it lacks what docs/report.md requires "
            f"({why})",
        ) from None
    found = (f.attempt.execution for f in report.findings if f.verdict in FINDING_VERDICTS)
    return list(dict.fromkeys(found))


FINDING_VERDICTS = ("affected", "suspected")


def _report_document(path: str) -> dict[str, Any]:
    """The JSON document at `path`, if it is a schema_version 1 report with a findings list."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamError(Param("from_report"), f" {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ParamError(Param("from_report"), f" {path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise ParamError(
            Param("from_report"), f" {path}: not JSON ({e.msg} at line {e.lineno})"
        ) from None
    if (
        not isinstance(doc, dict)
        or doc.get("schema_version") != 1
        or not isinstance(doc.get("findings"), list)
    ):
        raise ParamError(
            Param("from_report"),
            f" {path}: not an elastic-audit scan report (schema_version 1 with findings)",
        )
    return doc


def _check_execution(path: str, i: int, f: Any) -> None:
    """A finding to relaunch names its execution as the command line must (a report is input
    too); findings of other verdicts are not relaunched and not checked."""
    try:
        if f["verdict"] not in FINDING_VERDICTS:
            return
        e = f["execution"]
        parts = [e["project"], e["domain"], e["name"]]
    except (KeyError, TypeError):
        raise ParamError(Param("from_report"), f" {path}: finding {i} has no execution") from None
    if not all(isinstance(p, str) and ":" not in p for p in parts):
        raise ParamError(
            Param("from_report"), f" {path}: finding {i}: execution {parts!r} is not valid"
        )
    try:
        parse_execution(":".join(parts))
    except UsageError as err:
        raise ParamError(Param("from_report"), f" {path}: finding {i}: {err}") from None


@dataclass(frozen=True)
class Options:
    """What the operator asked for."""

    force: bool = False
    parent: bool = False
    to_version: str | None = None
    # None: decided from the graph (only when a lost node or one after it is cacheable)
    overwrite_cache: bool | None = None
    only_lost: bool = False
