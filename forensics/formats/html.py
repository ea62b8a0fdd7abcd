"""The incident page: `scan -o html` / `--report-html FILE`, and `show EXECUTION -o html`.

One self-contained file: no script, no network (a Content-Security-Policy forbids both), the
CSS inline, every drawing inline SVG from `formats/svg.py`. It follows the reader's light or
dark scheme and prints in light. Every text that comes from outside — log lines, names, errors,
links — is escaped; a link is kept only when it is http(s). docs/report.md, "The incident page".

One function per section of the page, in the order the page reads (`show`'s page and the style
sheet live beside it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlparse

from forensics.cost import known_sum
from forensics.detect import FAILED_PHASES
from forensics.formats import OutputFormat, Renderers
from forensics.formats.html_style import CSS, LEGEND
from forensics.formats.markdown import relaunch_commands
from forensics.formats.svg import Bar, Mark, Scale, counts, esc, lane
from forensics.formats.text import checkpoint_summary, coverage_line, scope_line, short_time
from forensics.model import AttemptRecord, Cost, Finding, Gap, Report, Window
from forensics.page import ExecutionView, IncidentPage

HOUR = timedelta(hours=1)


def document(title: str, body: Iterable[str]) -> str:
    """The whole file: head (CSP, viewport, style) and `body`."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">"
        '<meta name="color-scheme" content="light dark">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body><main>\n"
        + "\n".join(body)
        + "\n</main></body></html>\n"
    )


def link(url: str | None, text: str) -> str:
    """`text` linked to `url` when it is an http(s) URL, plain text otherwise."""
    if url and urlparse(url).scheme in ("http", "https"):
        return f'<a href="{esc(url)}" rel="noreferrer">{esc(text)}</a>'
    return esc(text)


def when(t: datetime | None) -> str:
    return f'<time datetime="{esc(t.isoformat())}">{esc(short_time(t))}</time>' if t else "—"


def hours(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.1f}"


def axis(start: datetime, end: datetime) -> str:
    mid = start + (end - start) / 2
    return (
        f'<div class="axis"><span>{when(start)}</span><span class="mid">{when(mid)}</span>'
        f"<span>{when(end)}</span></div>"
    )


def _gaps_lane(window: Window, gaps: Sequence[Gap]) -> str:
    bars = [Bar(window.start, window.end, "read", "read")]
    bars += [
        Bar(g.start or window.start, g.end or window.end, "gap", f"{g.source}: {g.error}")
        for g in gaps
    ]
    return lane(Scale(window.start, window.end), bars, [], "coverage: gaps in red")


def gap_list(gaps: Sequence[Gap]) -> str:
    items = "".join(
        f"<li><b>{esc(g.source)}</b> {when(g.start)} – {when(g.end)}: {esc(g.error)}</li>"
        for g in gaps
    )
    return f'<ul class="gaps">{items}</ul>' if items else ""


def coverage(report: Report, page_gaps: Sequence[Gap]) -> str:
    w = report.window
    state = "complete" if report.complete else f"INCOMPLETE: {len(report.gaps)} gap(s)"
    extra = ""
    if page_gaps:
        extra = (
            f'<p class="warn">{len(page_gaps)} read(s) for the timelines below failed: what they '
            "would show is missing there.</p>" + gap_list(page_gaps)
        )
    return (
        f'<section id="coverage"><h2>Window and coverage</h2>'
        f"<p>{when(w.start)} to {when(w.end)} (end exclusive) — coverage {esc(state)}.</p>"
        f"{_scope(report)}{axis(w.start, w.end)}{_gaps_lane(w, report.gaps)}"
        f"{gap_list(report.gaps)}{extra}</section>"
    )


def _scope(report: Report) -> str:
    """The scope of a narrowed report (docs/report.md `scope`), so that no reader takes it for
    all projects and domains."""
    line = scope_line(report)
    return f'<p class="warn scope">{esc(line)}</p>' if line else ""


def summary(report: Report) -> str:
    s = report.summary
    rows = [
        ("affected", s.affected),
        ("suspected", s.suspected),
        ("not affected", s.not_affected),
        ("pending", s.pending),
        ("attempts examined", s.attempts_examined),
        ("unreadable signal lines", s.unparsed_lines),
    ]
    rows += [(f"cleared: {k}", v) for k, v in sorted(s.cleared.items())]
    cells = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    example = ""
    if s.unparsed_example is not None:
        example = f"<p>First unreadable line: <code>{esc(s.unparsed_example.line)}</code></p>"
    return (
        f'<section id="summary"><h2>Summary</h2><p>{esc(coverage_line(report))}.</p>'
        f'<table class="counts">{cells}</table>{example}</section>'
    )


