"""`elastic-audit relaunch`: bring affected runs back exactly once, confirmed and audited."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from forensics.cli import exits
from forensics.cli.common import emit
from forensics.cli.display import render
from forensics.cli.options import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    SourceFlags,
    VerboseOpt,
    check_output,
    default_output,
    flag_option,
    output_option,
    value_option,
)
from forensics.cli.verbosity import setup_logging
from forensics.errors import UsageError
from forensics.formats import TABLE_OR_JSON, OutputFormat
from forensics.identifiers import FORMS, parse_execution
from forensics.model import ExecutionRef

if TYPE_CHECKING:
    from forensics.relaunch import AuditLog, RelaunchOutcome, RelaunchPlan
    from forensics.relaunch.relauncher import Relauncher
    from forensics.sources import Sources

EXECUTION_FORMS = textwrap.fill(f"EXECUTION forms: {FORMS}.", 96, break_on_hyphens=False)

EXAMPLES = f"""
Examples:

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --dry-run

  elastic-audit relaunch --from-report incident.json --yes -o json

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --to-version v2 --yes

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --parent --dry-run

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --only-lost --yes

{EXECUTION_FORMS}
Each relaunch uses RelaunchExecution (never RecoverExecution) — or, with --to-version,
CreateExecution of the launch plan at that version with the original's inputs, mode RELAUNCH and
a reference to it — under a name derived from the original, so running this twice never creates
a second execution. The plan says, per execution: the verdict, its phase, its parent, whether
the task it re-runs still carries the bug, and the cacheable nodes overwrite_cache recomputes
(sent only when a lost node or a node after it is cacheable; otherwise cached finished nodes are
reused). Refused unless --force: not affected or suspected, still running or queued, a child
execution (--parent relaunches the top one). A relaunch that itself ended silently green is
reported and relaunched in turn. --only-lost re-runs each lost node as a single-task
CreateExecution of the same task version with its recorded inputs, then each node after it once
its re-run predecessors succeeded, one name per node; running it again advances the chain.
Branch, sub-workflow, launch-plan, gate and map nodes and dynamic parents are refused with the
whole-relaunch command. A RECOVERED execution of it is said (RecoverExecution copied the false
success) and never the repair.
Exit codes: 0 all relaunched / already relaunched / dry-run, 1 any refused, 3 Flyte Admin failed
(or an --only-lost re-run failed) for any, 2 usage error: an execution Admin does not know, an
audit log that cannot be written, no terminal to confirm on and no --yes.
"""


def _confirm(question: str) -> bool:
    """Ask on stderr, read stdin. (click's confirm echoes a space to stdout, which holds data.)"""
    typer.echo(f"{question} [y/N]: ", err=True, nl=False)
    answer = sys.stdin.readline()
    if not answer:  # end of input: no answer is no
        typer.echo("", err=True)
        return False
    return answer.strip().lower() in ("y", "yes")


def _say(lines: Iterable[str]) -> None:
    for line in lines:
        typer.echo(line, err=True)


def relaunch(
    executions: list[str] = typer.Argument(
        None,
        metavar="EXECUTION",
        help="Executions to relaunch (see forms below).",
        show_default=False,
    ),
    from_report: str | None = value_option(
        "--from-report",
        "FILE",
        "A JSON report from `scan`: relaunch its affected and suspected findings.",
    ),
    project: str | None = value_option(
        "--project", "PROJECT", "Project of bare execution names.", "-p"
    ),
    domain: str | None = value_option(
        "--domain", "DOMAIN", "Domain of bare execution names.", "-d"
    ),
    dry_run: bool = flag_option("--dry-run", help="Print the exact requests; change nothing."),
    yes: bool = flag_option("--yes", "-y", help="Do not ask for confirmation (for scripts)."),
    force: bool = flag_option(
        "--force",
        help="Relaunch even when the re-check says not affected, the original still runs, "
        "or it is a child execution.",
    ),
    parent: bool = flag_option(
        "--parent",
        help="For a child execution, relaunch the top execution that launched it instead.",
    ),
    to_version: str | None = value_option(
        "--to-version",
        "VERSION",
        "Relaunch on the same launch plan at VERSION (the fixed one), with the original's "
        "inputs, labels, annotations, security context and raw output prefix.",
    ),
    only_lost: bool = flag_option(
        "--only-lost",
        help="Re-run only the lost node(s), each as one task from its recorded inputs, then "
        "the nodes after them; never the finished nodes before. Run again to advance.",
    ),
    overwrite_cache: bool = flag_option(
        "--overwrite-cache",
        help="Recompute every cacheable node (default: only when a lost node or one after "
        "it is cacheable).",
    ),
    no_overwrite_cache: bool = flag_option(
        "--no-overwrite-cache",
        help="Reuse cached node results instead of recomputing every cacheable node.",
    ),
    audit_log: str | None = value_option(
        "--audit-log",
        "FILE",
        "Audit log, JSON lines (default $ELASTIC_AUDIT_AUDIT_LOG, else "
        "$XDG_STATE_HOME/elastic-audit/audit.jsonl).",
    ),
    loki_url: str | None = LokiUrlOpt,
    flyte_config: str | None = FlyteConfigOpt,
    config: str | None = ConfigOpt,
    checkpoint_input: str | None = CheckpointInputOpt,
    checkpoint_template: str | None = CheckpointTemplateOpt,
    output: str | None = output_option(*TABLE_OR_JSON),
    verbose: int = VerboseOpt,
) -> None:
    """Relaunch affected executions exactly once, after saying what the relaunch will do."""
    sources = SourceFlags(
        loki_url=loki_url,
        flyte_config=flyte_config,
        config=config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    setup_logging(verbose)
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    from forensics.formats.relaunch import RelaunchResults, plan_lines, request_lines
    from forensics.relaunch import Options

    if to_version is not None and not to_version.strip():
        raise UsageError("--to-version: give the launch plan version to relaunch on")
    _check_combination(only_lost, to_version, parent, overwrite_cache, no_overwrite_cache)
    refs = _targets(executions or [], from_report, project, domain)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if not (yes or dry_run or interactive):
        raise UsageError(
            "no terminal to confirm on: pass --yes to relaunch, or --dry-run to preview"
        )
    from forensics.cli.process import open_sources  # flytekit: not for `--help` or bad input
    from forensics.relaunch import AuditLog

    settings = sources.settings()
    # The audit log is opened before anything is asked of Admin: one that cannot be written
    # stops the command here (exit 2), not after a relaunch was sent.
    audit = AuditLog(Path(audit_log)) if audit_log else AuditLog.default()
    # The clients close when the relaunches are done, as scan's and show's do.
    with audit, open_sources(settings) as clients:
        relauncher = _relauncher(clients, audit)
        options = Options(
            force=force,
            parent=parent,
            to_version=to_version,
            overwrite_cache=False if no_overwrite_cache else (True if overwrite_cache else None),
            only_lost=only_lost,
        )
        plans = [relauncher.plan(r, options) for r in refs]
        _refuse_unknown(plans)
        # The plan on stderr before anything is done (-o json carries it in each result).
        if fmt is OutputFormat.table or not (dry_run or yes):
            _say(line for p in plans for line in plan_lines(p))
        if not dry_run and not yes:
            _confirm_plans(plans)
        outcomes = [
            _linked(relauncher.execute(p, dry_run=dry_run), settings.flyte.console_url)
            for p in plans
        ]
    if dry_run and fmt is OutputFormat.table:
        _say(request_lines(plans, outcomes))
    emit(render(RelaunchResults(tuple(outcomes), dry_run), fmt))
    raise typer.Exit(exits.for_relaunch(o.status for o in outcomes))


def _targets(
    executions: list[str], from_report: str | None, project: str | None, domain: str | None
) -> list[ExecutionRef]:
    """The executions named, then --from-report's not already named; at least one."""
    from forensics.relaunch import executions_from_report

    refs = [parse_execution(e, project=project, domain=domain) for e in executions]
    if from_report:
        refs += [r for r in executions_from_report(from_report) if r not in refs]
    if not refs:
        raise UsageError("nothing to relaunch: name executions or give --from-report FILE")
    return refs


def _check_combination(
    only_lost: bool, to_version: str | None, parent: bool, overwrite: bool, no_overwrite: bool
) -> None:
    """Options that contradict each other are a usage error before anything is read."""
    if overwrite and no_overwrite:
        raise UsageError("--overwrite-cache and --no-overwrite-cache contradict each other")
    if not only_lost:
        return
    # A re-run is the same task version with its recorded inputs, at the top level only.
    for given, flag in (
        (to_version is not None, "--to-version"),
        (parent, "--parent"),
        (overwrite or no_overwrite, "--overwrite-cache / --no-overwrite-cache"),
    ):
        if given:
            raise UsageError(
                f"--only-lost cannot be combined with {flag}: it re-runs the same task version "
                "from its recorded inputs (a whole relaunch takes it)"
            )


def _relauncher(clients: Sources, audit: AuditLog) -> Relauncher:
    from forensics.relaunch.relauncher import Relauncher

    # The scan's own evaluation of one execution: the same rules as `scan` (docs/verdicts.md).
    return Relauncher.over(clients, audit)


def _linked(outcome: RelaunchOutcome, console_url: str | None) -> RelaunchOutcome:
    """The outcome with the Flyte console link of its new (or existing) execution."""
    from dataclasses import replace

    from forensics.detect import console_link

    new = outcome.relaunched_as
    if new is None:
        return outcome
    return replace(
        outcome, console_url=console_link(console_url, new.project, new.domain, new.name)
    )


def _refuse_unknown(plans: list[RelaunchPlan]) -> None:
    """An execution Admin does not know is a typo: exit 2 before anything is done or audited,
    as `show` does for the same name (docs/exit-codes.md)."""
    unknown = [str(p.execution) for p in plans if p.verdict == "not-found"]
    if unknown:
        raise UsageError(
            f"execution(s) not found in Flyte Admin: {', '.join(unknown)}; nothing relaunched "
            "(check the name: project:domain:name)"
        )


def _confirm_plans(plans: list[RelaunchPlan]) -> None:
    """Ask before relaunching anything; a no (or no answer) exits 1 with nothing done."""
    todo = [
        p
        for p in plans
        if not (p.failure or p.refusal)
        and p.existing is None
        and (p.lost is None or (p.lost.to_start and p.lost.failed is None))
    ]
    if todo and not _confirm(f"Relaunch {len(todo)} execution(s)?"):
        typer.echo("elastic-audit: nothing relaunched", err=True)
        raise typer.Exit(1)
