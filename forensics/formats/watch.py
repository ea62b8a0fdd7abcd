"""`watch`'s one line per guard run on stdout: when, the window, the counts, the exit code."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from forensics.formats import OutputFormat, Renderers
from forensics.guard.run import GuardOutcome
from forensics.model import rfc3339


@dataclass(frozen=True)
class WatchRun:
    """The `number`th run of a watch, finished at `at` with `outcome`; `code` is the exit code
    a `scan` of the same run would have had."""

    number: int
    at: datetime
    outcome: GuardOutcome
    code: int


def _line(run: WatchRun, width: int | None = None) -> str:
    r = run.outcome.report
    assert r is not None  # a run SIGTERM ended has no line
    new = sum(1 for f in r.findings if f.new)
    w = r.window.as_dict()
    return (
        f"{rfc3339(run.at.replace(microsecond=0))} run {run.number}: "
        f"{w['start']} – {w['end']}: {r.summary.affected} affected, {r.summary.suspected} "
        f"suspected ({new} new), {len(r.gaps)} gap(s), "
        f"{'complete' if r.complete else 'INCOMPLETE'}, exit {run.code}\n"
    )


RENDERERS: Renderers = {WatchRun: {OutputFormat.table: _line}}
