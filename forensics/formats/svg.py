"""Plain inline SVG for the incident page: time lanes (bars and markers) and hourly counts.

Every drawing is shapes only, on a time axis scaled to the lane's width
(`preserveAspectRatio="none"`): the text around it is HTML, so it wraps at any width instead of
shrinking with the drawing, and markers are lines whose stroke does not scale
(`vector-effect: non-scaling-stroke`). Each shape carries a `<title>` (the browser's tooltip)
and a class the page's CSS colours, light or dark. Every text is escaped here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

WIDTH = 1000.0  # the lanes' viewBox width; time maps linearly onto it
MIN_BAR = 2.0  # a bar shorter than this (in viewBox units) is widened so it stays visible


def esc(text: object) -> str:
    """Text or attribute value, escaped for HTML and SVG (quotes included)."""
    return escape(str(text), quote=True)


@dataclass(frozen=True)
class Bar:
    """A span on a lane: an attempt from its start to its end."""

    start: datetime
    end: datetime
    kind: str  # CSS class: affected, suspected, failed, ok, running, relaunch
    title: str
    attrs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Mark:
    """An instant on a lane: a signal, a false success, a checkpoint write."""

    at: datetime
    kind: str  # CSS class: signal, false-success, checkpoint
    title: str


class Scale:
    """Times in [start, end] to x in [0, WIDTH]."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.start = start
        self.span = max((end - start).total_seconds(), 1.0)

    def x(self, t: datetime) -> float:
        return min(max((t - self.start).total_seconds() / self.span * WIDTH, 0.0), WIDTH)


def _attrs(pairs: Iterable[tuple[str, str]]) -> str:
    return "".join(f' {esc(k)}="{esc(v)}"' for k, v in pairs)


def _bar(scale: Scale, bar: Bar, y: float, height: float) -> str:
    x0, x1 = scale.x(bar.start), scale.x(bar.end)
    width = max(x1 - x0, MIN_BAR)
    x0 = min(x0, WIDTH - width)
    return (
        f'<rect class="bar {esc(bar.kind)}" x="{x0:.2f}" y="{y}" width="{width:.2f}" '
        f'height="{height}"{_attrs(bar.attrs)}><title>{esc(bar.title)}</title></rect>'
    )


def _mark(scale: Scale, mark: Mark, height: float) -> str:
    x = scale.x(mark.at)
    return (
        f'<line class="marker {esc(mark.kind)}" x1="{x:.2f}" x2="{x:.2f}" y1="0" '
        f'y2="{height}"><title>{esc(mark.title)}</title></line>'
    )


def lane(scale: Scale, bars: Sequence[Bar], marks: Sequence[Mark], label: str) -> str:
    """One lane: its bars, then its markers on top; `label` names it for screen readers."""
    h = 12.0
    body = [_bar(scale, b, 2.0, h - 4) for b in bars] + [_mark(scale, m, h) for m in marks]
    return (
        f'<svg class="lane" viewBox="0 0 {WIDTH:.0f} {h:.0f}" preserveAspectRatio="none" '
        f'role="img" aria-label="{esc(label)}">'
        f'<rect class="track" x="0" y="0" width="{WIDTH:.0f}" height="{h:.0f}"/>'
        + "".join(body)
        + "</svg>"
    )


def counts(
    scale: Scale, hours: Sequence[tuple[datetime, datetime, int]], kind: str, label: str
) -> str:
    """Counts per hour as bars from the baseline, the tallest filling the lane."""
    h = 40.0
    top = max((n for _, _, n in hours), default=0) or 1
    body = []
    for start, end, n in hours:
        if n <= 0:
            continue
        x0, x1 = scale.x(start), scale.x(end)
        height = max(n / top * (h - 2), 1.5)
        body.append(
            f'<rect class="count {esc(kind)}" x="{x0:.2f}" y="{h - height:.2f}" '
            f'width="{max(x1 - x0, MIN_BAR / 2):.2f}" height="{height:.2f}" data-count="{n}">'
            f"<title>{esc(f'{start:%Y-%m-%d %H}:00Z: {n}')}</title></rect>"
        )
    return (
        f'<svg class="hourly" viewBox="0 0 {WIDTH:.0f} {h:.0f}" preserveAspectRatio="none" '
        f'role="img" aria-label="{esc(label)}">'
        f'<rect class="track" x="0" y="0" width="{WIDTH:.0f}" height="{h:.0f}"/>'
        + "".join(body)
        + "</svg>"
    )
