"""The JSON report (SPEC §6)."""

from __future__ import annotations

import json

from forensics.model import Report


def render(report: Report, *, width: int = 100) -> str:
    return json.dumps(report.as_dict(), indent=2) + "\n"
