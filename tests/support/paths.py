"""Where the suite's shared files are, for test modules at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
DOCS = ROOT / "docs"
SUPPORT = TESTS / "support"
SCHEMA = TESTS / "report.schema.json"
