"""`pin-bump`'s result: a summary table (and the diff), JSON, or the plain diff for `git apply`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from forensics.formats import OutputFormat, Renderers
from forensics.formats.table import Column, render_table
from forensics.pinbump.github import CommitVerification
from forensics.pinbump.lock import LockRun
from forensics.pinbump.plan import BumpPlan


@dataclass(frozen=True)
class BumpResult:
    """A pin-bump run: the plan, what was done with it (`mode`) and what was checked on GitHub."""

    plan: BumpPlan
    mode: str  # "write" | "dry-run" | "check"
    verification: CommitVerification | None
    fix: dict[str, str] | None
    locked: tuple[LockRun, ...]

    @property
    def stale_locks(self) -> list[str]:
        """The uv.lock files the bump leaves stale, relative to the tree's root."""
        return [lock.relative_to(self.plan.root).as_posix() for lock in self.plan.stale_locks]

    def diff(self, fmt: OutputFormat) -> str | None:
        """The unified diff when it is part of the output: a dry run's, or `-o diff`."""
        return self.plan.diff() if self.mode == "dry-run" or fmt is OutputFormat.diff else None


def summary(result: BumpResult) -> dict[str, Any]:
    """The JSON document (without the diff)."""
    plan, verification = result.plan, result.verification
    return {
        "repo": plan.repo,
        "sha": plan.sha,
        "root": str(plan.root),
        "mode": result.mode,
        "written": result.mode == "write" and bool(plan.changes),
        "verified": None
        if verification is None
        else {"branch": verification.branch, "branches_checked": verification.branches_checked},
        "fix": result.fix,
        "pins_found": len(plan.pins),
        "pins_stale": len(plan.stale_pins),
        "files": [
            {
                "path": c.rel,
                "pins": [
                    {
                        "line": p.line,
                        "location": p.location,
                        "package": p.package,
                        "from": p.commit,
                        "to": plan.sha,
                    }
                    for p in c.pins
                ],
            }
            for c in plan.changes
        ],
        "from_commits": plan.from_commits,
        "unselected": [
            {"path": p.rel, "line": p.line, "package": p.package, "commit": p.commit}
            for p in plan.unselected
        ],
        "stale_locks": result.stale_locks,
        "locked": [run.directory.relative_to(plan.root).as_posix() or "." for run in result.locked],
        "notices": [{"path": n.rel, "line": n.line, "message": n.message} for n in plan.notices],
        "cannot_move": [
            {
                "path": u.rel,
                "line": u.line,
                "package": u.package,
                "reason": u.reason,
                "text": u.text,
            }
            for u in plan.unmovable
        ],
    }


PIN_COLUMNS = (Column("file"), Column("pins", align_right=True), Column("from commits", wrap=True))


def _file_rows(files: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    rows = []
    for f in files:
        commits: dict[str, int] = {}
        for p in f["pins"]:
            commits[p["from"][:12]] = commits.get(p["from"][:12], 0) + 1
        rows.append(
            (f["path"], str(len(f["pins"])), ", ".join(f"{c} ×{n}" for c, n in commits.items()))
        )
    return rows


def summary_text(result: BumpResult, width: int | None = None) -> str:
    """What moved (or would, or is stale) per file, and the uv.lock files it affects."""
    doc = summary(result)
    short = doc["sha"][:12]
    verb = {"write": "moved", "dry-run": "would move", "check": "stale"}[doc["mode"]]
    lines = [f"pin-bump {doc['repo']} → {short} ({doc['mode']})"]
    rows = _file_rows(doc["files"])
    if rows:
        lines.append(render_table(PIN_COLUMNS, rows, width=width).rstrip("\n"))
    total = sum(doc["from_commits"].values())
    if total:
        parts = ", ".join(f"{c[:12]} ({n})" for c, n in doc["from_commits"].items())
        lines.append(f"{total} pin(s) in {len(doc['files'])} file(s) {verb}, from: {parts}")
    elif not doc["cannot_move"]:
        lines.append(f"all {doc['pins_found']} pin(s) already at {short}; nothing to change")
    elif doc["pins_found"]:
        lines.append(f"{doc['pins_found']} pin(s) it can move already at {short}")
    if doc["cannot_move"]:
        # Each is named on stderr as it is found ("cannot move: FILE:LINE: ...").
        where = ", ".join(f"{u['path']}:{u['line']}" for u in doc["cannot_move"])
        lines.append(f"{len(doc['cannot_move'])} pin(s) it cannot move, left as they are: {where}")
    state = {"write": "stale", "dry-run": "would go stale", "check": "would go stale"}
    for lock in doc["stale_locks"]:
        relocked = bool(doc["locked"]) and doc["mode"] == "write"
        lines.append(f"uv.lock {'re-locked' if relocked else state[doc['mode']]}: {lock}")
    return "\n".join(lines) + "\n"


# The style of each diff line, by its start (the command line colours a diff on a terminal).
DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def table_parts(result: BumpResult, width: int | None = None) -> tuple[str, str]:
    """The table output in two parts: the diff (empty when not shown) and the summary."""
    return result.diff(OutputFormat.table) or "", summary_text(result, width)


def _table(result: BumpResult, width: int | None) -> str:
    return "".join(table_parts(result, width))


def _json(result: BumpResult, width: int | None = None) -> str:
    doc, diff = summary(result), result.diff(OutputFormat.json)
    return json.dumps(doc if diff is None else {**doc, "diff": diff}, indent=2) + "\n"


RENDERERS: Renderers = {
    BumpResult: {
        OutputFormat.table: _table,
        OutputFormat.json: _json,
        # Only the patch on stdout (`> bump.patch`, then `git apply bump.patch`); the command
        # says the summary on stderr, for the person.
        OutputFormat.diff: lambda result, _: result.diff(OutputFormat.diff) or "",
    }
}
