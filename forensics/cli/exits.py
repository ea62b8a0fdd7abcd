"""Exit codes (docs/exit-codes.md): chosen here, once, from what the library returns or raises.

The library raises typed errors and returns typed results; which number a shell sees for each is
the command line's decision, and `scan`, `watch` and the guard share one rule for a scan's result.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from forensics.errors import ElasticAuditError, LokiQueryError, SourceError
from forensics.model import ReportStatus, report_status

if TYPE_CHECKING:
    from forensics.model import Report

USAGE = 2  # usage, configuration, or a refusal with nothing done
INCOMPLETE = 3  # a source failed: what is reported is not the whole answer
INTERRUPTED = 130  # Ctrl-C
TERMINATED = 143  # SIGTERM (guard mode): the state is as before, or the write finished
# An unexpected exception (a bug in the tool; sysexits' EX_SOFTWARE): never Python's own 1, which
# a scan uses for findings, so a crash cannot pass for a completed scan.
CRASHED = 70


def for_error(error: ElasticAuditError) -> int:
    """The exit code of an error the tool reports as one line: a source that failed to answer is
    3, except Loki refusing the query itself (a malformed selector is configuration) and GitHub
    failing pin-bump (it refuses, nothing written); everything else is 2."""
    from forensics.pinbump.github import GitHubError

    if isinstance(error, SourceError) and not isinstance(error, LokiQueryError | GitHubError):
        return INCOMPLETE
    return USAGE


def for_scan(
    report: Report,
    *,
    exit_zero: bool = False,
    page_gaps: bool = False,
    undelivered: bool = False,
) -> int:
    """One scan's result, for `scan`, each `watch` run and the guard: the report's status
    (`Report.status`), incomplete too when the incident page has gaps or (guard) a
    notification or metrics push failed."""
    return for_status(report.status, exit_zero=exit_zero, incomplete=page_gaps or undelivered)


def for_status(status: ReportStatus, *, exit_zero: bool = False, incomplete: bool = False) -> int:
    """3 incomplete, 1 something to act on (0 with `exit_zero`), else 0."""
    if incomplete or status is ReportStatus.INCOMPLETE:
        return INCOMPLETE
    if status is ReportStatus.TO_ACT_ON and not exit_zero:
        return 1
    return 0


def for_result(*, complete: bool, to_act_on: bool, exit_zero: bool = False) -> int:
    """The rule for a scan's result in any form (`merge`'s document)."""
    return for_status(report_status(complete=complete, to_act_on=to_act_on), exit_zero=exit_zero)


def for_relaunch(statuses: Iterable[str]) -> int:
    """3 when Flyte Admin failed for any execution, else 1 when any was refused, else 0."""
    seen = set(statuses)
    if "failed" in seen:
        return INCOMPLETE
    if "refused" in seen:
        return 1
    return 0


def for_fix_check(status: str) -> int:
    """`fix check`: 0 fixed, 1 vulnerable, 2 not installed or unknown."""
    return {"fixed": 0, "vulnerable": 1}.get(status, USAGE)


def for_fix_apply(status: str) -> int:
    """`fix apply`: 2 when the fix cannot be applied there, else 0."""
    return USAGE if status == "cannot-apply" else 0
