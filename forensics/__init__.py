"""elastic-audit: forensics for Flyte + PyTorch Elastic attempts that died silently green.

The package root is the library (docs/library.md): settings, the evidence sources, the scan and
the examination of one execution, its timeline, the relauncher, the guard's run, the pin bump,
the plugin fix, report merging, and the typed results and errors they use. Names are imported
on first use, so `import forensics` stays as cheap as the CLI's start needs.

`forensics.scan` is the scan's package (`forensics.scan.scan`, `ScanRun`, `ScanScope`): the
scan function is exported here as `run_scan`, beside `scan_window`, which takes settings and
times.
"""

from __future__ import annotations

import importlib

# typing costs more to import than this whole module: type checkers read this name as True.
TYPE_CHECKING = False

__version__ = "0.1.0"
TOOL = f"elastic-audit {__version__}"

# name -> (module, attribute in it)
_EXPORTS: dict[str, tuple[str, str]] = {
    # settings and sources
    "load_settings": ("forensics.config", "load_settings"),
    "Settings": ("forensics.config", "Settings"),
    "Sources": ("forensics.sources", "Sources"),
    "SourcesClosed": ("forensics.sources", "SourcesClosed"),
    "LokiReader": ("forensics.sources.interfaces", "LokiReader"),
    "AdminReader": ("forensics.sources.interfaces", "AdminReader"),
    "ObjectReader": ("forensics.sources.interfaces", "ObjectReader"),
    # scan, examine, timeline
    "run_scan": ("forensics.scan.run", "scan"),
    "ScanRun": ("forensics.scan.run", "ScanRun"),
    "ScanScope": ("forensics.scan.scope", "ScanScope"),
    "examine": ("forensics.scan.examine", "examine"),
    "Examination": ("forensics.scan.examine", "Examination"),
    "Examined": ("forensics.scan.examine", "Examined"),
    "build_timeline": ("forensics.timeline", "build_timeline"),
    "Timeline": ("forensics.timeline", "Timeline"),
    "scan_window": ("forensics.api", "scan_window"),
    "examine_execution": ("forensics.api", "examine_execution"),
    "execution_timeline": ("forensics.api", "execution_timeline"),
    "window_of": ("forensics.api", "window_of"),
    "execution_of": ("forensics.api", "execution_of"),
    "merge_reports": ("forensics.api", "merge_reports"),
    "report_from_json": ("forensics.report_json", "report_from_json"),
    # relaunch
    "Relauncher": ("forensics.relaunch.relauncher", "Relauncher"),
    "RelaunchOptions": ("forensics.relaunch", "Options"),
    "RelaunchPlan": ("forensics.relaunch", "RelaunchPlan"),
    "RelaunchOutcome": ("forensics.relaunch", "RelaunchOutcome"),
    "AuditLog": ("forensics.relaunch", "AuditLog"),
    # guard
    "run_guard": ("forensics.guard", "run_guard"),
    # pin bump
    "plan_bump": ("forensics.pinbump.plan", "plan_bump"),
    "apply_plan": ("forensics.pinbump.plan", "apply_plan"),
    "BumpPlan": ("forensics.pinbump.plan", "BumpPlan"),
    # the plugin fix
    "load_patch": ("forensics.plugin_fix.patch", "load_patch"),
    "apply_fix": ("forensics.plugin_fix.patch", "apply"),
    "ApplyResult": ("forensics.plugin_fix.patch", "ApplyResult"),
    "check_source": ("forensics.plugin_fix.check", "check_source"),
    "check_environment": ("forensics.plugin_fix.check", "check_environment"),
    "CheckResult": ("forensics.plugin_fix.check", "CheckResult"),
    "build_fixed_wheel": ("forensics.plugin_fix.build", "build"),
    "BuildResult": ("forensics.plugin_fix.build", "BuildResult"),
    # results
    "Report": ("forensics.model", "Report"),
    "Summary": ("forensics.model", "Summary"),
    "Finding": ("forensics.model", "Finding"),
    "Pending": ("forensics.model", "Pending"),
    "Unresolved": ("forensics.model", "Unresolved"),
    "Gap": ("forensics.model", "Gap"),
    "Window": ("forensics.model", "Window"),
    "ExecutionRef": ("forensics.model", "ExecutionRef"),
    "AttemptRef": ("forensics.model", "AttemptRef"),
    "ExecutionRecord": ("forensics.model", "ExecutionRecord"),
    "AttemptRecord": ("forensics.model", "AttemptRecord"),
    "SignalHit": ("forensics.model", "SignalHit"),
    "Disruption": ("forensics.model", "Disruption"),
    "Checkpoint": ("forensics.model", "Checkpoint"),
    "ObjectCheck": ("forensics.model", "ObjectCheck"),
    "Decision": ("forensics.detect", "Decision"),
    "Verdict": ("forensics.detect", "Verdict"),
    "Cleared": ("forensics.detect", "Cleared"),
    # errors
    "ElasticAuditError": ("forensics.errors", "ElasticAuditError"),
    "UsageError": ("forensics.errors", "UsageError"),
    "ConfigError": ("forensics.errors", "ConfigError"),
    "SourceError": ("forensics.errors", "SourceError"),
    "NotFoundError": ("forensics.errors", "NotFoundError"),
    "AlreadyRelaunched": ("forensics.errors", "AlreadyRelaunched"),
}

