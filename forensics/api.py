"""One call each for what usually takes several modules: a scan of a window, one execution
judged or laid out in time. Thin over `scan.run.scan`, `scan.examine.examine` and
`timeline.build_timeline`; they print nothing and return the library's typed results
(docs/library.md).

Each opens the production clients for `settings` and closes them (`Sources.from_settings`)
unless `sources` is given, e.g. to share them between calls or to pass other implementations
of `sources.interfaces`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from forensics.config import Settings
from forensics.model import ExecutionRef, Report, Window

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from forensics.scan.examine import Examination
    from forensics.sources import Sources
    from forensics.timeline import Timeline


def window_of(since: datetime | timedelta | str, until: datetime | str | None = None) -> Window:
    """`[since, until)` from aware datetimes, a timedelta back from `until`, or the CLI's
    `--since`/`--until` texts (RFC 3339, a date, or `since` as a duration back from `until`,
    e.g. `7d`); `until` None is now. A bad value raises UsageError with the reason."""
    from forensics import arguments

    return arguments.window_of(since, until)


def execution_of(execution: ExecutionRef | str) -> ExecutionRef:
    """An ExecutionRef, or one parsed from `project:domain:name`, `project/domain/name` or a
    Flyte console URL (UsageError otherwise)."""
    from forensics import arguments

    return arguments.execution_of(execution)


def merge_reports(
    reports: Report | Mapping[str, Any] | Iterable[Report | Mapping[str, Any]],
) -> dict[str, Any]:
    """One report (docs/report.md's document) from the reports of scans over slices of a window
    (`forensics.merge.merge_reports`): each a Report or its `as_dict()` document."""
    from forensics import arguments
    from forensics.merge import merge_reports as merged

    return merged(arguments.reports_of(reports))


def _opened(settings: Settings, sources: Sources | None) -> AbstractContextManager[Sources]:
    if sources is not None:
        sources.check_open()
        return nullcontext(sources)
    from forensics.sources import Sources

    return Sources.from_settings(settings)


def scan_window(
    settings: Settings,
    since: datetime | timedelta | str,
    until: datetime | str | None = None,
    *,
    projects: str | Iterable[str] = (),
    domains: str | Iterable[str] = (),
    sources: Sources | None = None,
) -> Report:
    """The report `elastic-audit scan --since SINCE --until UNTIL` prints (docs/report.md):
    findings, summary and gaps of the window, within `projects` and `domains` (one name or
    several; empty: all)."""
    from forensics.arguments import names_of
    from forensics.scan.run import scan
    from forensics.scan.scope import ScanScope

    window = window_of(since, until)
    scope = ScanScope(
        projects=names_of(projects, param="projects"), domains=names_of(domains, param="domains")
    )
    with _opened(settings, sources) as opened:
        return scan(opened, window, scope)


def examine_execution(
    settings: Settings, execution: ExecutionRef | str, *, sources: Sources | None = None
) -> Examination:
    """Every attempt of one execution judged by the scan's rules (what `show` prints);
    NotFoundError when Admin does not know it."""
    from forensics.scan.examine import examine

    ref = execution_of(execution)
    with _opened(settings, sources) as opened:
        return examine(opened, ref)


def execution_timeline(
    settings: Settings, execution: ExecutionRef | str, *, sources: Sources | None = None
) -> Timeline:
    """One execution's life in time order, with each attempt's verdict (`show --timeline`)."""
    from forensics.timeline import build_timeline

    ref = execution_of(execution)
    with _opened(settings, sources) as opened:
        return build_timeline(opened, ref)
