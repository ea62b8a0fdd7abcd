"""The JSON report (its schema: docs/report.md)."""

from __future__ import annotations

import json

from forensics.model import Report


def render(report: Report) -> str:
    """The report as indented JSON, one trailing newline."""
    return json.dumps(report.as_dict(), indent=2) + "\n"