__all__ = [
    "TOOL",
    "AdminReader",
    "AlreadyRelaunched",
    "ApplyResult",
    "AttemptRecord",
    "AttemptRef",
    "AuditLog",
    "BuildResult",
    "BumpPlan",
    "CheckResult",
    "Checkpoint",
    "Cleared",
    "ConfigError",
    "Decision",
    "Disruption",
    "ElasticAuditError",
    "Examination",
    "Examined",
    "ExecutionRecord",
    "ExecutionRef",
    "Finding",
    "Gap",
    "LokiReader",
    "NotFoundError",
    "ObjectCheck",
    "ObjectReader",
    "Pending",
    "RelaunchOptions",
    "RelaunchOutcome",
    "RelaunchPlan",
    "Relauncher",
    "Report",
    "ScanRun",
    "ScanScope",
    "Settings",
    "SignalHit",
    "SourceError",
    "Sources",
    "SourcesClosed",
    "Summary",
    "Timeline",
    "Unresolved",
    "UsageError",
    "Verdict",
    "Window",
    "__version__",
    "apply_fix",
    "apply_plan",
    "build_fixed_wheel",
    "build_timeline",
    "check_environment",
    "check_source",
    "examine",
    "examine_execution",
    "execution_of",
    "execution_timeline",
    "load_patch",
    "load_settings",
    "merge_reports",
    "plan_bump",
    "report_from_json",
    "run_guard",
    "run_scan",
    "scan_window",
    "window_of",
]

if TYPE_CHECKING:
    from forensics.api import (
        examine_execution,
        execution_of,
        execution_timeline,
        merge_reports,
        scan_window,
        window_of,
    )
    from forensics.config import Settings, load_settings
    from forensics.detect import Cleared, Decision, Verdict
    from forensics.errors import (
        AlreadyRelaunched,
        ConfigError,
        ElasticAuditError,
        NotFoundError,
        SourceError,
        UsageError,
    )
    from forensics.guard import run_guard  # type: ignore[attr-defined]
    from forensics.model import (
        AttemptRecord,
        AttemptRef,
        Checkpoint,
        Disruption,
        ExecutionRecord,
        ExecutionRef,
        Finding,
        Gap,
        ObjectCheck,
        Pending,
        Report,
        SignalHit,
        Summary,
        Unresolved,
        Window,
    )
    from forensics.pinbump.plan import BumpPlan, apply_plan, plan_bump
    from forensics.plugin_fix.build import BuildResult
    from forensics.plugin_fix.build import build as build_fixed_wheel
    from forensics.plugin_fix.check import CheckResult, check_environment, check_source
    from forensics.plugin_fix.patch import ApplyResult, load_patch
    from forensics.plugin_fix.patch import apply as apply_fix
    from forensics.relaunch import AuditLog, RelaunchOutcome, RelaunchPlan
    from forensics.relaunch import Options as RelaunchOptions
    from forensics.relaunch.relauncher import Relauncher
    from forensics.report_json import report_from_json
    from forensics.scan.examine import Examination, Examined, examine
    from forensics.scan.run import ScanRun
    from forensics.scan.run import scan as run_scan
    from forensics.scan.scope import ScanScope
    from forensics.sources import Sources, SourcesClosed
    from forensics.sources.interfaces import AdminReader, LokiReader, ObjectReader
    from forensics.timeline import Timeline, build_timeline


def __getattr__(name: str) -> object:
    """Import an exported name on first use (PEP 562) and keep it here."""
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'forensics' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
