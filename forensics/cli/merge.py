"""`elastic-audit merge REPORT...`: one report from the JSON reports of scans over parts of a window."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from forensics.cli import exits
from forensics.cli.common import emit
from forensics.cli.display import render
from forensics.cli.options import check_output, default_output, flag_option, output_option
from forensics.errors import UsageError
from forensics.formats import SCAN_FORMATS, OutputFormat
from forensics.merge import merge_documents
from forensics.model import Report

EXAMPLES = """
Examples:

  elastic-audit scan --since 2026-01-01 --until 2026-02-01 -o json > jan.json
  elastic-audit scan --since 2026-02-01 --until 2026-03-01 -o json > feb.json
  elastic-audit merge jan.json feb.json > q1-so-far.json
  elastic-audit merge q1-so-far.json -o html > q1.html

Reports are `scan -o json` documents (docs/report.md); `-` reads one from stdin. The merged report
prints as a scan of the whole window would, in any of scan's formats; one report alone prints as
it is, so `merge FILE -o html|markdown|table` renders a saved report (docs/commands.md, "merge").
Reports of one --project/--domain scope merge, and so do reports whose scopes split one
scope into disjoint projects or domains (a backfill's slices); any other mix is refused.
Exit codes: as scan's — 0 complete and nothing found, 1 findings, pending or unresolved,
3 incomplete (a report's gaps, or a stretch of the window no report covers), 2 bad input.
"""


def _read(path: str) -> dict:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"report {path}: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"report {path}: not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"report {path}: not an elastic-audit scan report")
    return doc


def merge(
    reports: list[str] = typer.Argument(
        ..., metavar="REPORT", help="Scan reports (JSON files; `-` for stdin)."
    ),
    output: str | None = output_option(*SCAN_FORMATS),
    exit_zero: bool = flag_option(
        "--exit-zero", help="Exit 0 instead of 1 when findings exist (3 for incomplete stays)."
    ),
) -> None:
    """One report from the reports of scans over parts of a window: findings once each,
    summaries added up, gaps kept, the stretches no report covers made gaps; printed in any of
    scan's formats (one report alone: that report, rendered)."""
    fmt = check_output(default_output(output), SCAN_FORMATS)
    docs = [_read(p) for p in reports]
    try:
        merged = merge_documents(docs)
        text = (
            json.dumps(merged.as_dict(), indent=2) + "\n"
            if fmt is OutputFormat.json
            else _render(merged, fmt)
        )
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"merge: a report lacks what docs/report.md requires ({e})") from None
    emit(text)
    raise typer.Exit(
        exits.for_result(
            complete=merged.complete,
            to_act_on=bool(merged.findings or merged.pending or merged.unresolved),
            exit_zero=exit_zero,
        )
    )


def _render(merged: Report, fmt: OutputFormat) -> str:
    """The merged report in `fmt`; for `html` the incident page of a saved report (no source
    read: forensics.page.saved_page)."""
    from forensics.page import saved_page

    return render(saved_page(merged) if fmt is OutputFormat.html else merged, fmt)
