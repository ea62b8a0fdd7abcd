"""An incident report in Markdown, ready to paste into a postmortem."""

from __future__ import annotations

from forensics.formats.text import (
    checkpoint_summary,
    coverage_line,
    evidence_text,
    incomplete_headline,
    scope_line,
    short_time,
)
from forensics.model import AttemptRef, Finding, Report, SignalHit


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
    if f.disruption:
        d = f.disruption
        by = f" by {d.initiator}" if d.initiator else ""
        rows.append((d.at, f"Kubernetes `{d.reason}`{by} for pod `{d.namespace}/{d.pod}`"))
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
    for note in f.evidence:
        lines.append(f"- note: {note}")
    if f.relaunched_as:
        lines.append(f"- already relaunched as `{f.relaunched_as}`")
    for name, url in f.links.items():
        lines.append(f"- [{name}]({url})")
    return lines


def _head(report: Report) -> list[str]:
    w = report.window
    return [
        "# Silently-green elastic attempts",
        "",
        f"- Window: {short_time(w.start)} → {short_time(w.end)} (end exclusive)",
        *([f"- {scope}"] if (scope := scope_line(report)) else []),
        f"- Tool: {report.tool}",
        f"- Coverage: {'complete' if report.complete else '**' + incomplete_headline(report) + '**'}",
        f"- Result: {coverage_line(report)}",
        "",
    ]


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _section(title: str, header: tuple[str, ...], rows: list[tuple[object, ...]]) -> list[str]:
    """A `## title` and a table under `header`, or nothing without rows."""
    if not rows:
        return []
    rule = "|" + "---|" * len(header)
    return [f"## {title}", "", _row(*header), rule, *(_row(*r) for r in rows), ""]


def _gaps(report: Report) -> list[str]:
    rows = [(g.source, short_time(g.start), short_time(g.end), _cell(g.error)) for g in report.gaps]
    return _section(
        "Gaps (parts of the window not read)", ("source", "start", "end", "error"), rows
    )


def _unresolved(report: Report) -> list[str]:
    title = "Signalled Flyte pods that resolve to no attempt (configuration problem)"
    rows = [
        (f"`{u.signal.namespace}/{u.signal.pod}`", _signal(u.signal), _cell(u.reason))
        for u in report.unresolved
    ]
    return _section(title, ("pod", "signal (UTC)", "why"), rows)


def _pending(report: Report) -> list[str]:
    title = "Pending (signalled, not finished yet: rescan once they end)"
    rows = [
        (f"`{p.attempt.execution}`", _attempt(p.attempt), p.phase, _signal(p.signal))
        for p in report.pending
    ]
    return _section(title, ("execution", "node/attempt", "phase", "signal (UTC)"), rows)


def _counts(report: Report) -> list[str]:
    s = report.summary
    rows: list[tuple[object, ...]] = [("affected", s.affected), ("suspected", s.suspected)]
    rows += [(f"cleared: {k}", v) for k, v in sorted(s.cleared.items())]
    if set(s.by_disruption_reason) - {"none"}:
        rows += [
            (f"findings by disruption: {k}", v) for k, v in sorted(s.by_disruption_reason.items())
        ]
    return _section("Counts", ("class", "attempts"), rows)


def _signal(sig: SignalHit) -> str:
    return f"{sig.signal} {short_time(sig.at)}"


def _attempt(ref: AttemptRef) -> str:
    return f"{ref.node_id}/{ref.attempt}"


def _unparsed(report: Report) -> list[str]:
    s = report.summary
    if not s.unparsed_lines:
        return []
    out = [
        "## Lines Loki matched that could not be read",
        "",
        f"{s.unparsed_lines} line(s) matched the death-signal filter but the parser could not "
        "read them (an unknown log shipper envelope or line format, or a stream without the "
        "configured namespace/pod labels): their attempts may be missing or only suspected.",
        "",
    ]
    ex = s.unparsed_example
    if ex is not None:
        where = ", ".join(f"{k}={v}" for k, v in ex.labels) or "no labels"
        out += [f"Earliest, {short_time(ex.at)} ({_cell(where)}):", "", "```", ex.line, "```", ""]
    return out


def _finding_rows(report: Report) -> list[str]:
    return [
        _row(
            f.verdict,
            f"`{f.attempt.execution}`",
            _attempt(f.attempt),
            evidence_text(f),
            short_time(f.succeeded_at),
            _cell(checkpoint_summary(f.checkpoint)),
        )
        for f in report.findings
    ]


def relaunch_commands(report: Report) -> list[str]:
    """The `relaunch` command for each finding's execution not relaunched yet (also the
    incident page's). A child execution is relaunched through its parent (`--parent`), so
    that the parent's later steps run again too."""
    todo = sorted(
        {
            f"--parent {f.attempt.execution}" if f.parent else str(f.attempt.execution)
            for f in report.findings
            if not f.relaunched_as
        }
    )
    return [f"elastic-audit relaunch {ref}" for ref in todo]


def _relaunch(report: Report) -> list[str]:
    todo = relaunch_commands(report)
    if not todo:
        return []
    return [
        "## Relaunch",
        "",
        "Review, then run:",
        "",
        "```sh",
        *todo,
        "```",
        "",
    ]


def _findings(report: Report) -> list[str]:
    out = ["## Findings", ""]
    if not report.findings:
        return [*out, "None.", ""]
    out += [
        "| verdict | execution | node/attempt | signal (UTC) | succeeded (UTC) | checkpoint |",
        "|---|---|---|---|---|---|",
        *_finding_rows(report),
        "",
    ]
    for f in report.findings:
        out += [
            f"### `{f.attempt.execution}` {f.attempt.node_id}/{f.attempt.attempt} ({f.verdict})",
            "",
        ]
        out += _timeline(f)
        out.append("")
    return out + _relaunch(report)


def render(report: Report) -> str:
    """The report as Markdown: head, gaps, unresolved, pending, counts, unread lines, findings."""
    sections = (_head, _gaps, _unresolved, _pending, _counts, _unparsed, _findings)
    return "\n".join(line for section in sections for line in section(report))