def _hourly_counts(
    times: Iterable[datetime], window: Window
) -> list[tuple[datetime, datetime, int]]:
    start = window.start.replace(minute=0, second=0, microsecond=0)
    n = Counter(int((t - start) / HOUR) for t in times if window.start <= t < window.end)
    return [(start + k * HOUR, start + (k + 1) * HOUR, c) for k, c in sorted(n.items())]


def hourly(page: IncidentPage) -> str:
    r = page.report
    w = r.window
    silent = [f.signal.at if f.signal else f.succeeded_at for f in r.findings]
    series = (
        (
            "signals",
            "Death signals",
            [*r.activity.signals.values(), *(u.signal.at for u in r.unresolved)],
        ),
        ("silent", "Silent greens (affected and suspected)", [t for t in silent if t]),
        ("retried", "Signalled attempts that failed and were retried", r.activity.retried),
        ("relaunches", "Relaunches of affected executions", page.relaunches),
    )
    if page.saved:  # the JSON keeps findings only: those lanes would read as zero
        series = tuple(s for s in series if s[0] == "silent")
    scale = Scale(w.start, w.end)
    out = ['<section id="hourly"><h2>Hour by hour</h2>', axis(w.start, w.end)]
    if page.saved:
        out.append(f'<p class="warn">{esc(SAVED_HOURLY)}</p>')
    for kind, title, times in series:
        per_hour = _hourly_counts(times, w)
        total = sum(c for _, _, c in per_hour)
        peak = max((c for _, _, c in per_hour), default=0)
        out.append(
            f'<div class="series" data-series="{kind}"><p><span class="swatch {kind}"></span>'
            f"{esc(title)}: {total} in the window, at most {peak} in one hour</p>"
            f"{counts(scale, per_hour, kind, title)}</div>"
        )
    return "".join(out) + "</section>"


def _cost_rows(buckets: dict[str, dict[str, Any]]) -> str:
    rows = []
    for key, b in buckets.items():
        rows.append(
            f"<tr><th>{esc(key)}</th><td>{b['findings']}</td><td>{hours(known_sum(b, 'gpu_hours'))}</td>"
            f"<td>{hours(known_sum(b, 'cpu_hours'))}</td><td>{b['gpu_hours_unknown']} / {b['cpu_hours_unknown']}</td></tr>"
        )
    return "".join(rows)


def cost(report: Report) -> str:
    t: dict[str, Any] = dict(report.summary.cost or {})
    if not t:
        return ""
    head = "<tr><th></th><th>findings</th><th>GPU-hours</th><th>CPU-hours</th><th>unknown (GPU / CPU)</th></tr>"
    unknown = int(t["gpu_hours_unknown"])
    note = ""
    if unknown and known_sum(t, "gpu_hours") is None:
        note = " No finding's GPU-hours are known: the loss is unknown, not zero."
    elif unknown:
        note = (
            f" {unknown} finding(s) with unknown GPU-hours are not in the sum: it is a lower bound."
        )
    tables = ""
    for key, title in (("by_project", "Per project"), ("by_day", "Per day (UTC)")):
        tables += f'<h3>{title}</h3><table class="cost">{head}{_cost_rows(t[key])}</table>'
    return (
        f'<section id="cost"><h2>What it cost</h2><p>GPU-hours lost: '
        f'<b class="total-gpu">{hours(known_sum(t, "gpu_hours"))}</b>; CPU-hours lost: '
        f'<b class="total-cpu">{hours(known_sum(t, "cpu_hours"))}</b> — each finding\'s run time times the '
        f"GPUs and CPUs its task template requests.{esc(note)}</p>{tables}</section>"
    )


def _cost_text(c: Cost | None) -> str:
    if c is None:
        return "not priced"
    parts = [f"{hours(c.gpu_hours)} GPU-hours, {hours(c.cpu_hours)} CPU-hours"]
    if c.run_seconds is not None:
        parts.append(f"run {c.run_seconds / 3600:,.2f} h × {c.pods or '?'} pod(s)")
    if c.accelerator:
        parts.append(c.accelerator)
    if c.checkpoint_age_seconds is not None:
        parts.append(
            f"newest checkpoint {c.checkpoint_age_seconds / 60:,.1f} min old at the signal"
        )
    text = "; ".join(parts)
    if c.source:
        text += f" (from {c.source})"
    if c.unknown:
        text += " — unknown: " + "; ".join(c.unknown)
    return esc(text)


