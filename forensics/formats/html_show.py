"""`show EXECUTION -o html`: one execution's timeline as the incident page draws it, with every
evidence line (escaped: log lines are untrusted input)."""

from __future__ import annotations

from datetime import datetime

from forensics.formats.html import attempt_kind, axis, document, gap_list, marks_text, when
from forensics.formats.html_style import LEGEND
from forensics.formats.svg import Bar, Mark, Scale, esc, lane
from forensics.formats.text import checkpoint_summary, short_time
from forensics.timeline import AttemptVerdict, Timeline

KINDS = {"affected": "affected", "suspected": "suspected"}


def _kind(v: AttemptVerdict) -> str:
    return KINDS.get(v.verdict) or attempt_kind(v.attempt)


def _row(scale: Scale, v: AttemptVerdict, end_default: datetime) -> str:
    a = v.attempt
    tag = f"{a.ref.node_id}/{a.ref.attempt}"
    kind = _kind(v)
    title = f"{tag}: {a.phase} ({v.verdict}), {short_time(a.started_at)} – {short_time(a.ended_at)}"
    marks = []
    if v.signal is not None:
        marks.append(Mark(v.signal.at, "signal", f"death signal {short_time(v.signal.at)}"))
    if v.verdict in KINDS and a.ended_at:
        marks.append(Mark(a.ended_at, "false-success", f"false SUCCESS {short_time(a.ended_at)}"))
    if v.checkpoint is not None and v.checkpoint.latest is not None:
        at = v.checkpoint.latest
        marks.append(Mark(at, "checkpoint", f"checkpoint write {short_time(at)}"))
    bars = []
    if a.started_at is not None:
        attrs = (("data-attempt", tag), ("data-verdict", kind))
        bars.append(Bar(a.started_at, a.ended_at or end_default, kind, title, attrs))
    label = f"{a.ref.node_id} · attempt {a.ref.attempt} · {a.phase} · {v.verdict}"
    if v.reason:
        label += f" ({v.reason})"
    if v.checkpoint is not None:
        label += f" · checkpoint {checkpoint_summary(v.checkpoint)}"
    label += marks_text([m for m in marks if m.kind != "checkpoint"])
    return (
        f'<div class="row"><p class="label">{esc(label)}</p>{lane(scale, bars, marks, title)}</div>'
    )


def render_timeline_page(tl: Timeline) -> str:
    """The page of one execution (docs/report.md, "The incident page")."""
    ex = tl.execution
    times = [e.at for e in tl.events]
    times += [t for v in tl.attempts for t in (v.attempt.started_at, v.attempt.ended_at) if t]
    times += [t for t in (ex.created_at, ex.updated_at) if t]
    start, end = min(times), max(times)
    scale = Scale(start, end)
    rows = "".join(_row(scale, v, end) for v in tl.attempts)
    events = "".join(
        f'<li><span class="meta">{when(e.at)} · {esc(e.source)}'
        f"{' · ' + esc(e.attempt) if e.attempt else ''}</span>{esc(e.text)}</li>"
        for e in tl.events
    )
    state = "complete" if tl.complete else f"INCOMPLETE: {len(tl.gaps)} gap(s)"
    title = f"Execution {ex.ref}"
    return document(
        title,
        [
            f"<header><h1>{esc(title)}</h1><p>{esc(ex.phase)} · verdict "
            f"<b>{esc(tl.verdict)}</b> · evidence {esc(state)}</p></header>",
            gap_list(tl.gaps),
            f'<section class="execution" data-execution="{esc(ex.ref)}" '
            f'data-attempts="{len(tl.attempts)}"><h2>Attempts</h2>{LEGEND}{axis(start, end)}{rows}</section>',
            f'<section id="evidence"><h2>Evidence, oldest first</h2><ul class="events">{events}</ul>'
            "</section>",
        ],
    )
