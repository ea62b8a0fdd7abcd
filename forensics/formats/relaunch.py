"""What `relaunch` did, or would do, per execution: a table or JSON, and its plan on stderr."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from forensics.formats import OutputFormat, Renderers
from forensics.formats.blocks import render_fitted
from forensics.formats.table import Column
from forensics.relaunch import RelaunchOutcome, RelaunchPlan
from forensics.relaunch.only_lost import LostChain


@dataclass(frozen=True)
class RelaunchResults:
    """The outcome per execution, in the order asked; a dry run's carry the exact request."""

    outcomes: tuple[RelaunchOutcome, ...]
    dry_run: bool


RELAUNCH_COLUMNS = (
    Column("execution"),
    Column("status"),
    Column("relaunched as"),
    Column("reason", wrap=True),
)


def _table(results: RelaunchResults, width: int | None) -> str:
    rows = [
        (
            str(o.execution),
            o.status,
            o.relaunched_as.name if o.relaunched_as else "—",
            o.reason + (f"; console: {o.console_url}" if o.console_url else ""),
        )
        for o in results.outcomes
    ]
    return render_fitted(RELAUNCH_COLUMNS, rows, width)


def _json(results: RelaunchResults, width: int | None = None) -> str:
    request = results.dry_run
    rows = [o.as_dict() | ({"request": o.request} if request else {}) for o in results.outcomes]
    return json.dumps(rows, indent=2) + "\n"


def plan_lines(plan: RelaunchPlan) -> list[str]:
    """The plan for one execution as said on stderr before anything is done."""
    state = (
        plan.failure
        or (f"already relaunched as {plan.existing}" if plan.existing else None)
        or plan.refusal
        or (_chain_state(plan.lost) if plan.lost is not None else "will relaunch")
    )
    return [f"{plan.execution}: {state}", *(f"  {line}" for line in plan.lines())]


def _chain_state(chain: LostChain) -> str:
    """Where an --only-lost chain stands, in a few words."""
    if chain.failed is not None:
        return f"only-lost chain stopped at node {chain.failed.node_id}"
    if chain.to_start:
        return "will re-run only what was lost: " + ", ".join(s.node_id for s in chain.to_start)
    if chain.done:
        return "only-lost re-runs all succeeded"
    return "only-lost chain in progress"


def request_lines(plans: Sequence[RelaunchPlan], outcomes: Sequence[RelaunchOutcome]) -> list[str]:
    """A dry run's exact requests, one line each: the RPC and its JSON body."""
    lines = []
    for p, o in zip(plans, outcomes, strict=True):
        if o.status == "dry-run" and p.lost is not None:
            lines += [
                "CreateExecution " + json.dumps(s.request.data, sort_keys=True)
                for s in p.lost.to_start
                if s.request is not None
            ]
        elif o.status == "dry-run":
            rpc = "CreateExecution" if p.create is not None else "RelaunchExecution"
            lines.append(f"{rpc} " + json.dumps(o.request, sort_keys=True))
    return lines


RENDERERS: Renderers = {
    RelaunchResults: {OutputFormat.table: _table, OutputFormat.json: _json},
}
