"""The one mutating path: re-check, confirm, relaunch exactly once, and audit every action.

Exactly-once rests on the server, not on a local file: every relaunch of execution X is created
under one deterministic name derived from X, so a second call — a rerun, a retry after a lost
response, a second operator — gets Admin's ALREADY_EXISTS and reports the first relaunch.
"""

from __future__ import annotations

import base64
import fcntl
import getpass
import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from forensics import TOOL
from forensics.errors import AlreadyRelaunched, NotFoundError, SourceError, UsageError
from forensics.identifiers import parse_execution
from forensics.model import UTC, ExecutionRef, rfc3339

STATUSES = ("relaunched", "already-relaunched", "dry-run", "refused", "failed")


def relaunch_name(ref: ExecutionRef) -> str:
    """The one name every relaunch of `ref` gets: 20 chars like Flyte's, `^[a-z][a-z0-9]*$`."""
    digest = hashlib.sha256(str(ref).encode()).digest()
    return "r" + base64.b32encode(digest).decode().lower().rstrip("=")[:19]


def relaunch_request(ref: ExecutionRef) -> dict[str, object]:
    """The exact ExecutionRelaunchRequest sent (as data, for --dry-run and the audit log)."""
    return {"id": ref.as_dict(), "name": relaunch_name(ref), "overwrite_cache": True}


@dataclass(frozen=True)
class Plan:
    """What a relaunch of one execution would do, after the live re-check."""

    execution: ExecutionRef
    verdict: str  # from the re-check: affected / suspected / not-affected / not-examined / ...
    checkpoint: str  # what the relaunch will find in the checkpoint location
    existing: ExecutionRef | None  # a relaunch that exists already
    refusal: str | None  # why it must not be relaunched (None: go)
    failure: str | None = None  # Admin could not answer what a safe decision needs


@dataclass(frozen=True)
class Outcome:
    """The result for one execution (SPEC §3.3 -o json)."""

    execution: ExecutionRef
    status: str
    relaunched_as: ExecutionRef | None
    reason: str
    request: dict[str, object] | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "execution": self.execution.as_dict(),
            "status": self.status,
            "relaunched_as": self.relaunched_as.as_dict() if self.relaunched_as else None,
            "reason": self.reason,
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

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, outcome: Outcome, *, dry_run: bool = False) -> None:
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
        }
        data = (json.dumps(record, sort_keys=True) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def executions_from_report(path: str) -> list[ExecutionRef]:
    """The executions of a scan report's affected and suspected findings (deduplicated, in order)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--from-report {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--from-report {path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--from-report {path}: not JSON ({e.msg} at line {e.lineno})") from None
    if (
        not isinstance(doc, dict)
        or doc.get("schema_version") != 1
        or not isinstance(doc.get("findings"), list)
    ):
        raise UsageError(
            f"--from-report {path}: not an elastic-audit scan report (schema_version 1 with findings)"
        )
    refs: list[ExecutionRef] = []
    for i, f in enumerate(doc["findings"]):
        try:
            if f["verdict"] not in ("affected", "suspected"):
                continue
            e = f["execution"]
            parts = [e["project"], e["domain"], e["name"]]
        except (KeyError, TypeError):
            raise UsageError(f"--from-report {path}: finding {i} has no execution") from None
        if not all(isinstance(p, str) and ":" not in p for p in parts):
            raise UsageError(f"--from-report {path}: finding {i}: execution {parts!r} is not valid")
        try:
            # The same rules as an execution typed on the command line: a report is input too.
            ref = parse_execution(":".join(parts))
        except UsageError as err:
            raise UsageError(f"--from-report {path}: finding {i}: {err}") from None
        if ref not in refs:
            refs.append(ref)
    return refs


RELAUNCHABLE = ("affected", "suspected")


class Relauncher:
    """Re-checks, plans and performs relaunches through an AdminClient, auditing each action."""

    def __init__(self, admin, recheck: Callable[[ExecutionRef], tuple[str, str]], audit: AuditLog):  # noqa: ANN001
        self.admin = admin
        self.recheck = recheck  # ref -> (verdict, checkpoint description); raises NotFoundError
        self.audit = audit

    def plan(self, ref: ExecutionRef, *, force: bool) -> Plan:
        try:
            verdict, checkpoint = self.recheck(ref)
        except NotFoundError:
            return Plan(ref, "not-found", "", None, "execution not found in Flyte Admin")
        except SourceError as e:
            return Plan(ref, "unknown", "", None, None, f"re-check failed: {e}; nothing relaunched")
        try:
            existing = self._existing(ref)
        except SourceError as e:
            # The deterministic name only guards relaunches made by this tool; one made in the
            # console under another name is found by listing, and without that answer a
            # relaunch could be the second execution.
            return Plan(
                ref,
                verdict,
                checkpoint,
                None,
                None,
                f"could not check for an existing relaunch: {e}; nothing relaunched",
            )
        refusal = None
        if verdict not in RELAUNCHABLE and not force:
            refusal = f"re-check says {verdict}: not affected or suspected, so not relaunched (--force overrides)"
        return Plan(ref, verdict, checkpoint, existing, refusal)

    def _existing(self, ref: ExecutionRef) -> ExecutionRef | None:
        mine = ExecutionRef(ref.project, ref.domain, relaunch_name(ref))
        try:
            self.admin.get_execution(mine)
            return mine
        except NotFoundError:
            pass
        ex = self.admin.get_execution(ref)
        if ex.created_at is None:
            return None
        return self.admin.relaunches_of(ref.project, ref.domain, ex.created_at).get(ref)

    def execute(self, plan: Plan, *, dry_run: bool) -> Outcome:
        ref = plan.execution
        request = relaunch_request(ref)
        audited = False
        try:
            if plan.failure:
                out = Outcome(ref, "failed", None, plan.failure, request)
            elif plan.refusal:
                out = Outcome(ref, "refused", None, plan.refusal, request)
            elif plan.existing is not None:
                out = Outcome(
                    ref,
                    "already-relaunched",
                    plan.existing,
                    f"already relaunched as {plan.existing}",
                    request,
                )
            elif dry_run:
                out = Outcome(
                    ref,
                    "dry-run",
                    None,
                    f"would relaunch ({plan.verdict}); {plan.checkpoint}",
                    request,
                )
            else:
                out = self._relaunch(ref, plan, request)
            self.audit.append(out, dry_run=dry_run)
            audited = True
            return out
        except KeyboardInterrupt:
            if not audited:
                # Whether Admin performed it is unknown; a rerun is safe (same name).
                self.audit.append(
                    Outcome(ref, "failed", None, "interrupted; rerun to confirm", request),
                    dry_run=dry_run,
                )
            raise

    def _relaunch(self, ref: ExecutionRef, plan: Plan, request: dict[str, object]) -> Outcome:
        try:
            new = self.admin.relaunch(ref, name=relaunch_name(ref), overwrite_cache=True)
        except AlreadyRelaunched as e:
            return Outcome(
                ref,
                "already-relaunched",
                e.existing,
                f"already relaunched as {e.existing}",
                request,
            )
        except SourceError as e:
            return Outcome(ref, "failed", None, f"Flyte Admin: {e.cause}", request)
        return Outcome(
            ref, "relaunched", new, f"relaunched ({plan.verdict}); {plan.checkpoint}", request
        )


def exit_code(outcomes: Iterable[Outcome]) -> int:
    statuses = {o.status for o in outcomes}
    if "failed" in statuses:
        return 3
    if "refused" in statuses:
        return 1
    return 0
