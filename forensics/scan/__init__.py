"""The scan: a window of Loki death signals joined to Flyte Admin's attempts and S3's outputs.

`run.scan` (and `run.ScanRun`) scans a window in four steps: `collect` reads the evidence of
every examined attempt in phases (`evidence.Evidence`); `evidence.judge` decides each
(`detect.decide`); `build.build_report` makes the report of them; `enrich` adds the existing
relaunches and the cost. The parts: `sweep` lists the executions whose attempts may have ended
in the window; `signals` is the one Loki death-signal reader; `join` matches signalled pods to
swept attempts; `resolve` maps a pod no sweep claimed to its attempt, and a namespace to its
project and domain; `callplan` batches the outputs.pb checks; `lookups` holds the cached Admin
and S3 reads; `examine` judges a single execution by the same rules (`show`, `relaunch`). What
each verdict means: docs/verdicts.md; the report: docs/report.md.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the submodules are imported on first use, as the package root's names

if TYPE_CHECKING:
    from forensics.scan.run import ScanRun, scan
    from forensics.scan.scope import ScanScope

__all__ = ["ScanRun", "ScanScope", "scan"]


def __getattr__(name: str) -> object:
    if name in ("scan", "ScanRun"):
        from forensics.scan import run

        return getattr(run, name)
    if name == "ScanScope":
        from forensics.scan.scope import ScanScope

        return ScanScope
    raise AttributeError(f"module 'forensics.scan' has no attribute {name!r}")
