"""Whether Loki still holds the task pods' logs, shard by shard (docs/upstream.md, "Log coverage").

A death-signal query that matches nothing cannot tell "no pod was signalled" from "Loki no longer
holds these logs": Loki answers both with an empty 200 (`max_query_lookback` and retention,
grafana/loki `pkg/querier/queryrange/limits.go` limitsMiddleware.Do -> NewEmptyResponse). So each
shard whose signal query returned no line is probed once, with the task selector alone and no
line filter, through `index/stats` (the index only, no chunk read). A shard where Loki holds no
task log although Flyte Admin shows attempts ran in it is a `logs_absent` gap: the scan is
incomplete there and the findings whose attempt ran there say their evidence is Admin and S3 only.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from datetime import datetime, timedelta
from functools import partial

from forensics.concurrency import Emit, stream
from forensics.errors import FailureKind, SourceError
from forensics.model import Gap, ShardRead, Window, rfc3339
from forensics.sources.interfaces import LokiReader

log = logging.getLogger("elastic-audit")

LOGS_ABSENT = "logs_absent"
NOTE = (
    "Loki holds no task log for the time this attempt ran (retention, max_query_lookback, a "
    "shipper outage or a selector that matches nothing): its evidence is Flyte Admin and S3 only"
)


class Coverage:
    """Per shard of the window: does Loki hold any task log there, and did any attempt run there."""

    def __init__(self, loki: LokiReader, window: Window, size: timedelta) -> None:
        self._loki = loki
        self.selector = ""  # the task selector, set once the scan's projects are known
        self.window = window
        self.shards = window.split(size)
        self._starts = [s.start for s in self.shards]
        self._lock = threading.Lock()
        self._held: dict[int, bool] = {}  # shard index -> Loki holds task logs there
        self._unread: set[int] = set()  # shards whose signal query failed: gaps already
        self._failed: dict[int, SourceError] = {}  # shards the probe could not measure
        self._ran: set[int] = set()  # shards in which Flyte Admin shows an attempt ran
        self.probes = 0

    def _index(self, at: datetime) -> int:
        return max(0, bisect_right(self._starts, at) - 1)

    def shard_read(self, item: ShardRead) -> None:
        """A shard's signal query ended: lines prove the logs are there; a failure is a gap."""
        i = self._index(item.window.start)
        with self._lock:
            if item.entries:
                self._held[i] = True
            elif [(p.start, p.end) for p in item.failed] == [(item.window.start, item.window.end)]:
                self._unread.add(i)  # the whole shard was lost: its gap says so, no probe

    def ran(self, start: datetime | None, end: datetime | None) -> None:
        """Flyte Admin shows an attempt that started at `start` and ended at `end` (None: still
        running). A task pod logs when it starts and when it ends (the evidence a verdict reads
        lies there), so the shards holding those two instants are where Loki must hold its logs;
        a long attempt's quiet days in between are not held against Loki."""
        marks = [t for t in (start, end) if t is not None and t in self.window]
        if not marks:
            return
        with self._lock:
            self._ran.update(self._index(t) for t in marks)

    def probe(self, workers: int) -> None:
        """Probe, `workers` at a time, every shard not yet known to hold task logs."""
        todo = [i for i in range(len(self.shards)) if i not in self._held and i not in self._unread]
        if not todo:
            return
        jobs = [partial(self._probe, i) for i in todo]
        # A stream of its own: it sets its stop event when it ends.
        for _ in stream("loki-coverage", jobs, workers, buffer=2 * workers):
            pass

    def _probe(self, i: int, emit: Emit) -> None:
        shard = self.shards[i]
        try:
            held = self._loki.holds_any(self.selector, shard)
        except SourceError as e:
            with self._lock:
                self._failed[i] = e
                self.probes += 1
            return
        with self._lock:
            self._held[i] = held
            self.probes += 1
        if not held:
            log.info(
                "Loki holds no task log in %s → %s (%s)",
                rfc3339(shard.start),
                rfc3339(shard.end),
                self.selector,
            )

    def any_dark(self) -> bool:
        """Whether any shard is known to hold no task log (`absent` can be true at all)."""
        with self._lock:
            return any(held is False for held in self._held.values())

    def absent(self, start: datetime | None, end: datetime | None) -> bool:
        """Whether Loki holds no task log in the shard where an attempt started or ended."""
        marks = [t for t in (start, end) if t is not None and t in self.window]
        with self._lock:
            return any(self._held.get(self._index(t)) is False for t in marks)

    def gaps(self, hint: str = "") -> list[Gap]:
        """The shards where attempts ran but Loki holds no task log (consecutive ones merged),
        and those whose coverage could not be measured."""
        with self._lock:
            dark = sorted(i for i in self._ran if self._held.get(i) is False)
            failed = sorted((i, e) for i, e in self._failed.items() if i in self._ran)
        why = (
            f"logs absent: Loki holds no log of the task pods ({self.selector}) here although "
            "Flyte Admin shows attempts ran (retention, max_query_lookback or a shipper outage); "
            "verdicts here rest on Admin and S3 only" + hint
        )
        out = [
            Gap("loki", a.start, b.end, why, kind=LOGS_ABSENT, failure=FailureKind.LOGS_ABSENT)
            for a, b in self._runs(dark)
        ]
        out += [
            Gap(
                "loki",
                self.shards[i].start,
                self.shards[i].end,
                f"log coverage not measured (index/stats): {e.cause}",
                failure=e.kind,
            )
            for i, e in failed
        ]
        return out

    def any_ran(self) -> bool:
        """Whether Flyte Admin shows any attempt ran in the window."""
        with self._lock:
            return bool(self._ran)

    def nowhere(self) -> bool:
        """Loki holds no task log in any shard where attempts ran (and attempts ran)."""
        with self._lock:
            return bool(self._ran) and all(self._held.get(i) is False for i in self._ran)

    def _runs(self, indices: list[int]) -> list[tuple[Window, Window]]:
        runs: list[tuple[Window, Window]] = []
        for i in indices:
            if runs and runs[-1][1] == self.shards[i - 1] and i > 0:
                runs[-1] = (runs[-1][0], self.shards[i])
            else:
                runs.append((self.shards[i], self.shards[i]))
        return runs


def coverage_gaps(coverage: Coverage, loki: LokiReader) -> list[Gap]:
    """The coverage gaps; when Loki holds no task log anywhere attempts ran, the likely cause
    is named: a selector or label name that matches nothing (Loki holds other streams), or logs
    past retention / max_query_lookback (it holds none)."""
    hint = ""
    if coverage.nowhere():
        try:
            names = loki.label_names(coverage.window)
        except SourceError:
            names = None
        if names:
            hint = (
                f". Loki holds no task log anywhere in the window but does hold streams labelled "
                f"{', '.join(names)}: check [loki] task_selector and namespace_label / pod_label / "
                "container_label (LOKI_* variables) against those names"
            )
        elif names is not None:
            hint = ". Loki serves no log at all in this window (retention or max_query_lookback?)"
        if hint:
            log.warning("Loki: no task log matches %s in the window%s", coverage.selector, hint)
    return coverage.gaps(hint)
