"""One report from the reports of scans over parts of a window (docs/commands.md, "merge").

The reports are the documented JSON (docs/report.md, schema_version 1), so slices scanned by
other processes — a Flyte backfill's map tasks, cron runs on other machines — merge the same way.
What a merge does, and why it equals one scan of the whole window:

- **window**: from the earliest start to the latest end. A stretch no report covers is a gap of
  every source (`not covered by any merged report`): the merged report is then incomplete.
- **gaps**: every report's, identical ones once.
- **findings**: one per attempt (execution, node id, attempt). An attempt whose death signal is in
  one slice and whose end is in the next is examined by both: the slice that saw the signal judged
  it as one scan of both would (the signal decides `affected`), so the finding with a signal wins,
  the earliest signal first; otherwise `affected` over `suspected`. `relaunched_as` is taken from
  any slice that found the relaunch (each slice looked relaunches up from its own findings).
- **pending** and **unresolved**: one per attempt / per pod; a pending attempt another slice
  reports as a finding is the finding.
- **summary**: counts summed, the duplicates above taken out once each (`attempts_examined`, and
  `affected`/`suspected`/`pending` recounted from the merged lists). An attempt examined by two
  slices and cleared in both cannot be recognised (a report does not list cleared attempts): it
  counts twice in `attempts_examined` and `cleared` — only when its signal and its end straddle
  a slice boundary, never for findings.
- **scope** (`--project`/`--domain`, docs/report.md `scope`): the reports' one scope; or, when their
  scopes split one scope into disjoint cells — per project, per domain, per both, as the backfill's
  slices do — that scope, each part's stretches checked on their own (a stretch one part does not
  cover is a gap `not covered by any merged report of <part>`). Any other mix is refused
  (UsageError), never merged: "every project" beside "project a", overlapping or missing parts —
  no merged scope or time gap could say what was left out.
- **order**: the report's one order (`Report.ordered`, forensics/model.py), as a scan's.

`merge` works on typed reports; `merge_reports` takes and returns the JSON documents
(`report_from_json` reads them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from forensics.cost import totals
from forensics.errors import UsageError
from forensics.model import (
    UTC,
    AttemptRef,
    Finding,
    Gap,
    Pending,
    Report,
    Scope,
    Summary,
    Superseded,
    UnparsedLine,
    Unresolved,
    Window,
    order_findings,
)
from forensics.report_json import report_from_json

SCHEMA_VERSION = 1
SOURCES = ("loki", "admin", "s3")
UNCOVERED = "not covered by any merged report"

ScopeKey = tuple[tuple[str, ...], tuple[str, ...]]


def _check(docs: list[Any]) -> None:
    if not docs:
        raise UsageError("merge: no reports given")
    for i, r in enumerate(docs):
        version = r.get("schema_version") if isinstance(r, dict) else None
        if version != SCHEMA_VERSION:
            raise UsageError(
                f"merge: report {i + 1} is not an elastic-audit scan report of schema_version "
                f"{SCHEMA_VERSION} (schema_version {version!r})"
            )


def _scope_of(r: Report) -> ScopeKey | None:
    """A report's scope as sorted (projects, domains); None when it records none."""
    if r.scope is None:
        return None
    return tuple(sorted(r.scope.projects)), tuple(sorted(r.scope.domains))


def _scope_words(scope: ScopeKey | None) -> str:
    return "an unrecorded scope" if scope is None else str(Scope(*scope))


def _scope(reports: Sequence[Report]) -> Scope | None:
    """The merged report's scope (module docstring): the reports' one scope, or the grid their
    scopes tile; UsageError naming two scopes that neither equal nor tile."""
    groups = list(dict.fromkeys(_scope_of(r) for r in reports))
    if len(groups) == 1:
        one = groups[0]
        return None if one is None else Scope(*one)
    if None not in groups:
        grid = _grid(groups)  # type: ignore[arg-type]
        if grid is not None:
            return Scope(*grid)
    first = _scope_of(reports[0])
    i = next(i for i, r in enumerate(reports) if _scope_of(r) != first)
    raise UsageError(
        f"merge: report {i + 1} covers {_scope_words(_scope_of(reports[i]))} but report 1 covers "
        f"{_scope_words(first)}: merge only reports of one scope, or of scopes that split one "
        "scope into disjoint projects or domains"
    )


def _grid(groups: list[ScopeKey]) -> ScopeKey | None:
    """The scope that `groups` split into disjoint (project, domain) cells exactly — as a
    backfill's slices per project do — or None. An axis left whole ("every") in one group must
    be whole in all: "every project" and "project a" overlap in ways no cell list can say."""
    for axis in (0, 1):
        if len({not g[axis] for g in groups}) > 1:
            return None
    cells = [{(p, d) for p in g[0] or ("*",) for d in g[1] or ("*",)} for g in groups]
    union = set().union(*cells)
    if sum(len(c) for c in cells) != len(union):
        return None  # two scopes share a cell: their findings would be counted twice
    projects = tuple(sorted({p for g in groups for p in g[0]}))
    domains = tuple(sorted({d for g in groups for d in g[1]}))
    if union != {(p, d) for p in projects or ("*",) for d in domains or ("*",)}:
        return None  # the cells leave a hole in the grid the merged scope would claim
    return projects, domains


def _holes(reports: Sequence[Report]) -> tuple[Window, list[tuple[datetime, datetime, str]]]:
    """The merged window, and each stretch of it that the reports of one scope do not cover
    (every stretch for one scope; per scope when the scopes split a grid)."""
    window = Window(min(r.window.start for r in reports), max(r.window.end for r in reports))
    groups: dict[ScopeKey | None, list[tuple[datetime, datetime]]] = {}
    for r in reports:
        groups.setdefault(_scope_of(r), []).append((r.window.start, r.window.end))
    holes = []
    for scope, group in groups.items():
        error = UNCOVERED if len(groups) == 1 else f"{UNCOVERED} of {_scope_words(scope)}"
        holes += [(s, e, error) for s, e in _uncovered(sorted(group), window)]
    return window, holes


