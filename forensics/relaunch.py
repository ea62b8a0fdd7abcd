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
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics import TOOL
from forensics.detect import Verdict
from forensics.errors import AlreadyRelaunched, NotFoundError, SourceError, UsageError
from forensics.identifiers import parse_execution
from forensics.model import UTC, ExecutionRecord, ExecutionRef, ParentNode, rfc3339

if TYPE_CHECKING:  # flytekit is heavy; only the client module imports it
    from forensics.model import Checkpoint
    from forensics.scan.examine import Examination, Examined
    from forensics.sources import Sources
    from forensics.sources.admin import AdminClient, TaskFacts, WorkflowFacts

STATUSES = ("relaunched", "already-relaunched", "dry-run", "refused", "failed")


def relaunch_name(ref: ExecutionRef) -> str:
    """The one name every relaunch of `ref` gets: 20 chars like Flyte's, `^[a-z][a-z0-9]*$`."""
    digest = hashlib.sha256(str(ref).encode()).digest()
    return "r" + base64.b32encode(digest).decode().lower().rstrip("=")[:19]


def relaunch_request(ref: ExecutionRef, *, overwrite_cache: bool = True) -> dict[str, object]:
    """The exact ExecutionRelaunchRequest sent (as data, for --dry-run and the audit log)."""
    return {"id": ref.as_dict(), "name": relaunch_name(ref), "overwrite_cache": overwrite_cache}


@dataclass(frozen=True)
class Recheck:
    """The scan's verdict on one execution, as a relaunch decision needs it."""

    verdict: str  # affected / suspected / not-affected / not-examined / inconclusive (...)
    checkpoint: str  # what a relaunch will find in the checkpoint location
    execution: ExecutionRecord
    tasks: tuple[tuple[str, str, str, str], ...] = ()  # tasks of the attempts found lying


@dataclass(frozen=True)
class Plan:
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

    def details(self) -> dict[str, object]:
        """The plan as data (-o json, the audit log)."""
        return {
            "verdict": self.verdict,
            "phase": self.phase,
            "parent": self.parent.as_dict() if self.parent else None,
            "target": self.target.as_dict() if self.target else None,
            "chain": list(self.chain),
            "existing": self.existing_state or None,
            "bug": self.bug,
            "cache": self.cache,
            "checkpoint": self.checkpoint,
        }

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
        return out


@dataclass(frozen=True)
class Outcome:
    """The result for one execution (SPEC §3.3 -o json)."""

    execution: ExecutionRef
    status: str
    relaunched_as: ExecutionRef | None
    reason: str
    request: dict[str, object] | None = None
    after_retry: bool = False  # Admin's first answer was lost; the retry found the execution
    plan: dict[str, object] | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "execution": self.execution.as_dict(),
            "status": self.status,
            "relaunched_as": self.relaunched_as.as_dict() if self.relaunched_as else None,
            "reason": self.reason,
            "plan": self.plan,
        }


# flytekitplugins-kfpytorch turns SignalException into IgnoreOutputs in every release from
# 1.10.3 through 1.16.31 (FACTS §13); the plugin moves with flytekit (same release train).
BUGGY_RUNTIMES = ("1.10.3", "1.16.31")


def _runtime_in_buggy_range(runtime: str | None) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(runtime or "")
    except InvalidVersion:
        return False
    return Version(BUGGY_RUNTIMES[0]) <= v <= Version(BUGGY_RUNTIMES[1])


def _task_words(t: TaskFacts) -> str:
    words = [f"image {t.image or '(none in the template)'}", f"flytekit {t.runtime or '?'}"]
    if t.interruptible:
        words.append("interruptible")
    return ", ".join(words)


