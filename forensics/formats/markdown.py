"""An incident report in Markdown, ready to paste into a postmortem."""

from __future__ import annotations

from forensics.formats import checkpoint_summary, coverage_line, short_time
from forensics.model import Finding, Report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _timeline(f: Finding) -> list[str]:
    rows: list[tuple[object, str]] = []
    if f.signal:
        rows.append(
            (
                f.signal.at,
                f"{f.signal.signal} death signal in pod `{f.signal.namespace}/{f.signal.pod}`",
            )
        )
    if f.succeeded_at:
        rows.append((f.succeeded_at, "Flyte marks the attempt **SUCCEEDED**"))
    lines = [f"- {short_time(t)} — {text}" for t, text in sorted(rows, key=lambda r: r[0])]
    if f.outputs_written is None:
        lines.append("- `outputs.pb`: unknown (see the notes)")
    else:
        lines.append(f"- `outputs.pb`: {'written' if f.outputs_written else '**missing**'}")
    if f.parent is not None:
        lines.append(
            f"- child of `{f.parent.execution}` (node {f.parent.node_id}): relaunching this "
            "child alone will **not** re-run the parent's later steps"
        )
    ck = f.checkpoint
    where = f" at `{ck.uri}`" if ck.uri else ""
    lines.append(f"- checkpoint{where}: {checkpoint_summary(ck)}")
    if ck.written_after_signal:
        lines.append("- checkpoint objects were written after the signal")
    for note in f.evidence:
        lines.append(f"- note: {note}")
    if f.relaunched_as:
        lines.append(f"- already relaunched as `{f.relaunched_as}`")
    for name, url in f.links.items():
        lines.append(f"- [{name}]({url})")
    return lines


def render(report: Report, *, width: int = 100) -> str:
    w = report.window
    s = report.summary
    out = [
        "# Silently-green elastic attempts",
        "",
        f"- Window: {short_time(w.start)} → {short_time(w.end)} (end exclusive)",
        f"- Tool: {report.tool}",
        f"- Coverage: {'complete' if report.complete else '**INCOMPLETE**'}",
        f"- Result: {coverage_line(report)}",
        "",
    ]
    if report.gaps:
        out += [
            "## Gaps (parts of the window not read)",
            "",
            "| source | start | end | error |",
            "|---|---|---|---|",
        ]
        for g in report.gaps:
            out.append(
                f"| {g.source} | {short_time(g.start)} | {short_time(g.end)} | {_cell(g.error)} |"
            )
        out.append("")
    if report.unresolved:
        out += [
            "## Signalled Flyte pods that resolve to no attempt (configuration problem)",
            "",
            "| pod | signal (UTC) | why |",
            "|---|---|---|",
        ]
        for u in report.unresolved:
            out.append(
                f"| `{u.signal.namespace}/{u.signal.pod}` | {u.signal.signal} "
                f"{short_time(u.signal.at)} | {_cell(u.reason)} |"
            )
        out.append("")
    if report.pending:
        out += [
            "## Pending (signalled, not finished yet: rescan once they end)",
            "",
            "| execution | node/attempt | phase | signal (UTC) |",
            "|---|---|---|---|",
        ]
        for p in report.pending:
            out.append(
                f"| `{p.attempt.execution}` | {p.attempt.node_id}/{p.attempt.attempt} "
                f"| {p.phase} | {p.signal.signal} {short_time(p.signal.at)} |"
            )
        out.append("")
    out += [
        "## Counts",
        "",
        "| class | attempts |",
        "|---|---|",
        f"| affected | {s.affected} |",
        f"| suspected | {s.suspected} |",
    ]
    for k, v in sorted(s.cleared.items()):
        out.append(f"| cleared: {k} | {v} |")
    out.append("")
    if s.unparsed_lines:
        ex = s.unparsed_example
        out += [
            "## Lines Loki matched that could not be read",
            "",
            f"{s.unparsed_lines} line(s) matched the death-signal filter but the parser could not "
            "read them (an unknown log shipper envelope or line format, or a stream without the "
            "configured namespace/pod labels): their attempts may be missing or only suspected.",
            "",
        ]
        if ex is not None:
            where = ", ".join(f"{k}={v}" for k, v in ex.labels) or "no labels"
            out += [
                f"Earliest, {short_time(ex.at)} ({_cell(where)}):",
                "",
                "```",
                ex.line,
                "```",
                "",
            ]
    out += ["## Findings", ""]
    if not report.findings:
        out += ["None.", ""]
    else:
        out += [
            "| verdict | execution | node/attempt | signal (UTC) | succeeded (UTC) | checkpoint |",
            "|---|---|---|---|---|---|",
        ]
        for f in report.findings:
            sig = f"{f.signal.signal} {short_time(f.signal.at)}" if f.signal else "—"
            out.append(
                f"| {f.verdict} | `{f.attempt.execution}` | {f.attempt.node_id}/{f.attempt.attempt} "
                f"| {sig} | {short_time(f.succeeded_at)} | {_cell(checkpoint_summary(f.checkpoint))} |"
            )
        out.append("")
        for f in report.findings:
            out += [
                f"### `{f.attempt.execution}` {f.attempt.node_id}/{f.attempt.attempt} "
                f"({f.verdict})",
                "",
            ]
            out += _timeline(f)
            out.append("")
        # A child execution is relaunched through its parent (`--parent`), so that the
        # parent's later steps run again too.
        todo = sorted(
            {
                f"--parent {f.attempt.execution}" if f.parent else str(f.attempt.execution)
                for f in report.findings
                if not f.relaunched_as
            }
        )
        if todo:
            out += ["## Relaunch", "", "Review, then run:", "", "```sh"]
            out += [f"elastic-audit relaunch {ref}" for ref in todo]
            out += ["```", ""]
    return "\n".join(out)
