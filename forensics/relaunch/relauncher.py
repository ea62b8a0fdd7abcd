"""Plan and perform relaunches: the existing relaunch first, the re-check, the refusals, the
exact request, then exactly one RelaunchExecution (or CreateExecution), each action audited."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.errors import AlreadyRelaunched, NotFoundError, SourceError
from forensics.model import ExecutionRecord, ExecutionRef
from forensics.relaunch import (
    AuditLog,
    Options,
    RelaunchOutcome,
    RelaunchPlan,
    relaunch_name,
    relaunch_request,
)
from forensics.relaunch.assess import assess_bug, describe_cache
from forensics.relaunch.lost_run import advance, cache_choice, plan_lost, reruns_started
from forensics.relaunch.recheck import RELAUNCHABLE, Recheck, recheck_of

if TYPE_CHECKING:
    from forensics.sources import Sources
    from forensics.sources.admin_types import VersionRequest
    from forensics.sources.interfaces import RelaunchAdmin

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


def _with_why(why: str, described: str) -> str:
    """The cache line when the graph chose: why, then the cacheable nodes the template lists
    (when it could be read; else `why` names them)."""
    if described.startswith("--no-overwrite-cache: "):
        return (
            f"{why.split(': the finished')[0]}; {described.removeprefix('--no-overwrite-cache: ')}"
        )
    if described.startswith("unknown"):
        return why
    return f"{why}; {described}"


class Relauncher:
    """Re-checks, plans and performs relaunches through Flyte Admin, auditing each action."""

    def __init__(
        self, admin: RelaunchAdmin, recheck: Callable[[ExecutionRef], Recheck], audit: AuditLog
    ) -> None:
        self.admin = admin
        self.recheck = recheck  # ref -> Recheck; raises NotFoundError / SourceError
        self.audit = audit
        self.sources: Sources | None = None  # `over`'s: each plan and relaunch checks it is open

    @classmethod
    def over(cls, sources: Sources, audit: AuditLog | Path | str) -> Relauncher:
        """A Relauncher whose re-check is the scan's own evaluation of one execution
        (`scan.examine`: the same rules as `scan`, docs/commands.md "relaunch"); `audit` an
        AuditLog or its file's path. Once `sources` are closed, `plan` and `execute` raise
        SourcesClosed."""
        from forensics.scan.examine import examine

        log = audit if isinstance(audit, AuditLog) else AuditLog(Path(audit))
        relauncher = cls(sources.admin, lambda ref: recheck_of(examine(sources, ref)), log)
        relauncher.sources = sources
        return relauncher

    def plan(
        self, ref: ExecutionRef | str, options: Options | None = None, **kw: Any
    ) -> RelaunchPlan:
        """Everything the operator must know before `ref` is relaunched (docs/commands.md,
        "relaunch"); `ref` an ExecutionRef or a form the CLI takes (`project:domain:name`)."""
        from forensics.arguments import execution_of

        ref = execution_of(ref, param="ref")
        if self.sources is not None:
            self.sources.check_open()
        opts = options or Options(**kw)
        try:
            return self._plan(ref, opts)
        except NotFoundError:
            return RelaunchPlan(ref, "not-found", "", None, "execution not found in Flyte Admin")
        except SourceError as e:
            return RelaunchPlan(ref, "unknown", "", None, None, f"{e}; nothing relaunched")

    def _plan(self, ref: ExecutionRef, opts: Options) -> RelaunchPlan:
        # The existing relaunch first: a refusal (re-check inconclusive, running, child) must
        # never hide that the execution was relaunched already (docs/commands.md, "relaunch").
        try:
            ex = self.admin.get_execution(ref)
            target, top = ref, ex
            if ex.parent is not None and opts.parent:
                target, top = self._top(ex)
        except NotFoundError:
            raise
        except SourceError as e:
            return RelaunchPlan(
                ref, "unknown", "", None, None, f"re-check failed: {e}; nothing relaunched"
            )
        try:
            existing = self._existing(target, top)
        except SourceError as e:
            # The deterministic name only guards relaunches made by this tool; one made in the
            # console under another name is found by listing, and without that answer a
            # relaunch could be the second execution.
            return RelaunchPlan(
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
                return RelaunchPlan(
                    ref, "unknown", "", existing, None, target=target, phase=ex.phase
                )
            return RelaunchPlan(
                ref, "unknown", "", None, None, f"re-check failed: {e}; nothing relaunched"
            )
        followed = self._follow(ref, _Chain(target, top, check, existing))
        if isinstance(followed, RelaunchPlan):
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
        overwrite = True if opts.overwrite_cache is None else opts.overwrite_cache
        lost = failure = None
        if existing is None:
            overwrite, why = cache_choice(self.admin, check, top, opts.overwrite_cache)
            opts = replace(opts, overwrite_cache=overwrite)
            bug, cache = self._assess(check, top, opts)
            if why:
                cache = _with_why(why, cache)
            if opts.only_lost:
                lost, why_not, failure = plan_lost(self.admin, self.recheck, ex, check)
                refusal = "; ".join(r for r in (refusal, why_not) if r) or None
                cache = lost.cache if lost is not None else ""  # no whole relaunch is sent
            else:
                request, create, failure = self._request(target, opts)
                if failure is not None:
                    refusal = refusal or failure
                    failure = None
                beside = None if opts.force else self._beside_reruns(check)
                refusal = "; ".join(r for r in (refusal, beside) if r) or None
        return RelaunchPlan(
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
            if opts.to_version or opts.only_lost
            else relaunch_request(target, overwrite_cache=overwrite),
            create=create,
            found=check.found,
            failure=failure,
            lost=lost,
            recovered=self._recovered(ref, ex),
        )

    def _follow(self, ref: ExecutionRef, c: _Chain) -> _Chain | RelaunchPlan:
        """A relaunch that itself ended silently green is no relaunch: follow the chain of
        relaunches to the first that is running or judged fine (a refusal plan past MAX_CHAIN)."""
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
                return RelaunchPlan(
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

    def _beside_reruns(self, check: Recheck) -> str | None:
        """Why a whole relaunch must wait: --only-lost re-runs of its lost nodes exist."""
        started = reruns_started(self.admin, check)
        if not started:
            return None
        return (
            "--only-lost re-runs it already: " + ", ".join(started) + "; a whole relaunch would "
            "run the lost node a second time (rerun with --only-lost to follow them; --force "
            "overrides)"
        )

    def _recovered(self, ref: ExecutionRef, ex: ExecutionRecord) -> tuple[ExecutionRef, ...]:
        """The RECOVERED executions of `ref`: said in the plan, never the repair, never a
        reason to refuse (an unanswered listing only leaves them unsaid)."""
        if ex.created_at is None:
            return ()
        try:
            found = self.admin.reruns_of(ref.project, ref.domain, ex.created_at)
        except SourceError:
            return ()
        return found.recoveries.get(ref, ())

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
    ) -> tuple[dict[str, object] | None, VersionRequest | None, str | None]:
        """The exact request (data, and CreateExecution's request), or why none can be."""
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
        return create.data, create, None

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

    def execute(self, plan: RelaunchPlan, *, dry_run: bool) -> RelaunchOutcome:
        if self.sources is not None:
            self.sources.check_open()
        ref = plan.execution
        request = plan.request
        details = plan.details()
        audited = False
        try:
            if plan.failure:
                out = RelaunchOutcome(ref, "failed", None, plan.failure, request, plan=details)
            elif plan.existing is not None:
                out = RelaunchOutcome(
                    ref,
                    "already-relaunched",
                    plan.existing,
                    f"already relaunched as {plan.existing}"
                    + (f" ({plan.existing_state})" if plan.existing_state else ""),
                    request,
                    plan=details,
                )
            elif plan.refusal:
                out = RelaunchOutcome(ref, "refused", None, plan.refusal, request, plan=details)
            elif plan.lost is not None:
                out = advance(self.admin, plan, details, dry_run=dry_run)
            elif dry_run:
                out = RelaunchOutcome(
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
                    RelaunchOutcome(ref, "failed", None, "interrupted; rerun to confirm", request),
                    dry_run=dry_run,
                )
            raise

    @staticmethod
    def _what(plan: RelaunchPlan) -> str:
        target = plan.target or plan.execution
        what = "it" if target == plan.execution else str(target)
        if plan.chain:
            what += ", a relaunch that died silently green too"
        if plan.create is not None:
            _, _, lp_name, lp_version = plan.create.launch_plan
            what += f" at launch plan {lp_name} version {lp_version}"
        return what

    def _relaunch(
        self, plan: RelaunchPlan, request: dict[str, object] | None, details: dict[str, object]
    ) -> RelaunchOutcome:
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
                return RelaunchOutcome(
                    ref,
                    "relaunched",
                    e.existing,
                    f"relaunched {self._what(plan)} ({plan.verdict}); Admin's first answer was "
                    f"lost, the retry found {e.existing}; {plan.checkpoint}",
                    request,
                    after_retry=True,
                    plan=details,
                )
            return RelaunchOutcome(
                ref,
                "already-relaunched",
                e.existing,
                f"already relaunched as {e.existing}",
                request,
                plan=details,
            )
        except SourceError as e:
            return RelaunchOutcome(
                ref, "failed", None, f"Flyte Admin: {e.cause}", request, plan=details
            )
        return RelaunchOutcome(
            ref,
            "relaunched",
            new,
            f"relaunched {self._what(plan)} ({plan.verdict}); {plan.checkpoint}",
            request,
            plan=details,
        )