def assess_bug(
    lying: Iterable[TaskFacts], facts: WorkflowFacts | None, why_unknown: str | None = None
) -> str:
    """Whether the tasks a relaunch re-runs still carry the bug, from their templates.

    `lying` are the templates of the tasks whose attempts died silently green; `facts` is the
    launch plan version the relaunch runs. The same task version is the same code: it carries
    the bug. A new version with the same image and flytekit: likely. A new image: unknown — a
    task template records flytekit's version (`metadata.runtime`) but not the kfpytorch
    plugin's, so whether the image holds the fix cannot be read from Admin.
    """
    lying = list(lying)
    if not lying:
        return "nothing to compare: no attempt was found lying"
    if facts is None:
        return f"unknown: the launch plan's workflow could not be read ({why_unknown})"
    parts = []
    for old in lying:
        name, version = old.id[2], old.id[3]
        same = facts.tasks.get(old.id)
        if same is not None:
            parts.append(
                f"YES - re-runs {name} version {version} itself, the code that died silently "
                f"green ({_task_words(same)})"
            )
            continue
        new = [t for t in facts.tasks.values() if t.id[2] == name]
        if not new:
            parts.append(
                f"unknown - {name} is not in the workflow of launch plan "
                f"{':'.join(facts.launch_plan[2:])} (launched dynamically or by a child "
                "launch plan): its template cannot be read before it runs"
            )
            continue
        t = new[0]
        if t.image == old.image and t.runtime == old.runtime:
            parts.append(
                f"LIKELY - {name} is version {t.id[3]} now, but in the same image and flytekit "
                f"as the run that died ({_task_words(t)})"
            )
        else:
            parts.append(
                f"unknown - {name} version {t.id[3]} runs {_task_words(t)} (was {old.image}, "
                f"flytekit {old.runtime}); a task template does not record the kfpytorch "
                "plugin's version: check the image with `elastic-audit fix check`"
            )
        if _runtime_in_buggy_range(t.runtime):
            parts[-1] += (
                f"; flytekit {t.runtime} is a release with the bug "
                f"({BUGGY_RUNTIMES[0]}-{BUGGY_RUNTIMES[1]}) unless the plugin was patched"
            )
    return "; ".join(parts)


def describe_cache(facts: WorkflowFacts | None, overwrite: bool, why_unknown: str | None) -> str:
    """The cacheable nodes a relaunch recomputes (overwrite_cache) or reuses (opt-out)."""
    if facts is None:
        return f"unknown: the launch plan's workflow could not be read ({why_unknown})"
    nodes = []
    for node_id, task_id in facts.task_nodes:
        t = facts.tasks.get(task_id)
        if t is not None and t.cacheable:
            nodes.append(f"{node_id} ({t.id[2]}, cache version {t.cache_version or '-'})")
    if overwrite:
        text = (
            f"overwrite_cache recomputes {len(nodes)} cacheable node(s) and overwrites their "
            f"shared cache entries: {', '.join(nodes)}"
            if nodes
            else "overwrite_cache costs nothing here: no node of the workflow is cacheable"
        )
        text += " (the silent node itself was never cached: tasks without outputs are not)"
    else:
        text = (
            f"--no-overwrite-cache: {len(nodes)} cacheable node(s) reuse their cached results: "
            f"{', '.join(nodes)}"
            if nodes
            else "--no-overwrite-cache: no node of the workflow is cacheable"
        )
    if facts.launch_plan_nodes:
        text += (
            "; child launch plans of nodes "
            + ", ".join(facts.launch_plan_nodes)
            + " have caches of their own, not read here"
        )
    return text


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
            "after_retry": outcome.after_retry,
            "plan": outcome.plan,
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


def describe_checkpoint(ck: Checkpoint | None) -> str:
    """What a relaunch will find in the checkpoint location, in words."""
    if ck is None:
        return "checkpoint not inspected"
    if ck.state == "present":
        return f"checkpoint has {ck.objects} object(s), newest {ck.latest:%Y-%m-%d %H:%M:%SZ}: training resumes from it"
    if ck.state == "empty":
        return f"checkpoint {ck.uri} is empty: training restarts from scratch"
    return f"checkpoint unknown ({ck.reason}): check it before relying on a resume"


def recheck_of(exam: Examination) -> Recheck:
    """One verdict for an execution from the scan's verdicts on all of its attempts.

    A relaunch must rest on evidence: an attempt whose outputs.pb could not be read proves
    nothing, but it does not mask another attempt that is proven affected or suspected.
    """
    found = [e for e in exam.attempts if e.decision is not None and e.decision.is_finding]
    proven = [e for e in found if e.outputs is not None and e.outputs.state == "missing"]
    proven.sort(key=lambda e: _verdict(e) is not Verdict.AFFECTED)
    ex = exam.execution
    if proven:
        tasks = tuple(dict.fromkeys(e.attempt.task_id for e in proven if e.attempt.task_id))
        first = proven[0]
        return Recheck(str(_verdict(first)), describe_checkpoint(first.checkpoint), ex, tasks)
    pending = [e for e in exam.attempts if _verdict(e) is Verdict.PENDING]
    if pending:
        a = pending[0].attempt.ref
        return Recheck(
            f"pending (attempt {a.node_id}/{a.attempt} was signalled and has not finished: "
            "re-check once it ends)",
            "",
            ex,
        )
    if found:
        reason = found[0].outputs.reason if found[0].outputs else "not checked"
        return Recheck(f"inconclusive (outputs.pb could not be checked: {reason})", "", ex)
    if exam.gaps:
        return Recheck(f"inconclusive ({'; '.join(g.error for g in exam.gaps)})", "", ex)
    if exam.unparsed:
        # SPEC §5: a matched line the parser cannot read is never dropped silently; it may be
        # the signal that makes an attempt a finding.
        return Recheck(
            f"inconclusive ({exam.unparsed} death-signal line(s) matched but could not be read; "
            "see `show`)",
            "",
            ex,
        )
    examined = any(e.decision is not None for e in exam.attempts)
    return Recheck("not-affected" if examined else "not-examined", "", ex)


