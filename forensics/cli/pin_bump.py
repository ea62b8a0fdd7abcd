"""`elastic-audit pin-bump`: move every pin of the fork in a monorepo to one verified commit."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.common import emit
from forensics.cli.display import coloured_diff, render, terminal_width
from forensics.cli.options import check_output, default_output, output_option
from forensics.cli.progress import spinner
from forensics.errors import ElasticAuditError, UsageError
from forensics.formats import PIN_BUMP_FORMATS, OutputFormat
from forensics.formats.pinbump import BumpResult, summary_text, table_parts
from forensics.pinbump.github import CommitVerification, GitHubClient
from forensics.pinbump.lock import LockRun, find_uv, lock_projects
from forensics.pinbump.patterns import DEFAULT_REPO, normalize_repo, normalize_sha
from forensics.pinbump.plan import BumpPlan, apply_plan, plan_bump

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

Exit codes: 0 done or nothing to change; 1 --check found stale pins, or a pin of
the fork is in a form pin-bump cannot move (any mode); 2 refused (bad SHA,
unverified commit, unparseable file), nothing written.
"""


class CommitRefused(ElasticAuditError):
    """The commit is genuine but unfit: its plugin source does not carry the fix (exit 2)."""


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


def pin_bump(
    sha: Annotated[str, typer.Argument(metavar="SHA", help="The fork's commit: 40 hex digits.")],
    root: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Tree to scan (default: git top level of the current directory).",
        ),
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
    mode = _mode(dry_run, check, lock)
    sha = normalize_sha(sha)
    repo = normalize_repo(repo)
    fmt = check_output(default_output(output), PIN_BUMP_FORMATS)
    uv = find_uv() if lock else None
    if lock and uv is None:
        raise UsageError("--lock needs `uv` on PATH (pip install uv)")
    tree = (root or _git_toplevel()).resolve()

    plan = _plan(tree, sha, repo, package or ())
    verification, fix = _verify(plan, no_verify, require_fix, no_progress)
    locked: list[LockRun] = []
    if mode == "write" and plan.changes:
        applied = apply_plan(plan)
        if uv is not None and plan.stale_locks:
            with spinner("uv lock", enabled=not no_progress):
                locked = lock_projects(plan.stale_locks, applied, uv=uv)
    result = BumpResult(plan, mode, verification, fix, tuple(locked))
    if fmt is OutputFormat.table:
        diff, summary = table_parts(result, terminal_width())
        emit((coloured_diff(diff) if diff else "") + summary)
    else:
        emit(render(result, fmt))
    if fmt is OutputFormat.diff:
        # for the person; stdout holds only the patch
        sys.stderr.write(summary_text(result, terminal_width()))
    masked = [c.rel for c in plan.changes if c.masks_credentials]
    if masked and result.diff(fmt) is not None:
        _log(
            f"the diff masks credentials in URLs (***) in {', '.join(masked)}: those hunks do "
            "not apply as a patch; run pin-bump without --dry-run to write them"
        )
    if mode == "write" and plan.stale_locks and not locked:
        stale = ", ".join(result.stale_locks)
        _log(f"uv.lock now stale: {stale} (re-run with --lock, or run `uv lock` there)")
    if plan.unmovable:
        # A pin left on the old commit is never an all-clear, whatever the mode.
        _log(f"{len(plan.unmovable)} pin(s) of {repo} it cannot move: edit them by hand")
        raise typer.Exit(1)
    # In check mode the files listed are the stale ones (nothing moves).
    raise typer.Exit(1 if check and plan.stale_pins else 0)


def _mode(dry_run: bool, check: bool, lock: bool) -> str:
    """`check`, `dry-run` or `write`, refusing flags that contradict each other."""
    if dry_run and check:
        raise UsageError("--dry-run and --check cannot be combined")
    if lock and (dry_run or check):
        raise UsageError(
            "--lock writes uv.lock files; it cannot be combined with --dry-run/--check"
        )
    return "check" if check else "dry-run" if dry_run else "write"


def _plan(tree: Path, sha: str, repo: str, packages: list[str] | tuple[str, ...]) -> BumpPlan:
    plan = plan_bump(tree, sha, repo=repo, packages=packages)
    for notice in plan.notices:
        _log(f"note: {notice.rel}:{notice.line}: {notice.message}")
    for u in plan.unmovable:
        _log(f"cannot move: {u.rel}:{u.line}: {u.reason}: {u.text}")
    if not plan.pins and not plan.unmovable:
        # Not "all 0 pins already at SHA": a --repo typo or the wrong --root must not pass a CI gate.
        raise UsageError(
            f"no pin of {repo} under {tree}: nothing to bump (check --repo and --root; a pin "
            f"looks like `name @ https://github.com/{repo}/archive/<sha>.tar.gz`)"
        )
    return plan


def _verify(
    plan: BumpPlan, no_verify: bool, require_fix: bool, no_progress: bool
) -> tuple[CommitVerification | None, dict[str, str] | None]:
    """Confirm the commit is on a branch of the fork, and (--require-fix) that it has the fix."""
    sha, repo = plan.sha, plan.repo
    verification = None
    fix = None
    if no_verify and not require_fix:
        return verification, fix
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
    return verification, fix
