"""A terminal table (rich), one row per finding, fitting 100 columns, with a summary line."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from forensics.formats import coverage_line, plain_text, short_time
from forensics.model import Checkpoint, Finding, Report


def _checkpoint(ck: Checkpoint) -> str:
    if ck.state == "present":
        newest = f"\nnewest {ck.latest:%m-%d %H:%M}" if ck.latest else ""
        return f"present, {ck.objects} object(s){newest}"
    if ck.state == "unknown":
        return "unknown location" if ck.uri is None else f"unknown: {ck.reason}"
    return "EMPTY"


def _when(f: Finding) -> tuple[str, str]:
    """Signal time and how long after it Flyte said SUCCEEDED (the lie, in seconds)."""
    if f.signal is None:
        return "—", f"ended\n{f.succeeded_at:%m-%d %H:%M}" if f.succeeded_at else "—"
    sig = f"{f.signal.signal}\n{f.signal.at:%m-%d %H:%M:%S}"
    if f.succeeded_at is None:
        return sig, "—"
    return sig, f"+{int((f.succeeded_at - f.signal.at).total_seconds())}s"


def render(report: Report, *, width: int = 100) -> str:
    def draw(console: Console) -> None:
        w = report.window
        console.print(f"Window {short_time(w.start)} → {short_time(w.end)} (end exclusive)")
        if report.findings:
            table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
            table.add_column("verdict", no_wrap=True)
            table.add_column("execution", overflow="fold", min_width=20, max_width=28)
            table.add_column("node", no_wrap=True)
            table.add_column("signal (UTC)", no_wrap=True)
            table.add_column("success", no_wrap=True)
            table.add_column("checkpoint", overflow="fold", min_width=16)
            for f in report.findings:
                ex = f.attempt.execution
                sig, ok = _when(f)
                ck = _checkpoint(f.checkpoint)
                if f.relaunched_as:
                    ck += f"\nrelaunched: {f.relaunched_as.name}"
                table.add_row(
                    f.verdict,
                    f"{ex.project}/{ex.domain}\n{ex.name}",
                    f"{f.attempt.node_id}/{f.attempt.attempt}",
                    sig,
                    ok,
                    ck,
                )
            console.print(table)
            for f in report.findings:
                if f.parent is not None:
                    console.print(
                        f"CHILD {f.attempt.execution} of {f.parent}: relaunching it alone will "
                        "not re-run the parent's later steps (relaunch --parent)"
                    )
        else:
            console.print("No affected or suspected attempts.")
        for g in report.gaps:
            console.print(f"GAP {g.source} {short_time(g.start)} → {short_time(g.end)}: {g.error}")
        for p in report.pending:
            console.print(
                f"PENDING {p.attempt} ({p.phase}): {p.signal.signal} at "
                f"{short_time(p.signal.at)} in pod {p.signal.pod}; rescan once it ends"
            )
        for u in report.unresolved:
            console.print(f"UNRESOLVED pod {u.signal.namespace}/{u.signal.pod}: {u.reason}")
        console.print(coverage_line(report))
        cleared = report.summary.cleared
        if cleared:
            console.print("Cleared: " + ", ".join(f"{k} {v}" for k, v in sorted(cleared.items())))

    return plain_text(draw, width=width)