def _verdict(e: Examined) -> Verdict | None:
    return e.decision.verdict if e.decision is not None else None


RELAUNCHABLE = (str(Verdict.AFFECTED), str(Verdict.SUSPECTED))
MAX_CHAIN = 5  # relaunches of relaunches followed before giving up


@dataclass
class _Chain:
    """Where following a chain of relaunches has got to: what would be relaunched, its top
    execution and re-check, the relaunch that exists already, and the links followed."""

    target: ExecutionRef
    top: ExecutionRecord
    check: Recheck
    existing: ExecutionRef | None
    links: list[str] = field(default_factory=list)
    existing_state: str = ""


@dataclass(frozen=True)
class Options:
    """What the operator asked for."""

    force: bool = False
    parent: bool = False
    to_version: str | None = None
    overwrite_cache: bool = True


class Relauncher:
    """Re-checks, plans and performs relaunches through an AdminClient, auditing each action."""

    def __init__(
        self, admin: AdminClient, recheck: Callable[[ExecutionRef], Recheck], audit: AuditLog
    ) -> None:
        self.admin = admin
        self.recheck = recheck  # ref -> Recheck; raises NotFoundError / SourceError
        self.audit = audit

    @classmethod
    def over(cls, sources: Sources, audit: AuditLog) -> Relauncher:
        """A Relauncher whose re-check is the scan's own evaluation of one execution
        (`scan.examine`: the same rules as `scan`, docs/commands.md "relaunch")."""
        from forensics.scan.examine import examine

        return cls(sources.admin, lambda ref: recheck_of(examine(sources, ref)), audit)

    def plan(self, ref: ExecutionRef, options: Options | None = None, **kw: Any) -> Plan:
        """Everything the operator must know before `ref` is relaunched (SPEC §3.3)."""
        opts = options or Options(**kw)
        try:
            return self._plan(ref, opts)
        except NotFoundError:
            return Plan(ref, "not-found", "", None, "execution not found in Flyte Admin")
        except SourceError as e:
            return Plan(ref, "unknown", "", None, None, f"{e}; nothing relaunched")

    def _plan(self, ref: ExecutionRef, opts: Options) -> Plan:
        # The existing relaunch first: a refusal (re-check inconclusive, running, child) must
        # never hide that the execution was relaunched already (SPEC §3.3).
        try:
            ex = self.admin.get_execution(ref)
            target, top = ref, ex
            if ex.parent is not None and opts.parent:
                target, top = self._top(ex)
        except NotFoundError:
            raise
        except SourceError as e:
            return Plan(ref, "unknown", "", None, None, f"re-check failed: {e}; nothing relaunched")
        try:
            existing = self._existing(target, top)
        except SourceError as e:
            # The deterministic name only guards relaunches made by this tool; one made in the
            # console under another name is found by listing, and without that answer a
            # relaunch could be the second execution.
            return Plan(
                ref,
                "unknown",
                "",
                None,
                None,
                f"could not check for an existing relaunch: {e}; nothing relaunched",
            )
        try:
            check = self.recheck(ref)
        except SourceError as e:
            if existing is not None:
                return Plan(ref, "unknown", "", existing, None, target=target, phase=ex.phase)
            return Plan(ref, "unknown", "", None, None, f"re-check failed: {e}; nothing relaunched")
        followed = self._follow(ref, _Chain(target, top, check, existing))
        if isinstance(followed, Plan):
            return followed
        target, top, check, existing = (
            followed.target,
            followed.top,
            followed.check,
            followed.existing,
        )
        verdict, checkpoint = check.verdict, check.checkpoint
        refusal = self._refusal(ex, top, target, ref, verdict, opts) if existing is None else None
        bug, cache, request, create = "", "", None, None
        if existing is None:
            bug, cache = self._assess(check, top, opts)
            request, create, failure = self._request(target, opts)
            if failure is not None:
                refusal = refusal or failure
        return Plan(
            ref,
            verdict,
            checkpoint,
            existing,
            refusal,
            target=target,
            phase=ex.phase,
            parent=ex.parent,
            bug=bug,
            cache=cache,
            chain=tuple(followed.links),
            existing_state=followed.existing_state,
            # the RelaunchExecution that would be sent; with --to-version only a request that
            # could be built (a refused or already relaunched one has none to show)
            request=request
            if opts.to_version
            else relaunch_request(target, overwrite_cache=opts.overwrite_cache),
            create=create,
        )

    def _follow(self, ref: ExecutionRef, c: _Chain) -> _Chain | Plan:
        """A relaunch that itself ended silently green is no relaunch: follow the chain of
        relaunches to the first that is running or judged fine (a refusal Plan past MAX_CHAIN)."""
        while c.existing is not None:
            try:
                again = self.recheck(c.existing)
            except SourceError as e:
                c.existing_state = f"its fate could not be re-checked: {e}"
                break
            if again.execution.running or again.verdict not in RELAUNCHABLE:
                c.existing_state = f"{again.execution.phase}, re-check {again.verdict}"
                break
            c.links.append(f"{c.existing} ended {again.execution.phase}, re-check {again.verdict}")
            if len(c.links) > MAX_CHAIN:
                return Plan(
                    ref,
                    c.check.verdict,
                    c.check.checkpoint,
                    None,
                    None,
                    f"more than {MAX_CHAIN} relaunches in a row died silently green; "
                    "nothing relaunched",
                    target=c.existing,
                    chain=tuple(c.links),
                )
            c.target, c.top, c.check = c.existing, again.execution, again
            c.existing = self._existing(c.target, c.top)
        return c

    def _refusal(
        self,
        ex: ExecutionRecord,
        top: ExecutionRecord,
        target: ExecutionRef,
        ref: ExecutionRef,
        verdict: str,
        opts: Options,
    ) -> str | None:
        if opts.force:
            return None
        reasons = []
        if verdict not in RELAUNCHABLE:
            reasons.append(f"re-check says {verdict}: not affected or suspected")
        if ex.parent is not None and not opts.parent:
            reasons.append(
                f"a child execution, launched by node {ex.parent.node_id} of "
                f"{ex.parent.execution}: relaunching it alone would not re-run the parent's later "
                "steps (--parent relaunches the top execution)"
            )
        if top.running:
            which = "it is" if target == ref else f"{target} (what would be relaunched) is"
            reasons.append(
                f"{which} still {top.phase}: a second run beside it would share its checkpoint "
                "prefix (the inputs are copied); wait for it to end or abort it"
            )
        if not reasons:
            return None
        return "; ".join(reasons) + " — not relaunched (--force overrides)"

    def _top(self, ex: ExecutionRecord) -> tuple[ExecutionRef, ExecutionRecord]:
        """The execution at the top of a chain of parents (children of children included)."""
        seen = {ex.ref}
        while ex.parent is not None and ex.parent.execution not in seen:
            seen.add(ex.parent.execution)
            ex = self.admin.get_execution(ex.parent.execution)
        return ex.ref, ex

    def _assess(self, check: Recheck, top: ExecutionRecord, opts: Options) -> tuple[str, str]:
        """The bug and cache lines of the plan; what cannot be read is said, never guessed."""
        lying, why = [], None
        for tid in check.tasks:
            try:
                lying.append(self.admin.task_facts(tid))
            except SourceError as e:
                why = str(e)
        lp = top.launch_plan
        facts, error = None, "the execution names no launch plan"
        if lp is not None:
            if opts.to_version:
                lp = (*lp[:3], opts.to_version)
            try:
                facts = self.admin.workflow_facts(lp)
            except SourceError as e:
                error = str(e)
        cache = describe_cache(facts, opts.overwrite_cache, error)
        if check.execution.ref != top.ref and check.execution.launch_plan is not None:
            # --parent: the lying task runs in the child's launch plan, under the parent's node.
            try:
                facts = self.admin.workflow_facts(check.execution.launch_plan)
            except SourceError as e:
                facts, error = None, str(e)
        bug = assess_bug(lying, facts, error)
        if len(lying) < len(check.tasks):
            bug += f"; some templates could not be read ({why})"
        if lp is not None and not opts.to_version and bug.startswith(("YES", "LIKELY")):
            bug += self._newer_versions(lp)
        return bug, cache

    def _newer_versions(self, lp: tuple[str, str, str, str]) -> str:
        """The launch plan's versions registered after the one the relaunch would run."""
        try:
            versions = self.admin.launch_plan_versions(*lp[:3])
        except SourceError as e:
            return f"; newer launch plan versions could not be listed ({e})"
        newer = versions[: versions.index(lp[3])] if lp[3] in versions else []
        if not newer:
            return f"; {lp[2]} has no version newer than {lp[3]}"
        return (
            f"; {lp[2]} has newer versions ({', '.join(newer[:5])}): "
            f"--to-version {newer[0]} relaunches on the newest"
        )

    def _request(
        self, target: ExecutionRef, opts: Options
    ) -> tuple[dict[str, object] | None, Any, str | None]:
        """The exact request (data, and the proto for CreateExecution), or why none can be."""
        if not opts.to_version:
            return relaunch_request(target, overwrite_cache=opts.overwrite_cache), None, None
        try:
            create = self.admin.version_request(
                target,
                version=opts.to_version,
                name=relaunch_name(target),
                overwrite_cache=opts.overwrite_cache,
            )
        except NotFoundError as e:
            return None, None, f"--to-version {opts.to_version}: {e.cause}"
        from google.protobuf import json_format

        data = json_format.MessageToDict(create, preserving_proto_field_name=True)
        return data, create, None

    def _existing(self, ref: ExecutionRef, ex: ExecutionRecord) -> ExecutionRef | None:
        mine = ExecutionRef(ref.project, ref.domain, relaunch_name(ref))
        try:
            self.admin.get_execution(mine)
            return mine
        except NotFoundError:
            pass
        if ex.created_at is None:
            return None
        return self.admin.relaunches_of(ref.project, ref.domain, ex.created_at).get(ref)

    def execute(self, plan: Plan, *, dry_run: bool) -> Outcome:
        ref = plan.execution
        request = plan.request
        details = plan.details()
        audited = False
        try:
            if plan.failure:
                out = Outcome(ref, "failed", None, plan.failure, request, plan=details)
            elif plan.existing is not None:
                out = Outcome(
                    ref,
                    "already-relaunched",
                    plan.existing,
                    f"already relaunched as {plan.existing}"
                    + (f" ({plan.existing_state})" if plan.existing_state else ""),
                    request,
                    plan=details,
                )
            elif plan.refusal:
                out = Outcome(ref, "refused", None, plan.refusal, request, plan=details)
            elif dry_run:
                out = Outcome(
                    ref,
                    "dry-run",
                    None,
                    f"would relaunch {self._what(plan)} ({plan.verdict}); {plan.checkpoint}",
                    request,
                    plan=details,
                )
            else:
                out = self._relaunch(plan, request, details)
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

    @staticmethod
    def _what(plan: Plan) -> str:
        target = plan.target or plan.execution
        what = "it" if target == plan.execution else str(target)
        if plan.chain:
            what += ", a relaunch that died silently green too"
        if plan.create is not None:
            lp = plan.create.spec.launch_plan
            what += f" at launch plan {lp.name} version {lp.version}"
        return what

    def _relaunch(
        self, plan: Plan, request: dict[str, object] | None, details: dict[str, object]
    ) -> Outcome:
        ref = plan.execution
        target = plan.target or ref
        try:
            if plan.create is not None:
                new = self.admin.create_relaunch(target, plan.create)
            else:
                new = self.admin.relaunch(
                    target,
                    name=relaunch_name(target),
                    overwrite_cache=bool((request or {}).get("overwrite_cache", True)),
                )
        except AlreadyRelaunched as e:
            if e.after_retry:
                # The plan found no relaunch, this call's first attempt reached Admin and only
                # its answer was lost: the execution under our name is this call's own work.
                return Outcome(
                    ref,
                    "relaunched",
                    e.existing,
                    f"relaunched {self._what(plan)} ({plan.verdict}); Admin's first answer was "
                    f"lost, the retry found {e.existing}; {plan.checkpoint}",
                    request,
                    after_retry=True,
                    plan=details,
                )
            return Outcome(
                ref,
                "already-relaunched",
                e.existing,
                f"already relaunched as {e.existing}",
                request,
                plan=details,
            )
        except SourceError as e:
            return Outcome(ref, "failed", None, f"Flyte Admin: {e.cause}", request, plan=details)
        return Outcome(
            ref,
            "relaunched",
            new,
            f"relaunched {self._what(plan)} ({plan.verdict}); {plan.checkpoint}",
            request,
            plan=details,
        )


def exit_code(outcomes: Iterable[Outcome]) -> int:
    statuses = {o.status for o in outcomes}
    if "failed" in statuses:
        return 3
    if "refused" in statuses:
        return 1
    return 0