def finding_card(f: Finding) -> str:
    a = f.attempt
    rows = [
        (
            "signal",
            f"{esc(f.signal.signal)} at {when(f.signal.at)} in pod <code>{esc(f.signal.pod)}</code>"
            if f.signal
            else "none in Loki (logs missing or expired)",
        ),
    ]
    if f.disruption is not None:
        d = f.disruption
        by = f" by {esc(d.initiator)}" if d.initiator else ""
        rows.append(
            (
                "disruption",
                f"{esc(d.reason)}{by} at {when(d.at)} ({esc(d.source)}) for pod "
                f"<code>{esc(d.pod or '?')}</code>: {esc(d.text)}",
            )
        )
    if f.cause:
        rows.append(("cause", esc(f.cause)))
    rows += [
        ("false SUCCESS", when(f.succeeded_at)),
        ("outputs.pb", "missing" if f.outputs_written is False else "unknown"),
        (
            "checkpoint",
            esc(checkpoint_summary(f.checkpoint))
            + (f" <code>{esc(f.checkpoint.uri)}</code>" if f.checkpoint.uri else ""),
        ),
        ("cost", _cost_text(f.cost)),
        (
            "links",
            " · ".join(
                x
                for x in (
                    link(f.links.get("flyte"), "Flyte console"),
                    link(f.links.get("logs"), "Grafana Explore"),
                )
                if "<a" in x
            )
            or "none configured",
        ),
    ]
    if f.relaunched_as:
        rows.append(("relaunched as", f"<code>{esc(f.relaunched_as)}</code>"))
    if f.parent:
        rows.append(("parent", f"<code>{esc(f.parent)}</code>"))
    rows += [("note", esc(n)) for n in f.evidence]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return (
        f'<article class="finding {esc(f.verdict)}" data-attempt="{esc(a)}"><h3>'
        f'<span class="verdict {esc(f.verdict)}">{esc(f.verdict)}</span> '
        f"<code>{esc(a.execution)}</code> {esc(a.node_id)}/{a.attempt}</h3><dl>{dl}</dl></article>"
    )


def findings(report: Report) -> str:
    cards = "".join(finding_card(f) for f in report.findings) or "<p>None.</p>"
    return f'<section id="findings"><h2>Findings</h2>{cards}</section>'


def attempt_kind(att: AttemptRecord) -> str:
    """A bar's class for an attempt that is no finding: its outcome as Admin records it."""
    if att.phase == "SUCCEEDED":
        return "ok"
    if att.phase in FAILED_PHASES:
        return "failed"
    return "running"


def _span(
    atts: Sequence[AttemptRecord], extra: Iterable[datetime | None]
) -> tuple[datetime, datetime]:
    times = [t for a in atts for t in (a.started_at, a.ended_at) if t] + [t for t in extra if t]
    start, end = min(times), max(times)
    return start, max(end, start + timedelta(minutes=1))


def _attempt_lane(
    scale: Scale,
    att: AttemptRecord,
    finding: Finding | None,
    signal_at: datetime | None,
    end: datetime,
    prefix: str = "",
    writes: Sequence[datetime] = (),
) -> str:
    kind = finding.verdict if finding else attempt_kind(att)
    tag = f"{att.ref.node_id}/{att.ref.attempt}"
    title = f"{prefix}{tag}: {att.phase} ({kind}), {short_time(att.started_at)} – {short_time(att.ended_at)}"
    marks = []
    if signal_at is not None:
        marks.append(Mark(signal_at, "signal", f"death signal {short_time(signal_at)}"))
    if finding is not None and finding.disruption is not None:
        d = finding.disruption  # the event that proves the finding, or backs its signal
        marks.append(Mark(d.at, "disruption", f"{d.reason} event {short_time(d.at)}"))
        marks.sort(key=lambda m: m.at)
    if finding is not None:
        if finding.succeeded_at:
            marks.append(
                Mark(
                    finding.succeeded_at,
                    "false-success",
                    f"false SUCCESS {short_time(finding.succeeded_at)}",
                )
            )
        latest = finding.checkpoint.latest
        for at in writes or ([latest] if latest else []):
            marks.append(Mark(at, "checkpoint", f"checkpoint write {short_time(at)}"))
    bars = []
    if att.started_at is not None:
        attrs = (("data-attempt", f"{prefix}{tag}"), ("data-verdict", kind))
        bars.append(Bar(att.started_at, att.ended_at or end, kind, title, attrs))
    label = f"{prefix}{att.ref.node_id} · attempt {att.ref.attempt} · {att.phase} · {kind}"
    label += marks_text(marks)
    return (
        f'<div class="row"><p class="label">{esc(label)}</p>{lane(scale, bars, marks, title)}</div>'
    )


