"""The relauncher's two uses of the graph: `--only-lost` (plan the chain, start what can start
now, each re-run exactly once) and a whole relaunch's `overwrite_cache` choice
(docs/commands.md, "relaunch --only-lost" and "What overwrite_cache recomputes")."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forensics.errors import AlreadyRelaunched, SourceError
from forensics.model import ExecutionRecord, ExecutionRef
from forensics.relaunch import RelaunchOutcome, RelaunchPlan
from forensics.relaunch.only_lost import (
    LostChain,
    NodeStep,
    chain_of,
    plan_chain,
    refusal_for,
    whole_command,
)

if TYPE_CHECKING:
    from forensics.relaunch.recheck import Recheck
    from forensics.sources.interfaces import RelaunchAdmin


def plan_lost(
    admin: RelaunchAdmin,
    recheck: Callable[[ExecutionRef], Recheck],
    ex: ExecutionRecord,
    check: Recheck,
) -> tuple[LostChain | None, str | None, str | None]:
    """(the chain, why --only-lost refuses this execution, what Admin could not answer)."""
    ref = ex.ref
    whole = f"; relaunch it whole instead: {whole_command(ref)}"
    if not check.lost:
        return None, "--only-lost: the re-check names no lost node" + whole, None
    if ex.workflow is None:
        return None, "--only-lost: Admin names no workflow for it" + whole, None
    try:
        graph = admin.workflow_graph(ex.workflow)
        attempts = admin.list_attempts(ref)
        nodes, reasons = refusal_for(graph, check.lost, attempts)
        if reasons:
            why = "--only-lost cannot replay it faithfully: " + "; ".join(reasons)
            return None, why + whole, None
        ck = check.found.uri if check.found is not None else None
        return plan_chain(admin, recheck, ref, graph, nodes, attempts, ck), None, None
    except SourceError as e:
        return None, None, f"--only-lost: {e}; nothing re-run"


def cache_choice(
    admin: RelaunchAdmin, check: Recheck, top: ExecutionRecord, asked: bool | None
) -> tuple[bool, str]:
    """Whether a whole relaunch sends `overwrite_cache`, and why (empty: as asked, or the
    graph could not say and overwriting is the safe side).

    Only a lost node's task or a node after it being cacheable needs it: its cached entry may
    be a false success, or a result computed from one. Otherwise the cached finished nodes
    before the loss are reused."""
    if asked is not None or top.workflow is None or not check.lost:
        return (True if asked is None else asked), ""
    if check.execution.ref != top.ref:
        return True, ""  # --parent: the lost node lives in a child's graph
    try:
        graph = admin.workflow_graph(top.workflow)
    except SourceError:
        return True, ""
    lost = [a.ref.node_id for a in check.lost]
    if any(a.parent_node or a.array_node for a in check.lost) or any(
        graph.node(n) is None for n in lost
    ):
        return True, (
            "overwrite_cache, because a lost attempt runs inside another node: which cached "
            "nodes follow it cannot be read"
        )

    def cacheable(node_id: str) -> bool:
        n = graph.node(node_id)
        t = graph.tasks.get(n.task) if n is not None and n.task else None
        return bool(t and t.cacheable)

    members = chain_of(graph, list(dict.fromkeys(lost)))
    hot = [n for n in members if cacheable(n)]
    if hot:
        return True, (
            f"overwrite_cache, because {', '.join(hot)} (the lost node or one after it) "
            "is cacheable: a cached false success, or a result computed after the loss, must "
            "not be served again"
        )
    reused = [n.node_id for n in graph.nodes if n.node_id not in members and cacheable(n.node_id)]
    return False, (
        "no overwrite_cache, because neither the lost node(s) nor any node after them is "
        "cacheable"
        + (
            f": the finished node(s) {', '.join(reused)} are served from the cache"
            if reused
            else ""
        )
    )


def reruns_started(admin: RelaunchAdmin, check: Recheck) -> list[str]:
    """The --only-lost re-runs of the lost nodes that exist already (a whole relaunch beside
    them would run the lost node a second time), as `node as name (phase)`."""
    from forensics.errors import NotFoundError
    from forensics.relaunch.only_lost import rerun_name

    ref = check.execution.ref
    found = []
    for node in dict.fromkeys(a.ref.node_id for a in check.lost if a.parent_node is None):
        new = ExecutionRef(ref.project, ref.domain, rerun_name(ref, node))
        try:
            rec = admin.get_execution(new)
        except NotFoundError:
            continue
        found.append(f"{node} as {new.name} ({rec.phase})")
    return found


def advance(
    admin: RelaunchAdmin, plan: RelaunchPlan, details: dict[str, object], *, dry_run: bool
) -> RelaunchOutcome:
    """Start each node of the chain that can start now (exactly once: ALREADY_EXISTS is the
    lock), and say where every node stands."""
    chain: LostChain = plan.lost
    ref = plan.execution
    requests = [s.request.data for s in chain.to_start if s.request is not None]
    request: dict[str, object] = {"only_lost": requests}
    first = next((s for s in chain.steps if s.role == "lost"), None)
    relaunched_as = first.execution if first is not None else None
    failed = chain.failed
    if failed is not None:
        return RelaunchOutcome(
            ref,
            "failed",
            relaunched_as,
            f"node {failed.node_id}: {failed.detail}; " + _where(chain.steps),
            request,
            plan=details,
        )
    if dry_run:
        start = [s for s in chain.steps if s.state == "to-start"]
        rest = [s for s in chain.steps if s.state != "to-start"]
        what = ", ".join(f"{s.node_id} as {s.execution.name}" for s in start) or "nothing now"
        reason = f"would start {what}" + (f"; then: {_where(rest)}" if rest else "")
        return RelaunchOutcome(ref, "dry-run", None, reason, request, plan=details)
    steps, started, after_retry = list(chain.steps), False, False
    for i, step in enumerate(steps):
        if step.state != "to-start" or step.request is None:
            continue
        try:
            admin.rerun(step.request)
            steps[i] = _now(step, "started", "")
            started = True
        except AlreadyRelaunched as e:
            if e.after_retry:  # our first attempt reached Admin; only its answer was lost
                steps[i] = _now(
                    step, "started", "Admin's first answer was lost, the retry found it"
                )
                started = after_retry = True
            else:
                steps[i] = _now(step, "running", "started by another command meanwhile")
        except SourceError as e:
            return RelaunchOutcome(
                ref,
                "failed",
                relaunched_as if started else None,
                f"Flyte Admin: {e.cause}; " + _where(steps),
                request,
                plan=details,
            )
    again = "; run the command again to advance the chain"
    if started:
        status, reason = "relaunched", "re-ran " + _where(steps) + again
    elif all(s.state == "succeeded" for s in steps):
        status, reason = "already-relaunched", "every re-run succeeded: " + _where(steps)
    else:
        status, reason = "already-relaunched", "in progress: " + _where(steps) + again
    exists = relaunched_as is not None and any(
        s.execution == relaunched_as and s.state not in ("to-start", "not-started") for s in steps
    )
    return RelaunchOutcome(
        ref,
        status,
        relaunched_as if exists else None,
        reason,
        request,
        after_retry=after_retry,
        plan=details,
    )


def _now(step: NodeStep, state: str, detail: str) -> NodeStep:
    from dataclasses import replace

    return replace(step, state=state, detail=detail)


def _where(steps: list[NodeStep] | tuple[NodeStep, ...]) -> str:
    return "; ".join(f"{s.node_id} {s.state} as {s.execution.name}" for s in steps)
