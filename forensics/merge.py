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
- **order**: as a scan orders them (findings by signal time, else disruption, else end; pending by signal time;
  unresolved by signal time and pod; gaps by source and time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from forensics.cost import CostRow, totals_of
from forensics.errors import UsageError
from forensics.model import UTC, AttemptRef, ExecutionRef, Scope, rfc3339

SCHEMA_VERSION = 1
SOURCES = ("loki", "admin", "s3")
UNCOVERED = "not covered by any merged report"

Doc = dict[str, Any]


def _time(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _attempt_key(item: Mapping[str, Any]) -> tuple[str, str, str, str, int]:
    e = item["execution"]
    return (e["project"], e["domain"], e["name"], item["node_id"], int(item["attempt"]))


def _attempt_str(item: Mapping[str, Any]) -> str:
    p, d, n, node, attempt = _attempt_key(item)
    return f"{p}:{d}:{n}/{node}/{attempt}"


def _check(reports: list[Doc]) -> None:
    if not reports:
        raise UsageError("merge: no reports given")
    for i, r in enumerate(reports):
        version = r.get("schema_version") if isinstance(r, dict) else None
        if version != SCHEMA_VERSION:
            raise UsageError(
                f"merge: report {i + 1} is not an elastic-audit scan report of schema_version "
                f"{SCHEMA_VERSION} (schema_version {version!r})"
            )


def _scope_of(r: Doc) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A report's scope as sorted (projects, domains); None when it records none."""
    scope = r.get("scope")
    if scope is None:
        return None
    return tuple(sorted(scope["projects"])), tuple(sorted(scope["domains"]))


def _scope_words(scope: tuple[tuple[str, ...], tuple[str, ...]] | None) -> str:
    return "an unrecorded scope" if scope is None else str(Scope(*scope))


def _scope(reports: list[Doc]) -> Any:
    """The merged report's scope (module docstring): the reports' one scope, or the grid their
    scopes tile; UsageError naming two scopes that neither equal nor tile."""
    groups = list(dict.fromkeys(_scope_of(r) for r in reports))
    if len(groups) == 1:
        one = groups[0]
        return None if one is None else {"projects": list(one[0]), "domains": list(one[1])}
    if None not in groups:
        grid = _grid(groups)  # type: ignore[arg-type]
        if grid is not None:
            return {"projects": list(grid[0]), "domains": list(grid[1])}
    first = _scope_of(reports[0])
    i = next(i for i, r in enumerate(reports) if _scope_of(r) != first)
    raise UsageError(
        f"merge: report {i + 1} covers {_scope_words(_scope_of(reports[i]))} but report 1 covers "
        f"{_scope_words(first)}: merge only reports of one scope, or of scopes that split one "
        "scope into disjoint projects or domains"
    )


def _grid(
    groups: list[tuple[tuple[str, ...], tuple[str, ...]]],
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
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


def _holes(reports: list[Doc]) -> tuple[datetime, datetime, list[tuple[datetime, datetime, str]]]:
    """The merged window, and each stretch of it that the reports of one scope do not cover
    (every stretch for one scope; per scope when the scopes split a grid)."""
    spans = [(_time(r["window"]["start"]), _time(r["window"]["end"])) for r in reports]
    start = min(s for s, _ in spans if s is not None)
    end = max(e for _, e in spans if e is not None)
    groups: dict[Any, list[tuple[datetime, datetime]]] = {}
    for r, span in zip(reports, spans, strict=True):
        groups.setdefault(_scope_of(r), []).append(span)  # type: ignore[arg-type]
    holes = []
    for scope, group in groups.items():
        error = UNCOVERED if len(groups) == 1 else f"{UNCOVERED} of {_scope_words(scope)}"
        holes += [(s, e, error) for s, e in _uncovered(sorted(group), start, end)]
    return start, end, holes


def _uncovered(
    spans: list[tuple[datetime, datetime]], start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    holes, reach = [], start
    for s, e in spans:
        if s > reach:
            holes.append((reach, s))
        reach = max(reach, e)
    if reach < end:
        holes.append((reach, end))
    return holes


def _better(a: Doc, b: Doc) -> Doc:
    """Of two findings of one attempt, the one a scan of both slices would report."""

    def rank(f: Doc) -> tuple[int, datetime, int]:
        sig = f.get("signal")
        at = _time(sig["at"]) if sig else None
        return (
            0 if sig else 1,  # the slice that saw the signal judged it as the whole scan would
            at or datetime.max.replace(tzinfo=UTC),
            0 if f["verdict"] == "affected" else 1,
        )

    best = a if rank(a) <= rank(b) else b
    other = b if best is a else a
    if best.get("relaunched_as") is None and other.get("relaunched_as") is not None:
        best = {**best, "relaunched_as": other["relaunched_as"]}
    return best


def _findings(reports: list[Doc], end: datetime) -> tuple[list[Doc], int]:
    merged: dict[tuple[str, str, str, str, int], Doc] = {}
    duplicates = 0
    for r in reports:
        for f in r.get("findings", ()):
            k = _attempt_key(f)
            if k in merged:
                duplicates += 1
                merged[k] = _better(merged[k], f)
            else:
                merged[k] = f

    def order(f: Doc) -> tuple[datetime, str]:
        # as the scan's tally orders them: signal, else disruption, else the attempt's end
        at = (f.get("signal") or f.get("disruption") or {}).get("at") or f.get("succeeded_at")
        return (_time(at) or end, _attempt_str(f))

    return sorted(merged.values(), key=order), duplicates


def _pending(reports: list[Doc], found: set[tuple]) -> tuple[list[Doc], int]:
    merged: dict[tuple, Doc] = {}
    dropped = 0
    for r in reports:
        for p in r.get("pending", ()):
            k = _attempt_key(p)
            if k in found or k in merged:
                dropped += 1
                continue
            merged[k] = p
    out = sorted(merged.values(), key=lambda p: (_time(p["signal"]["at"]), _attempt_str(p)))
    return out, dropped


def _unresolved(reports: list[Doc]) -> tuple[list[Doc], int]:
    merged: dict[tuple[str, str], Doc] = {}
    dropped = 0
    for r in reports:
        for u in r.get("unresolved", ()):
            k = (u["namespace"], u["pod"])
            if k in merged:
                dropped += 1
                if _time(u["signal"]["at"]) < _time(merged[k]["signal"]["at"]):  # type: ignore[operator]
                    merged[k] = u
                continue
            merged[k] = u
    out = sorted(merged.values(), key=lambda u: (_time(u["signal"]["at"]), u["signal"]["pod"]))
    return out, dropped


def _superseded(reports: list[Doc]) -> list[Doc]:
    """Each superseded trial once (two slices may both clear it), in the scan's order."""
    merged = {_attempt_key(x): x for r in reports for x in r.get("superseded", ())}
    return [merged[k] for k in sorted(merged, key=lambda k: str(_attempt_ref(k)))]


def _attempt_ref(key: tuple[str, str, str, str, int]) -> AttemptRef:
    project, domain, name, node_id, attempt = key
    return AttemptRef(ExecutionRef(project, domain, name), node_id, attempt)


def _gaps(
    reports: list[Doc],
    holes: Iterable[tuple[datetime, datetime, str]],
    start: datetime,
    end: datetime,
) -> list[Doc]:
    seen: dict[tuple, Doc] = {}
    for r in reports:
        for g in r.get("gaps", ()):
            seen.setdefault((g["source"], g["start"], g["end"], g["error"]), g)
    for s, e, error in holes:
        for source in SOURCES:
            g = {"source": source, "kind": "failed", "start": rfc3339(s), "end": rfc3339(e),
                 "error": error}  # fmt: skip
            seen.setdefault((source, g["start"], g["end"], error), g)

    def order(g: Doc) -> tuple[str, datetime, datetime, str]:
        return (g["source"], _time(g["start"]) or start, _time(g["end"]) or end, g["error"])

    return sorted(seen.values(), key=order)


def _summary(reports: list[Doc], findings: list[Doc], pending: list[Doc], duplicates: int) -> Doc:
    cleared: dict[str, int] = {}
    examined = not_affected = unparsed = 0
    example = None
    for r in reports:
        s = r["summary"]
        examined += s["attempts_examined"]
        not_affected += s["not_affected"]
        unparsed += s["unparsed_lines"]
        for reason, n in (s.get("cleared") or {}).items():
            cleared[reason] = cleared.get(reason, 0) + n
        ex = s.get("unparsed_example")
        if ex is not None and (example is None or _time(ex["at"]) < _time(example["at"])):  # type: ignore[operator]
            example = ex
    return {
        "attempts_examined": examined - duplicates,
        "affected": sum(f["verdict"] == "affected" for f in findings),
        "suspected": sum(f["verdict"] == "suspected" for f in findings),
        "not_affected": not_affected,
        "pending": len(pending),
        "cleared": dict(sorted(cleared.items())),
        "unparsed_lines": unparsed,
        "unparsed_example": example,
        "cost": totals_of(_cost_row(f) for f in findings),
        "findings_by_disruption_reason": _by_reason(findings),
    }


def _by_reason(findings: list[Doc]) -> dict[str, int]:
    """`summary.findings_by_disruption_reason` of the merged findings ("none": no evidence)."""
    counts: dict[str, int] = {}
    for f in findings:
        reason = (f.get("disruption") or {}).get("reason") or "none"
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def _cost_row(f: Mapping[str, Any]) -> CostRow:
    """A finding's cost as `forensics.cost.totals` counts it: on the UTC day of its signal,
    else of its false success (report times are RFC 3339 in UTC)."""
    at = (f.get("signal") or {}).get("at") or f.get("succeeded_at")
    cost = f.get("cost") or {}
    return CostRow(
        f["execution"]["project"],
        at[:10] if at else "unknown",
        cost.get("gpu_hours"),
        cost.get("cpu_hours"),
    )


def merge_reports(reports: Iterable[Doc]) -> Doc:
    """One report (the JSON document of docs/report.md) from the reports of several scans."""
    docs = list(reports)
    _check(docs)
    scope = _scope(docs)
    start, end, holes = _holes(docs)
    findings, dup_findings = _findings(docs, end)
    found = {_attempt_key(f) for f in findings}
    pending, dup_pending = _pending(docs, found)
    unresolved, _dup_pods = _unresolved(docs)
    gaps = _gaps(docs, holes, start, end)
    summary = _summary(docs, findings, pending, dup_findings + dup_pending)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": docs[0]["tool"],
        "window": {"start": rfc3339(start), "end": rfc3339(end)},
        "scope": scope,
        "complete": not gaps,
        "gaps": gaps,
        "summary": summary,
        "findings": findings,
        "pending": pending,
        "unresolved": unresolved,
        "superseded": _superseded(docs),
    }