def marks_text(marks: Sequence[Mark]) -> str:
    """The markers in words, since they may sit seconds apart on an hours-long bar: the first
    at its time, the others relative to it; checkpoint writes counted, the newest placed."""
    events = [m for m in marks if m.kind != "checkpoint"]
    writes = [m.at for m in marks if m.kind == "checkpoint"]
    if not events and not writes:
        return ""
    first = events[0].at if events else max(writes)
    words = {"signal": "death signal", "false-success": "false SUCCESS"}
    parts = []
    for m in events:
        at = short_time(m.at) if m is events[0] else f"{(m.at - first).total_seconds():+,.0f} s"
        # a disruption says its reason: "Disrupted event"
        word = m.title.rsplit(" ", 1)[0] if m.kind == "disruption" else words.get(m.kind, m.kind)
        parts.append(f"{word} {at}")
    if writes:
        newest = max(writes)
        at = f"{(newest - first).total_seconds():+,.0f} s" if events else short_time(newest)
        parts.append(f"{len(writes)} checkpoint write(s), the newest {at}")
    return " · " + " · ".join(parts)


def timeline(view: ExecutionView, report: Report) -> str:
    by_ref = {f.attempt: f for f in view.findings}
    signals = report.activity.signals
    ex, again = view.execution, view.relaunch
    extra = [ex.created_at if ex else None, ex.updated_at if ex else None]
    extra += [f.disruption.at for f in view.findings if f.disruption]
    extra += [f.signal.at for f in view.findings if f.signal] + [
        f.succeeded_at for f in view.findings
    ]
    if again is not None:
        extra += [again.created_at, again.updated_at]
    start, end = _span([*view.attempts, *view.relaunch_attempts], extra)
    scale = Scale(start, end)
    console = view.findings[0].links.get("flyte")
    head = f"<h3>{link(console, str(view.ref))}</h3><p>{esc(ex.phase if ex else 'not read')}"
    head += f" · {len(view.attempts)} attempt(s)"
    rows = []
    for att in sorted(
        view.attempts, key=lambda a: (a.started_at or start, a.ref.node_id, a.ref.attempt)
    ):
        f = by_ref.get(att.ref)
        sig = f.signal.at if f and f.signal else signals.get(att.ref)
        writes = view.checkpoint_writes.get(att.ref, ())
        rows.append(_attempt_lane(scale, att, f, sig, end, writes=writes))
    if again is not None:
        head += f" · relaunched as <code>{esc(again.ref)}</code> ({esc(again.phase)}, created {when(again.created_at)})"
        for att in view.relaunch_attempts:
            rows.append(
                _attempt_lane(scale, att, None, signals.get(att.ref), end, prefix="relaunch ")
            )
    return (
        f'<section class="execution" data-execution="{esc(view.ref)}" '
        f'data-attempts="{len(view.attempts) + len(view.relaunch_attempts)}">{head}</p>'
        f"{axis(start, end)}{''.join(rows)}</section>"
    )


SAVED_HOURLY = (
    "Made from a saved report: death signals, retried attempts and relaunches per hour are "
    "not in it (a scan's own page draws them); only its silent greens are drawn."
)
SAVED_TIMELINES = (
    "Not drawn: this page was made from a saved report, and the executions' attempts are read "
    "from Flyte Admin only when a scan makes its page."
)


def timelines(page: IncidentPage) -> str:
    if page.saved:
        return (
            '<section id="timelines"><h2>Every attempt of each affected execution</h2>'
            f'<p class="warn">{esc(SAVED_TIMELINES)}</p></section>'
        )
    body = (
        "".join(timeline(v, page.report) for v in page.executions)
        or "<p>No affected execution.</p>"
    )
    return f'<section id="timelines"><h2>Every attempt of each affected execution</h2>{LEGEND}{body}</section>'


def relaunch_section(report: Report) -> str:
    cmds = relaunch_commands(report)
    if not cmds:
        return ""
    return (
        '<section id="relaunch"><h2>Relaunch</h2><p>Review, then run:</p>'
        f'<pre class="commands">{esc(chr(10).join(cmds))}</pre></section>'
    )


def render_page(page: IncidentPage) -> str:
    """The scan's incident page (module docstring)."""
    r = page.report
    title = f"Elastic silent successes {short_time(r.window.start)} – {short_time(r.window.end)}"
    return document(
        title,
        [
            f"<header><h1>{esc(title)}</h1><p>{esc(r.tool)}</p></header>",
            coverage(r, page.gaps),
            summary(r),
            cost(r),
            hourly(page),
            findings(r),
            timelines(page),
            relaunch_section(r),
        ],
    )


RENDERERS: Renderers = {IncidentPage: {OutputFormat.html: lambda page, _: render_page(page)}}
