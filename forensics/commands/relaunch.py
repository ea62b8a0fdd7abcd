"""`elastic-audit relaunch`: bring affected runs back exactly once, confirmed and audited."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import typer

from forensics.cli import TABLE_OR_JSON, OutputFormat, app, check_output, default_output
from forensics.commands.common import (
    CheckpointInputOpt,
    CheckpointTemplateOpt,
    ConfigOpt,
    FlyteConfigOpt,
    LokiUrlOpt,
    TableOrJsonOpt,
    VerboseOpt,
    emit,
    settings_from_flags,
    setup_logging,
)
from forensics.errors import UsageError
from forensics.formats.table import Column, render_table, terminal_width
from forensics.identifiers import FORMS, parse_execution

EXECUTION_FORMS = textwrap.fill(f"EXECUTION forms: {FORMS}.", 96, break_on_hyphens=False)

EXAMPLES = f"""
Examples:

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --dry-run

  elastic-audit relaunch --from-report incident.json --yes -o json

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --to-version v2 --yes

  elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --parent --dry-run

{EXECUTION_FORMS}
Each relaunch uses RelaunchExecution with overwrite_cache (never RecoverExecution) — or, with
--to-version, CreateExecution of the launch plan at that version with the original's inputs,
mode RELAUNCH and a reference to it — under a name derived from the original, so running this
twice never creates a second execution. The plan says, per execution: the verdict, its phase,
its parent, whether the task it re-runs still carries the bug, and the cacheable nodes
overwrite_cache recomputes. Refused unless --force: not affected or suspected, still running or
queued, a child execution (--parent relaunches the top one). A relaunch that itself ended
silently green is reported and relaunched in turn.
Exit codes: 0 all relaunched / already relaunched / dry-run, 1 any refused, 3 Flyte Admin failed
for any, 2 usage error (or no terminal to confirm on and no --yes).
"""


def _confirm(question: str) -> bool:
    """Ask on stderr, read stdin. (click's confirm echoes a space to stdout, which holds data.)"""
    typer.echo(f"{question} [y/N]: ", err=True, nl=False)
    answer = sys.stdin.readline()
    if not answer:  # end of input: no answer is no
        typer.echo("", err=True)
        return False
    return answer.strip().lower() in ("y", "yes")


RELAUNCH_COLUMNS = (
    Column("execution"),
    Column("status"),
    Column("relaunched as"),
    Column("reason", wrap=True),
)


def _table(outcomes) -> str:  # noqa: ANN001
    rows = [
        (str(o.execution), o.status, o.relaunched_as.name if o.relaunched_as else "—", o.reason)
        for o in outcomes
    ]
    return render_table(RELAUNCH_COLUMNS, rows, width=terminal_width())


@app.command(epilog=EXAMPLES)
def relaunch(
    executions: list[str] = typer.Argument(
        None, help="Executions to relaunch (see forms below).", show_default=False
    ),
    from_report: str = typer.Option(
        None,
        "--from-report",
        help="A JSON report from `scan`: relaunch its affected and suspected findings.",
        show_default=False,
    ),
    project: str = typer.Option(
        None, "--project", help="Project of bare execution names.", show_default=False
    ),
    domain: str = typer.Option(
        None, "--domain", help="Domain of bare execution names.", show_default=False
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the exact requests; change nothing."
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Do not ask for confirmation (for scripts)."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Relaunch even when the re-check says not affected, the original still runs, "
        "or it is a child execution.",
    ),
    parent: bool = typer.Option(
        False,
        "--parent",
        help="For a child execution, relaunch the top execution that launched it instead.",
    ),
    to_version: str = typer.Option(
        None,
        "--to-version",
        metavar="VERSION",
        help="Relaunch on the same launch plan at VERSION (the fixed one), with the original's "
        "inputs, labels, annotations, security context and raw output prefix.",
        show_default=False,
    ),
    no_overwrite_cache: bool = typer.Option(
        False,
        "--no-overwrite-cache",
        help="Reuse cached node results instead of recomputing every cacheable node.",
    ),
    audit_log: str = typer.Option(
        None,
        "--audit-log",
        help="Audit log, JSON lines (default $ELASTIC_AUDIT_AUDIT_LOG, else "
        "$XDG_STATE_HOME/elastic-audit/audit.jsonl).",
        metavar="FILE",
        show_default=False,
    ),
    loki_url: str = LokiUrlOpt,
    flyte_config: str = FlyteConfigOpt,
    config: str = ConfigOpt,
    checkpoint_input: str = CheckpointInputOpt,
    checkpoint_template: str = CheckpointTemplateOpt,
    output: str = TableOrJsonOpt,
    verbose: int = VerboseOpt,
) -> None:
    """Relaunch affected executions exactly once, after saying what the relaunch will do."""
    setup_logging(verbose)
    fmt = check_output(default_output(output), TABLE_OR_JSON)
    from forensics.relaunch import AuditLog, Options, default_audit_log, executions_from_report
    from forensics.relaunch.relauncher import Relauncher

    if to_version is not None and not to_version.strip():
        raise UsageError("--to-version: give the launch plan version to relaunch on")

    refs = [parse_execution(e, project=project, domain=domain) for e in executions or []]
    if from_report:
        refs += [r for r in executions_from_report(from_report) if r not in refs]
    if not refs:
        raise UsageError("nothing to relaunch: name executions or give --from-report FILE")
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if not (yes or dry_run or interactive):
        raise UsageError(
            "no terminal to confirm on: pass --yes to relaunch, or --dry-run to preview"
        )
    settings = settings_from_flags(
        config=config,
        loki_url=loki_url,
        flyte_config=flyte_config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
    )
    from forensics.sources import Sources

    audit = AuditLog(Path(audit_log) if audit_log else default_audit_log())
    # The scan's own evaluation of one execution (SPEC §3.3: the same rules as `scan`).
    relauncher = Relauncher.over(Sources.from_settings(settings), audit)
    options = Options(
        force=force,
        parent=parent,
        to_version=to_version,
        overwrite_cache=not no_overwrite_cache,
    )
    plans = [relauncher.plan(r, options) for r in refs]

    # The plan on stderr before anything is done (-o json carries it in each result).
    if fmt is OutputFormat.table or not (dry_run or yes):
        for p in plans:
            state = (
                p.failure
                or (f"already relaunched as {p.existing}" if p.existing else None)
                or p.refusal
                or "will relaunch"
            )
            typer.echo(f"{p.execution}: {state}", err=True)
            for line in p.lines():
                typer.echo(f"  {line}", err=True)
    if not dry_run and not yes:
        todo = [p for p in plans if not (p.failure or p.refusal) and p.existing is None]
        if todo and not _confirm(f"Relaunch {len(todo)} execution(s)?"):
            typer.echo("elastic-audit: nothing relaunched", err=True)
            raise typer.Exit(1)
    outcomes = [relauncher.execute(p, dry_run=dry_run) for p in plans]
    if dry_run and fmt is OutputFormat.table:
        for p, o in zip(plans, outcomes, strict=True):
            if o.status == "dry-run":
                rpc = "CreateExecution" if p.create is not None else "RelaunchExecution"
                typer.echo(f"{rpc} " + json.dumps(o.request, sort_keys=True), err=True)
    if fmt is OutputFormat.json:
        emit(
            json.dumps(
                [o.as_dict() | ({"request": o.request} if dry_run else {}) for o in outcomes],
                indent=2,
            )
        )
    else:
        emit(_table(outcomes))
    from forensics.relaunch import exit_code

    raise typer.Exit(exit_code(outcomes))
