"""`config`: the effective configuration, one row per value with where it came from."""

from __future__ import annotations

import json
from dataclasses import dataclass

from forensics.formats import OutputFormat, Renderers
from forensics.formats.blocks import render_fitted
from forensics.formats.table import Column


@dataclass(frozen=True)
class Setting:
    """One effective value (a credential only as ***) and where it came from."""

    key: str
    value: str
    origin: str


@dataclass(frozen=True)
class ConfigView:
    settings: tuple[Setting, ...]


COLUMNS = (Column("setting"), Column("value", wrap=True), Column("from", wrap=True))


def _table(view: ConfigView, width: int | None) -> str:
    rows = [(s.key, s.value, s.origin) for s in view.settings]
    return render_fitted(COLUMNS, rows, width)


def _json(view: ConfigView, width: int | None = None) -> str:
    doc = {s.key: {"value": s.value, "from": s.origin} for s in view.settings}
    return json.dumps(doc, indent=2) + "\n"


RENDERERS: Renderers = {ConfigView: {OutputFormat.table: _table, OutputFormat.json: _json}}
