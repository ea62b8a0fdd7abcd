"""The scan report's renderers: one module per format (table, json, csv, markdown)."""

from __future__ import annotations

from forensics.formats import OutputFormat, Renderers, csv, json, markdown, table
from forensics.model import Report


def _table(report: Report, width: int | None) -> str:
    return table.render(report, width=width, narrow=True)


def _wide(report: Report, width: int | None) -> str:
    return table.render(report, width=width)


RENDERERS: Renderers = {
    Report: {
        OutputFormat.table: _table,
        OutputFormat.wide: _wide,
        OutputFormat.json: lambda r, _: json.render(r),
        OutputFormat.csv: lambda r, _: csv.render(r),
        OutputFormat.markdown: lambda r, _: markdown.render(r),
    }
}
