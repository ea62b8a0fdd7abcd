"""`elastic-audit pin-bump`: move every pin of the fork in a monorepo to one verified commit."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from forensics.cli import OutputFormat, app, check_output, default_output, output_option
from forensics.errors import ElasticAuditError, UsageError
from forensics.formats.table import Column, render_table, terminal_width
from forensics.fsutil import FileSet
from forensics.pinbump.github import CommitVerification, GitHubClient
from forensics.pinbump.lock import LockRun, find_uv, lock_projects
from forensics.pinbump.patterns import DEFAULT_REPO, normalize_repo, normalize_sha
from forensics.pinbump.plan import BumpPlan, apply_plan, plan_bump
from forensics.progress import spinner

EXAMPLES = """\
Examples:

  # show the diff (commit verified on GitHub first); write nothing
  elastic-audit pin-bump 3f2c1e0d9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e --dry-run

  # the same diff as a patch file, for review or `git apply bump.patch`
  elastic-audit pin-bump 3f2c1e0d9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e --dry-run -o diff > bump.patch

  # CI gate: exit 1 if any pin of the fork is not at the approved commit
  elastic-audit pin-bump 3f2c1e0d9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e --check

  # only the plugin; refuse a commit without the fix; re-lock uv projects
  elastic-audit pin-bump 3f2c1e0d9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e \\
      --package flytekitplugins-kfpytorch --require-fix --lock

