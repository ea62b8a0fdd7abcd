"""`fix`'s results: the bundled patch, and what apply, check and build found, as text or JSON."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from forensics.formats import OutputFormat, Renderers
from forensics.formats.table import render_pairs
from forensics.plugin_fix.build import BuildResult
from forensics.plugin_fix.check import CheckResult
from forensics.plugin_fix.patch import ApplyResult, parse_patch


@dataclass(frozen=True)
class BundledPatch:
    """The plugin patch this tool ships (`fix show`)."""

    name: str
    text: str


def _patch_json(patch: BundledPatch, width: int | None = None) -> str:
    data = {
        "name": patch.name,
        "sha256": hashlib.sha256(patch.text.encode()).hexdigest(),
        "files": [fp.path for fp in parse_patch(patch.text)],
        "patch": patch.text,
    }
    return json.dumps(data, indent=2) + "\n"


def _apply_rows(result: ApplyResult) -> list[tuple[str, str]]:
    rows = [
        ("target", f"{result.target.root} ({result.target.description})"),
        ("files", ", ".join(result.files)),
        ("result", result.reason),
    ]
    return rows + [("adapted", note) for note in result.adapted]


def _check_rows(result: CheckResult) -> list[tuple[str, str]]:
    rows = [("status", result.status), ("reason", result.reason)]
    extra: list[tuple[str, Any]] = [
        ("python", result.python),
        ("plugin", result.plugin_version),
        ("flytekit", result.flytekit_version),
        ("torch", result.torch_version),
        ("file", result.path),
    ]
    rows += [(k, str(v)) for k, v in extra if v]
    rows += [(f"  {s.name}", f"{s.outcome}: {s.detail}") for s in result.scenarios]
    return rows


def _build_rows(result: BuildResult) -> list[tuple[str, str]]:
    rows = [("wheel", str(result.wheel)), ("sha256", result.sha256), ("version", result.version)]
    return rows + [("adapted", note) for note in result.adapted]


def _to_json(result: ApplyResult | CheckResult | BuildResult, width: int | None = None) -> str:
    return json.dumps(result.to_dict(), indent=2) + "\n"


def _pairs(title: str, rows: list[tuple[str, str]], width: int | None) -> str:
    return render_pairs(title, rows, width=width)


RENDERERS: Renderers = {
    # The patch itself, unchanged, so that `elastic-audit fix show | git apply` works.
    BundledPatch: {OutputFormat.table: lambda p, _: p.text, OutputFormat.json: _patch_json},
    ApplyResult: {
        OutputFormat.table: lambda r, w: _pairs(f"fix apply: {r.status}", _apply_rows(r), w),
        OutputFormat.json: _to_json,
    },
    CheckResult: {
        OutputFormat.table: lambda r, w: _pairs(f"fix check ({r.mode})", _check_rows(r), w),
        OutputFormat.json: _to_json,
    },
    BuildResult: {
        OutputFormat.table: lambda r, w: _pairs(f"fix build: {r.release}", _build_rows(r), w),
        OutputFormat.json: _to_json,
    },
}
