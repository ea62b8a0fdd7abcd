"""Every command's output: a registry from (result type, output format) to a renderer.

A renderer takes one result (a scan Report, a Timeline, relaunch results, a pin-bump result,
a fix result...) and the width to fit tables in (None: unbounded), and returns the exact text
for stdout; the command line says how wide its terminal is. Commands never render: they hand their
result to `render(result, fmt)`. A pair nobody registered is an error, never a silent table.
Each module below registers its result types in `RENDERERS`; the format sets a command may
offer (`-o`) are declared here, and tests/cli/test_bad_input.py checks both agree.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from forensics.params import Param, ParamError


class OutputFormat(str, Enum):
    """How a command prints its result on stdout."""

    table = "table"
    wide = "wide"
    json = "json"
    csv = "csv"
    markdown = "markdown"
    diff = "diff"
    html = "html"


# What each kind of result can be printed as (`-o`); a command's help lists only its own.
REPORT_FORMATS = (
    OutputFormat.table,
    OutputFormat.wide,
    OutputFormat.json,
    OutputFormat.csv,
    OutputFormat.markdown,
)
TABLE_OR_JSON = (OutputFormat.table, OutputFormat.json)
PIN_BUMP_FORMATS = (OutputFormat.table, OutputFormat.json, OutputFormat.diff)
# `scan -o html` renders the incident page (an IncidentPage: the report and its executions).
SCAN_FORMATS = (*REPORT_FORMATS, OutputFormat.html)
SHOW_FORMATS = (*TABLE_OR_JSON, OutputFormat.html)

Renderer = Callable[[Any, int | None], str]
Renderers = Mapping[type, Mapping[OutputFormat, Renderer]]

# The modules that register renderers, cheapest to import first: a look-up loads them in this
# order until one knows the result's type, so `fix` never imports the timeline's type (and with
# it flytekit, seconds of start-up).
_MODULES = ("report", "watch", "fix", "pinbump", "relaunch", "config", "html", "timeline")
_registry: dict[type, Mapping[OutputFormat, Renderer]] = {}
_loaded: list[str] = []


OUTPUT = Param("output")


class UnknownFormat(ParamError):
    """A result asked for in a format nobody renders it in (never a fallback)."""


def _renderers_of(kind: type) -> Mapping[OutputFormat, Renderer]:
    for name in _MODULES:
        if kind in _registry:
            break
        if name not in _loaded:
            module = importlib.import_module(f"forensics.formats.{name}")
            _registry.update(module.RENDERERS)
            _loaded.append(name)
    return _registry.get(kind, {})


def renderers(kind: type) -> tuple[OutputFormat, ...]:
    """The formats a result of type `kind` renders in, in the order its command offers them."""
    return tuple(_renderers_of(kind))


def render(result: object, fmt: OutputFormat | str, width: int | None = None) -> str:
    """`result` as the exact text in `fmt`, tables fitted to `width` columns (None: as wide as
    they are); UnknownFormat if nobody renders that pair."""
    name = str(getattr(fmt, "value", fmt)).lower()
    table = _renderers_of(type(result))
    renderer = next((r for f, r in table.items() if f.value == name), None)
    if renderer is None:
        offered = ", ".join(f.value for f in table) or "none"
        raise UnknownFormat(
            OUTPUT,
            f" {name}: a {type(result).__name__} is not rendered as {name} (offered: {offered})",
        )
    return renderer(result, width)