Environment: GITHUB_API_URL (default https://api.github.com), GITHUB_TOKEN.

Exit codes: 0 done or nothing to change; 1 --check found stale pins;
2 refused (bad SHA, unverified commit, unparseable file), nothing written.
"""


PIN_BUMP_FORMATS = (OutputFormat.table, OutputFormat.json, OutputFormat.diff)


class CommitRefused(ElasticAuditError):
    """The commit is genuine but unfit: its plugin source does not carry the fix (exit 2)."""

    exit_code = 2


def _log(message: str) -> None:
    typer.echo(f"elastic-audit: {message}", err=True)


def _git_toplevel() -> Path:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise UsageError("git is not installed; pass --root DIR") from None
    if proc.returncode != 0:
        raise UsageError("not inside a git repository; pass --root DIR")
    return Path(proc.stdout.strip())


def _require_fix(client: GitHubClient, sha: str) -> dict[str, str]:
    """Download the source at `sha` and refuse it unless the plugin carries the fix."""
    try:
        from forensics.plugin_fix.check import check_source
    except ImportError as e:
        raise UsageError(
            f"--require-fix is unavailable: forensics.plugin_fix missing ({e})"
        ) from None
    with tempfile.TemporaryDirectory(prefix="elastic-audit-src-") as tmp:
        source = client.download_tarball(sha, Path(tmp))
        result = check_source(source)
    status, reason = str(result.status), str(result.reason)
    if status != "fixed":
        raise CommitRefused(
            f"commit {sha} does not carry the plugin fix ({status}: {reason}); refusing"
        )
    return {"status": status, "reason": reason}


# --------------------------------------------------------------------------- rendering


def _summary(
    plan: BumpPlan,
    mode: str,
    verification: CommitVerification | None,
    fix: dict[str, str] | None,
    locked: list[LockRun],
) -> dict[str, Any]:
    return {
        "repo": plan.repo,
        "sha": plan.sha,
        "root": str(plan.root),
        "mode": mode,
        "written": mode == "write" and bool(plan.changes),
        "verified": None
        if verification is None
        else {"branch": verification.branch, "branches_checked": verification.branches_checked},
        "fix": fix,
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
        "stale_locks": [lock.relative_to(plan.root).as_posix() for lock in plan.stale_locks],
        "locked": [run.directory.relative_to(plan.root).as_posix() or "." for run in locked],
        "notices": [{"path": n.rel, "line": n.line, "message": n.message} for n in plan.notices],
    }


def _print_diff(diff: str) -> None:
    if not diff:
        return
    if not sys.stdout.isatty():
        sys.stdout.write(diff)
        sys.stdout.flush()
        return
    console = Console(soft_wrap=True, highlight=False)
    styles = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
    for line in diff.splitlines():
        style = next((s for prefix, s in styles if line.startswith(prefix)), "")
        console.print(Text(line, style=style))


PIN_COLUMNS = (Column("file"), Column("pins", align_right=True), Column("from commits", wrap=True))


def _summary_text(summary: dict[str, Any]) -> str:
    short = summary["sha"][:12]
    verb = {"write": "moved", "dry-run": "would move", "check": "stale"}[summary["mode"]]
    lines = [f"pin-bump {summary['repo']} → {short} ({summary['mode']})"]
    rows = []
    for f in summary["files"]:
        commits: dict[str, int] = {}
        for p in f["pins"]:
            commits[p["from"][:12]] = commits.get(p["from"][:12], 0) + 1
        rows.append(
            (f["path"], str(len(f["pins"])), ", ".join(f"{c} ×{n}" for c, n in commits.items()))
        )
    if rows:
        lines.append(render_table(PIN_COLUMNS, rows, width=terminal_width()).rstrip("\n"))
    total = sum(summary["from_commits"].values())
    if total:
        parts = ", ".join(f"{c[:12]} ({n})" for c, n in summary["from_commits"].items())
        lines.append(f"{total} pin(s) in {len(summary['files'])} file(s) {verb}, from: {parts}")
    else:
        lines.append(f"all {summary['pins_found']} pin(s) already at {short}; nothing to change")
    state = {"write": "stale", "dry-run": "would go stale", "check": "would go stale"}
    for lock in summary["stale_locks"]:
        relocked = bool(summary["locked"]) and summary["mode"] == "write"
        lines.append(f"uv.lock {'re-locked' if relocked else state[summary['mode']]}: {lock}")
    return "\n".join(lines) + "\n"


def _render(summary: dict[str, Any], fmt: OutputFormat, diff: str | None) -> None:
    if fmt is OutputFormat.json:
        if diff is not None:
            summary = {**summary, "diff": diff}
        typer.echo(json.dumps(summary, indent=2))
        return
    if fmt is OutputFormat.diff:
        # Only the patch on stdout (`> bump.patch`, then `git apply bump.patch`); the summary
        # is for the person, on stderr.
        sys.stdout.write(diff or "")
        sys.stdout.flush()
        sys.stderr.write(_summary_text(summary))
        return
    if diff is not None:
        _print_diff(diff)
    sys.stdout.write(_summary_text(summary))


# --------------------------------------------------------------------------- command


@app.command("pin-bump", epilog=EXAMPLES)
def pin_bump(
    sha: Annotated[str, typer.Argument(metavar="SHA", help="The fork's commit: 40 hex digits.")],
    root: Annotated[
        Path | None,
        typer.Option(help="Tree to scan (default: git top level of the current directory)."),
    ] = None,
    repo: Annotated[
        str, typer.Option(metavar="OWNER/NAME", help="Fork whose pins move.")
    ] = DEFAULT_REPO,
    package: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME", help="Move only these packages (repeatable)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show the unified diff (alone with -o diff); write nothing."
        ),
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if any pin is not at SHA (CI).")
    ] = False,
    no_verify: Annotated[
        bool,
        typer.Option("--no-verify", help="Skip confirming the commit is on a branch of the fork."),
    ] = False,
    require_fix: Annotated[
        bool,
        typer.Option("--require-fix", help="Refuse unless the plugin source at SHA has the fix."),
    ] = False,
    lock: Annotated[
        bool, typer.Option("--lock", help="Run `uv lock` where a uv.lock went stale.")
    ] = False,
    output: str | None = output_option(
        *PIN_BUMP_FORMATS,
        help="table (default on a terminal), json (default when piped), or diff: the "
        "plain unified diff alone, for `git apply` (summary on stderr).",
    ),
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No spinner on stderr.")
    ] = False,
) -> None:
    """Rewrite every direct-URL pin of the fork under --root to one verified commit.

    flytekit and every plugin from the fork move together unless --package narrows it. Only
    the commit in each URL changes, byte for byte; all files are written or none.
    """
    if dry_run and check:
        raise UsageError("--dry-run and --check cannot be combined")
    if lock and (dry_run or check):
        raise UsageError(
            "--lock writes uv.lock files; it cannot be combined with --dry-run/--check"
        )
    sha = normalize_sha(sha)
    repo = normalize_repo(repo)
    fmt = check_output(default_output(output), PIN_BUMP_FORMATS)
    uv = find_uv() if lock else None
    if lock and uv is None:
        raise UsageError("--lock needs `uv` on PATH (pip install uv)")
    mode = "check" if check else "dry-run" if dry_run else "write"
    tree = (root or _git_toplevel()).resolve()

    plan = plan_bump(tree, sha, repo=repo, packages=package or ())
    for notice in plan.notices:
        _log(f"note: {notice.rel}:{notice.line}: {notice.message}")
    if not plan.pins:
        # Not "all 0 pins already at SHA": a --repo typo or the wrong --root must not pass a CI gate.
        raise UsageError(
            f"no pin of {repo} under {tree}: nothing to bump (check --repo and --root; a pin "
            f"looks like `name @ https://github.com/{repo}/archive/<sha>.tar.gz`)"
        )

    verification = None
    fix = None
    if not no_verify or require_fix:
        client = GitHubClient.from_env(repo)
        try:
            if not no_verify:
                with spinner(f"verifying {sha[:12]} on {repo}", enabled=not no_progress):
                    verification = client.verify_commit(sha)
                _log(f"verified: {sha} is on branch {verification.branch!r} of {repo}")
            if require_fix:
                with spinner(f"checking the plugin source at {sha[:12]}", enabled=not no_progress):
                    fix = _require_fix(client, sha)
                _log(f"fix present at {sha}: {fix['reason']}")
        finally:
            client.close()

    locked: list[LockRun] = []
    if mode == "write" and plan.changes:
        applied: FileSet = apply_plan(plan)
        if lock and plan.stale_locks:
            assert uv is not None
            with spinner("uv lock", enabled=not no_progress):
                locked = lock_projects(plan.stale_locks, applied, uv=uv)
    summary = _summary(plan, mode, verification, fix, locked)
    if check:
        # In check mode the files listed are the stale ones (nothing moves).
        _render(summary, fmt, plan.diff() if fmt is OutputFormat.diff else None)
        raise typer.Exit(1 if plan.stale_pins else 0)
    _render(summary, fmt, plan.diff() if dry_run or fmt is OutputFormat.diff else None)
    if mode == "write" and plan.stale_locks and not locked:
        stale = ", ".join(summary["stale_locks"])
        _log(f"uv.lock now stale: {stale} (re-run with --lock, or run `uv lock` there)")
    raise typer.Exit(0)