def _uncovered(
    spans: list[tuple[datetime, datetime]], window: Window
) -> list[tuple[datetime, datetime]]:
    holes, reach = [], window.start
    for s, e in spans:
        if s > reach:
            holes.append((reach, s))
        reach = max(reach, e)
    if reach < window.end:
        holes.append((reach, window.end))
    return holes


def _better(a: Finding, b: Finding) -> Finding:
    """Of two findings of one attempt, the one a scan of both slices would report."""

    def rank(f: Finding) -> tuple[int, datetime, int]:
        return (
            0 if f.signal else 1,  # the slice that saw the signal judged it as the whole scan would
            f.signal.at if f.signal else datetime.max.replace(tzinfo=UTC),
            0 if f.verdict == "affected" else 1,
        )

    best = a if rank(a) <= rank(b) else b
    other = b if best is a else a
    if best.relaunched_as is None and other.relaunched_as is not None:
        best = replace(best, relaunched_as=other.relaunched_as)
    return best


def _findings(reports: Sequence[Report], end: datetime) -> tuple[list[Finding], int]:
    merged: dict[AttemptRef, Finding] = {}
    duplicates = 0
    for r in reports:
        for f in r.findings:
            if f.attempt in merged:
                duplicates += 1
                merged[f.attempt] = _better(merged[f.attempt], f)
            else:
                merged[f.attempt] = f
    return order_findings(merged.values(), end), duplicates


def _pending(reports: Sequence[Report], found: set[AttemptRef]) -> tuple[list[Pending], int]:
    merged: dict[AttemptRef, Pending] = {}
    dropped = 0
    for r in reports:
        for p in r.pending:
            if p.attempt in found or p.attempt in merged:
                dropped += 1
                continue
            merged[p.attempt] = p
    return list(merged.values()), dropped


def _unresolved(reports: Sequence[Report]) -> list[Unresolved]:
    """One per pod, the earliest signal's."""
    merged: dict[tuple[str, str], Unresolved] = {}
    for r in reports:
        for u in r.unresolved:
            k = (u.signal.namespace, u.signal.pod)
            if k not in merged or u.signal.at < merged[k].signal.at:
                merged[k] = u
    return list(merged.values())


def _superseded(reports: Sequence[Report]) -> list[Superseded]:
    """Each superseded trial once (two slices may both clear it)."""
    return list({x.attempt: x for r in reports for x in r.superseded}.values())


def _gaps(reports: Sequence[Report], holes: Iterable[tuple[datetime, datetime, str]]) -> list[Gap]:
    seen: dict[tuple, Gap] = {}
    for r in reports:
        for g in r.gaps:
            seen.setdefault((g.source, g.start, g.end, g.error), g)
    for s, e, error in holes:
        for source in SOURCES:
            seen.setdefault((source, s, e, error), Gap(source, s, e, error))
    return list(seen.values())


def _summary(
    reports: Sequence[Report], findings: list[Finding], pending: list[Pending], duplicates: int
) -> Summary:
    cleared: dict[str, int] = {}
    examined = not_affected = unparsed = 0
    example: UnparsedLine | None = None
    for r in reports:
        s = r.summary
        examined += s.attempts_examined
        not_affected += s.not_affected
        unparsed += s.unparsed_lines
        for reason, n in s.cleared.items():
            cleared[reason] = cleared.get(reason, 0) + n
        ex = s.unparsed_example
        if ex is not None and (example is None or ex.at < example.at):
            example = ex
    by_reason: dict[str, int] = {}
    for f in findings:  # docs/report.md `summary.findings_by_disruption_reason`
        reason = f.disruption.reason if f.disruption else "none"
        by_reason[reason] = by_reason.get(reason, 0) + 1
    return Summary(
        attempts_examined=examined - duplicates,
        affected=sum(f.verdict == "affected" for f in findings),
        suspected=sum(f.verdict == "suspected" for f in findings),
        not_affected=not_affected,
        cleared=cleared,
        pending=len(pending),
        unparsed_lines=unparsed,
        unparsed_example=example,
        cost=totals(findings),  # over the findings in the report's order, as the scan's
        by_disruption_reason=by_reason,
    )


def merge(reports: Iterable[Report]) -> Report:
    """One report from the reports of several scans (module docstring), in the report's order;
    UsageError for no reports or scopes that cannot merge."""
    parts = list(reports)
    if not parts:
        raise UsageError("merge: no reports given")
    scope = _scope(parts)
    window, holes = _holes(parts)
    findings, dup_findings = _findings(parts, window.end)
    pending, dup_pending = _pending(parts, {f.attempt for f in findings})
    return Report(
        tool=parts[0].tool,
        window=window,
        gaps=tuple(_gaps(parts, holes)),
        summary=_summary(parts, findings, pending, dup_findings + dup_pending),
        findings=tuple(findings),
        pending=tuple(pending),
        unresolved=tuple(_unresolved(parts)),
        superseded=tuple(_superseded(parts)),
        scope=scope,
    ).ordered()


def merge_documents(docs: Iterable[Any]) -> Report:
    """`merge` of JSON reports (docs/report.md): UsageError naming a document of another schema;
    KeyError, TypeError or ValueError for one that lacks what the schema requires."""
    listed = list(docs)
    _check(listed)
    return merge(report_from_json(d) for d in listed)


def merge_reports(reports: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One report (the JSON document of docs/report.md) from the reports of several scans."""
    return merge_documents(reports).as_dict()
