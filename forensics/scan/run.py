"""One scan of a window: collect the evidence, judge each attempt, build the report, enrich it.

`collect` reads Loki, Flyte Admin and S3 in phases separated by joins (`scan.collect`); `judge`
decides each examined attempt (`detect.decide`, pure), and each finding's checkpoint is then
located; `build_report` is a pure function of what was collected and judged; `enrich` adds the
existing relaunches and the cost. docs/architecture.md shows the flow, docs/performance.md what
each phase calls.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace

from forensics.concurrency import Pools
from forensics.detect import Cleared, Decision, build_finding, finding_links
from forensics.model import Checkpoint, Gap, Report, Window, rfc3339
from forensics.progress import NULL, Progress
from forensics.scan.build import Judged, build_report, quiet
from forensics.scan.collect import collect
from forensics.scan.coverage import NOTE
from forensics.scan.enrich import enrich
from forensics.scan.evidence import Evidence, judge
from forensics.scan.lookups import Lookups
from forensics.scan.scope import ScanScope
from forensics.sources import Sources
from forensics.sources.loki_limits import reading_length

log = logging.getLogger("elastic-audit")


def scan(
    sources: Sources, window: Window, scope: ScanScope, *, progress: Progress | None = None
) -> Report:
    """Scan `window` within `scope` (docs/commands.md, "scan"): findings, summary and gaps."""
    return ScanRun(sources, window, scope, progress=progress).run()


class ScanRun:
    """One scan of one window within a scope; `run()` runs it (once or again: each run reads
    the sources anew)."""

    def __init__(
        self,
        sources: Sources,
        window: Window,
        scope: ScanScope = ScanScope(),
        *,
        progress: Progress | None = None,
    ) -> None:
        self.sources = sources
        self.window = window
        self.scope = scope
        self.progress = progress or NULL

    def run(self) -> Report:
        """Scan the window: findings, summary and gaps (docs/report.md)."""
        sources = self.sources
        steps: list[tuple[str, float, float]] = []

        def step(name: str) -> None:
            steps.append((name, time.perf_counter(), time.process_time()))

        step("start")
        lookups = Lookups(sources)
        collected = collect(
            sources, self.window, self.scope, progress=self.progress, lookups=lookups, step=step
        )
        judged = judge_all(sources, lookups, collected.evidence)
        step("verdicts")
        report = build_report(collected, judged)
        report = enrich(report, judged, lookups, sources.settings.workers)
        step("relaunches and report")
        self._log_calls(report.gaps)
        _log_timing(steps)
        return report

    def _log_calls(self, gaps: Sequence[Gap]) -> None:
        lk, admin, store = self.sources.settings.loki, self.sources.admin, self.sources.store
        log.info(
            "calls: Loki %d shard(s), Flyte Admin %d (%s), S3 %d (%s); %d gap(s)",
            len(self.window.split(reading_length(lk.shard, lk.max_query_length))),
            sum(admin.calls.values()),
            admin.endpoint,
            sum(store.calls.values()),
            store.endpoint,
            len(gaps),
        )


def judge_all(
    sources: Sources, lookups: Lookups, evidence: Sequence[Evidence]
) -> list[Judged | Cleared]:
    """Each attempt's decision (only its reason where `build.quiet` says that is all the report
    needs); a finding gets its checkpoint located (Admin reads, then one S3 listing; each source
    `settings.workers` at once) as soon as it is decided, and its links."""
    settings = sources.settings
    verbose = log.isEnabledFor(logging.INFO)  # one line per attempt: not built unless shown
    judged: list[Judged | Cleared] = []
    with Pools({"admin": settings.workers, "s3": settings.workers}) as pools:

        def locate(e: Evidence) -> Checkpoint | Future[Checkpoint]:
            where = lookups.checkpoint_location(e.execution, e.attempt)
            if isinstance(where, Checkpoint):
                return where
            return pools.submit("s3", lookups.checkpoint_listed, where, e.signal)

        located: dict[int, Future[Checkpoint | Future[Checkpoint]]] = {}
        for e in evidence:
            d = judge(e)
            if verbose:
                _log_decision(e, d)
            if d.is_finding:
                located[len(judged)] = pools.submit("admin", locate, e)
            judged.append(quiet(e, d) or Judged(e, d))
        stages = pools.results(list(located.values()))
        pools.results([s for s in stages if isinstance(s, Future)])
    for i, stage in zip(located, stages, strict=True):
        checkpoint = stage.result() if isinstance(stage, Future) else stage
        j = judged[i]
        assert isinstance(j, Judged)  # a finding is never quiet
        e = j.evidence
        links = finding_links(settings, e.execution, e.signal)
        finding = build_finding(
            j.decision,
            e.execution,
            e.attempt,
            e.signal,
            checkpoint,
            links,
            disruption=e.disruption,
        )
        if e.logs_absent:
            finding = replace(finding, evidence=(*finding.evidence, NOTE))
        judged[i] = Judged(e, j.decision, finding)
    return judged


def _log_decision(e: Evidence, d: Decision) -> None:
    att, signal = e.attempt, e.signal
    log.info(
        "%s %s/%s (%s, signal %s, outputs.pb %s): %s",
        e.execution.ref,
        att.ref.node_id,
        att.ref.attempt,
        att.phase,
        rfc3339(signal.at) if signal else "none",
        d.outputs.state if d.outputs else "not checked",
        d.verdict or f"cleared: {d.cleared}",
    )


def _log_timing(steps: list[tuple[str, float, float]]) -> None:
    """Where the run's time went, step by step (`-v`; the scale benchmark's `--phases`)."""
    if not log.isEnabledFor(logging.INFO):
        return
    (_, wall0, cpu0), (_, wall1, cpu1) = steps[0], steps[-1]
    parts = ", ".join(
        f"{name} {wall - before:.1f} s"
        for (_, before, _), (name, wall, _) in itertools.pairwise(steps)
    )
    log.info(
        "timing: %s; %.1f s in all, %.1f CPU-seconds (%.1f before the scan began)",
        parts,
        wall1 - wall0,
        cpu1 - cpu0,
        cpu0,
    )
