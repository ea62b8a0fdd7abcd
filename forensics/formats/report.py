"""The scan report's renderers: one module per format (table, json, csv, markdown)."""

from __future__ import annotations

from forensics.formats import OutputFormat, Renderers, csv, json, markdown, table
from forensics.model import Report


def _table(report: Report) -> str:
    return table.render(report, width=table.terminal_width(), narrow=True)


def _wide(report: Report) -> str:
    return table.render(report, width=table.terminal_width())


RENDERERS: Renderers = {
    Report: {
        OutputFormat.table: _table,
        OutputFormat.wide: _wide,
        OutputFormat.json: json.render,
        OutputFormat.csv: csv.render,
        OutputFormat.markdown: markdown.render,
    }
}
