"""One scan run: window → Loki shards → candidates → Admin + S3 → verdicts → Report.

The run is one pipeline: the Loki shards, the Admin sweep and the S3 checks run at the same
time, each source at most `settings.workers` requests at once. One ListProjects gives each
project's domains; executions stream from two disjoint listings per project and domain (see
`sweep.listings`); each costs one ListNodeExecutions per level and one ListTaskExecutions per
node that can run an elastic task or that a signalled pod names (its workflow's compiled
closure says which: one GetWorkflow per workflow version). The outputs.pb of elastic successes
of tasks that declare no outputs are checked in batches: sorted, they are answered by walking
the bucket's listing where its keys are dense enough, else a HEAD each (`callplan`). Death signals
are joined to the swept attempts by pod name, so a signalled attempt costs no extra Admin call;
only signalled pods that no swept execution claims are looked up one by one (`resolve`). Memory
holds what is in flight, the signalled pods and the findings: it grows with candidates, not with
log lines. The disruption sources (events, Prometheus) are read beside the signals and are
final with them.

Every step here shares the candidates' states, the lock and the lanes; the parts that need none
of them live in `sweep`, `join`, `resolve`, `callplan`, `signals`, `disruptions` and `tally`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import partial

from forensics.concurrency import Lane, guarded, join
from forensics.cost import price
from forensics.detect import (
    Cleared,
    Decision,
    assert_never,
    build_finding,
    decide,
    disruption_candidate,
    earliest,
    finding_links,
    needs_outputs_check,
    sweep_candidate,
)
from forensics.errors import NotFoundError, SourceError
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    Disruption,
    ExecutionRecord,
    ExecutionRef,
    Finding,
    Gap,
    KeyPage,
    ObjectCheck,
    Report,
    Scope,
    ShardRead,
    SignalHit,
    Window,
    rfc3339,
)
from forensics.progress import NULL, Progress
from forensics.scan import callplan, sweep
from forensics.scan.coverage import Coverage, coverage_gaps, note_absent
from forensics.scan.disruptions import (
    DisruptionIndex,
    blind_events_gaps,
    disruption_reads,
    disruption_sources_on,
)
from forensics.scan.join import PodIndex, PodKey
from forensics.scan.lookups import Lookups
from forensics.scan.resolve import OutOfScope, Projects, Unowned, resolve
from forensics.scan.scope import ScanScope, signal_query, task_selector
from forensics.scan.signals import (
    SignalLines,
    earliest_per_pod,
    log_shard,
    log_unparsed,
    log_window,
)
from forensics.scan.source_gaps import events_gaps, shard_gaps
from forensics.scan.tally import Tally
from forensics.sources import Sources
from forensics.sources.admin_types import SkippedNode, TaskResources
from forensics.sources.k8s_events import EventsRead
from forensics.sources.loki_limits import reading_length

log = logging.getLogger("elastic-audit")

# outputs.pb checks held for one batch (the rest at the sweep's end): their candidates wait in
# memory meanwhile, a few kB each; a larger batch makes listing pay in a larger bucket.
OUTPUTS_BATCH = 50_000


@dataclass(eq=False, slots=True)
class Candidate:
    """One attempt whose verdict is being decided: it waits for its outputs.pb check (if it needs
    one) and for the signals to be final (Loki read, pods matched), then it is concluded once.

    `checked` and `final` are set by two lanes in either order, each under the run's lock;
    `ScanRun._both_known` says which of the two came second, and marks it `done`.
    """

    ex: ExecutionRecord
    att: AttemptRecord
    signal: SignalHit | None = None
    later: Sequence[AttemptRecord] = ()  # the attempts of the same node (retried or not)
    siblings: Sequence[AttemptRecord] = ()  # every attempt of the execution (re-runs of trials)
    outputs: ObjectCheck | None = None
    checked: bool = False  # outputs known (or not needed)
    final: bool = False  # signal known
    done: bool = False
    disruption: Disruption | None = None  # Kubernetes' record of the pod's disruption

    def decide(self) -> Decision:
        """The verdict, once the signal, the disruption and the outputs are known."""
        return decide(
            self.att,
            self.ex,
            self.signal,
            self.outputs,
            later_attempts=self.later,
            disruption=self.disruption,
            execution_attempts=self.siblings,
        )


def scan(
    sources: Sources, window: Window, scope: ScanScope, *, progress: Progress | None = None
) -> Report:
    """Scan `window` within `scope` (docs/commands.md, "scan"): findings, summary and gaps."""
    return ScanRun(sources, window, scope, progress=progress).run()


class ScanRun:
    """One scan of one window: it owns the window, the scope, the lanes, the candidates, the
    findings and the gaps, and is run once.

    The order its steps depend on (`_run`):

    1. ListProjects first: the Loki query, the namespace mapping and the sweep's listings all
       need each project's domains.
    2. Loki (signals, then disruption events beside them) and the Admin listers run at once.
       Each swept execution's outputs.pb checks are queued at once (they need no signal); its
       attempts are joined to the signals only once those are final. Whether they are is
       decided under `_lock` with one flag, `_signals_final`: a sweep that finds it unset parks
       the execution, and the Loki thread sets it and takes the parked list in the same locked
       step, so every execution is settled exactly once, by whichever thread came second. The
       pod index is filled before the flag is set and only read after.
    3. Once the listers and Loki are joined, the Admin lane is drained: every swept execution is
       settled (its passed-over nodes the evidence points at listed, its candidates released).
    4. Only then are the signalled pods no execution claimed known (`_resolve_unclaimed`), and
       looked up one by one; `_was_swept` keeps them from listing an execution again.
    5. The S3 lane is drained: every candidate is concluded (a candidate is concluded by the
       second of its two events, the signal being final and its outputs being known; see
       `_both_known`). The tally then makes the report, the relaunch listings and costs last.

    The locks: `_lock` guards the candidates' flags and the sweep's bookkeeping (`_listed`,
    `_swept`, `_partial`, `_parked`, `_signals_final`) and is never held across a call to a
    source; `Tally`, `PodIndex`, `DisruptionIndex` and `Coverage` each guard their own state
    the same way. `Lookups` holds a lock per execution while it reads that execution (read
    once); `lookups.slots` bounds the Admin calls in flight and is taken before such a lock,
    never the other way round. The first error in any thread sets `_stop`, which
    ends every lane.
    """

    def __init__(
        self,
        sources: Sources,
        window: Window,
        scope: ScanScope = ScanScope(),
        *,
        progress: Progress | None = None,
    ) -> None:
        self.sources = sources
        self.settings = sources.settings
        self.window = window
        self.scope = scope
        self.progress = progress or NULL
        self.lookups = Lookups(sources)
        self.projects = Projects(sources.settings)
        self.tally = Tally()  # what the run finds: counts, findings, pending, gaps
        self._lock = threading.Lock()  # the candidates' states, the swept and parked executions
        self._swept: dict[tuple[str, str], set[str]] = {}
        self._listed: dict[tuple[str, str], set[str]] = {}
        # Signals: the index that joins them to attempts, and whether it is final.
        self._pods = PodIndex()
        self.disruptions = DisruptionIndex()  # filled with the signals, before they are final
        self._event_reads: list[EventsRead] = []
        self._signals_final = False
        self._parked: list[
            tuple[ExecutionRecord, list[AttemptRecord], list[Candidate], Sequence[SkippedNode]]
        ] = []
        self._partial: set[ExecutionRef] = set()  # swept, not every node seen (passed over, direct)
        # The lanes: one per source, stopped together by the first error or the run's end.
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        workers = sources.settings.workers
        self._admin_lane = Lane("admin", workers, self._stop, self._errors)
        lk = sources.settings.loki
        # Whether Loki still holds the task pods' logs, shard by shard (docs/upstream.md).
        self.coverage = Coverage(
            sources.loki, window, reading_length(lk.shard, lk.max_query_length)
        )
        self._s3_lane = Lane("s3", workers, self._stop, self._errors)
        self._outputs_batch: list[Candidate] = []  # outputs.pb checks not yet sent (`_batch`)
        self._refused: set[str] = set()  # buckets whose listing failed (logged once each)
        # (step, wall clock, process CPU) at the end of each step of `_run`: the -v timing line
        self._steps: list[tuple[str, float, float]] = []

    def run(self) -> Report:
        """Scan the window: findings, summary and gaps (docs/report.md)."""
        try:
            return self._run()
        finally:
            self._stop.set()  # whatever happened, no thread goes on working for this run
            self._admin_lane.close()
            self._s3_lane.close()

    def _step(self, name: str) -> None:
        self._steps.append((name, time.perf_counter(), time.process_time()))

    def _run(self) -> Report:
        window = self.window
        self._step("start")
        # One ListProjects first: the Loki query, the namespace mapping and the sweep all need
        # each project's domains (and a scope naming an unknown one stops here, exit 2).
        self.projects.load(self.sources.admin, self.scope, self.lookups.slots)
        if self.projects.error is not None:
            self.tally.add_gap(
                Gap(
                    "admin",
                    window.start,
                    window.end,
                    f"listing projects: {self.projects.error}",
                    failure=self.projects.failure,
                )
            )
        self._step("projects")
        self.coverage.selector = task_selector(
            self.settings, self.scope, self.projects.scope_domains(self.scope)
        )
        self._read_everything()
        self.tally.add_gaps(coverage_gaps(self.coverage, self.sources.loki))
        if self.coverage.any_ran():
            self.tally.add_gaps(blind_events_gaps(self._event_reads, self.window))
        self._resolve_unclaimed()
        self._step("unclaimed pods")
        self._s3_lane.drain()
        self._step("outputs.pb checks")
        report = self.tally.report(window, self._relaunched)
        # What it covered, so that a scoped report never reads as all-clear for the rest.
        scope = Scope(tuple(sorted(self.scope.projects)), tuple(sorted(self.scope.domains)))
        report = replace(report, scope=scope)
        self._step("relaunches and report")
        self._log_calls(report.gaps)
        self._log_timing()
        return report

    def _relaunched(self, findings: list[Finding]) -> list[Finding]:
        findings = sweep.with_relaunches(
            findings,
            self.tally.finding_executions,
            self.sources.admin,
            self.lookups.slots,
            self._admin_lane,
            self.tally.add_gap,
        )
        return price(findings, self.tally.finding_attempts, self._task_resources)

    def _task_resources(self, task_id: tuple[str, str, str, str]) -> TaskResources | str:
        """A finding's task requests for its cost (docs/report.md `cost`): a template Admin
        cannot give is a gap, as any failed read is; an unregistered one is only `unknown`."""
        try:
            with self.lookups.slots:
                return self.sources.admin.task_resources(task_id)
        except NotFoundError:
            return "the task template is not registered (a dynamic task?)"
        except SourceError as e:
            w = self.window
            self.tally.add_gap(
                Gap("admin", w.start, w.end, f"task {':'.join(task_id)}: {e.cause}", failure=e.kind)
            )
            return f"reading the task template failed: {e.cause}"

    def _read_everything(self) -> None:
        """Loki and the Admin sweep at once; every swept execution matched, its checks queued."""
        loki = threading.Thread(
            target=guarded,
            args=(self._loki_phase, self._stop, self._errors),
            name="loki",
            daemon=True,
        )
        loki.start()
        self.progress.start("sweep", "Sweeping Admin executions", None)
        todo = sweep.listings(
            self.projects, self.scope, self.window, self.settings.flyte.clock_skew
        )
        listers = [
            threading.Thread(
                target=guarded, args=(job, self._stop, self._errors), name=f"list-{i}", daemon=True
            )
            for i, job in enumerate(sweep.listers(todo, self.settings.workers, self._list_one))
        ]
        for t in listers:
            t.start()
        for t in listers:
            join(t, self._errors)
        self._step("sweep")
        join(loki, self._errors)  # signals are final from here on
        self._step("signals")
        self._admin_lane.drain()  # every swept execution matched and its checks batched
        self._step("sweep's last executions")
        with self._lock:
            last, self._outputs_batch = self._outputs_batch, []
        self._send_checks(last)
        self.progress.finish("sweep")

    def _log_calls(self, gaps: Sequence[Gap]) -> None:
        lk, admin, store = self.settings.loki, self.sources.admin, self.sources.store
        log.info(
            "calls: Loki %d shard(s), Flyte Admin %d (%s), S3 %d (%s); %d gap(s)",
            len(self.window.split(reading_length(lk.shard, lk.max_query_length))),
            sum(admin.calls.values()),
            admin.endpoint,
            sum(store.calls.values()),
            store.endpoint,
            len(gaps),
        )

    def _log_timing(self) -> None:
        """Where the run's time went, step by step (`-v`; the scale benchmark's `--phases`)."""
        if not log.isEnabledFor(logging.INFO):
            return
        (_, wall0, cpu0), (_, wall1, cpu1) = self._steps[0], self._steps[-1]
        steps = ", ".join(
            f"{name} {wall - before:.1f} s"
            for (_, before, _), (name, wall, _) in itertools.pairwise(self._steps)
        )
        log.info(
            "timing: %s; %.1f s in all, %.1f CPU-seconds (%.1f before the scan began)",
            steps,
            wall1 - wall0,
            cpu1 - cpu0,
            cpu0,
        )

    # -- Loki, then the join index ---------------------------------------------------------------
    def _signals(self) -> tuple[dict[PodKey, SignalHit], SignalLines]:
        """The earliest death-signal hit per (namespace, pod); the Loki gaps are recorded."""
        lk = self.settings.loki
        query = signal_query(self.settings, self.scope, self.projects.scope_domains(self.scope))
        shards = log_window(self.window, lk, query)
        self.progress.start("loki", "Reading Loki shards", shards)
        lines = SignalLines(self.sources.loki, lk)
        gaps: list[Gap] = []
        read = lines.read(query, self.window, partial(self._shard_read, gaps), stop=self._stop)
        hits = earliest_per_pod(read, self.window)
        self.progress.finish("loki")
        self.tally.add_gaps(gaps)
        return hits, lines

    def _shard_read(self, gaps: list[Gap], item: ShardRead) -> None:
        log_shard(item)
        self.coverage.shard_read(item)
        gaps.extend(shard_gaps(item))
        self.progress.advance("loki")

    def _events_phase(self) -> None:
        """The pods whose disruption Kubernetes recorded in the window: events in Loki
        (`[k8s_events]`) and DisruptionTarget conditions in Prometheus (`[prometheus]`)."""
        reads = disruption_reads(self.sources, self.window, self._stop, self._flyte_namespace)
        self._event_reads = reads
        for read in reads:
            self.tally.add_gaps(events_gaps(read))
        self.disruptions.fill(*reads)
        # A disrupted pod points the sweep at its node whatever its task (docs/performance.md):
        # a plain task that exited 0 after its node was drained is examined too.
        pointed = []
        for ns, pod in self.disruptions.pods():
            pd = self.projects.project_domain(ns)
            if pd is not None:
                pointed.append((*pd, pod))
        self._pods.point(pointed)

    def _flyte_namespace(self, ns: str) -> bool:
        """A namespace some project and domain in scope maps to (events elsewhere are no
        attempt's, and are not kept)."""
        pd = self.projects.project_domain(ns)
        return pd is not None and self.scope.covers(*pd)

    def _loki_phase(self) -> None:
        events = None
        if disruption_sources_on(self.settings):
            events = threading.Thread(
                target=guarded,
                args=(self._events_phase, self._stop, self._errors),
                name="k8s-events",
                daemon=True,
            )
            events.start()
        try:
            self._signals_phase()
        finally:
            if events is not None:
                join(events, self._errors)  # disruptions are final with the signals
        with self._lock:
            self._signals_final = True
            parked, self._parked = self._parked, []
        for ex, attempts, candidates, skipped in parked:
            if skipped:  # it may list the nodes the evidence points at: in the Admin lane
                self._admin_lane.submit(partial(self._settle, ex, attempts, candidates, skipped))
            else:
                self._settle(ex, attempts, candidates)

    def _signals_phase(self) -> None:
        hits, lines = self._signals()
        self.coverage.probe(self.settings.workers)  # before any verdict is final
        log_unparsed(lines)
        self.tally.unparsed(lines.unparsed, lines.unparsed_example)
        self.tally.add_gaps(lines.label_gaps(self.window))  # a label name the lines lack
        signalled: list[tuple[str, str, SignalHit]] = []
        not_flyte = 0
        for (ns, _pod), hit in hits.items():
            pd = self.projects.project_domain(ns)
            if pd is None:
                not_flyte += self._not_a_project(ns, hit)
            elif self.scope.covers(*pd):
                signalled.append((*pd, hit))
        self._pods.fill(signalled)
        self.tally.clear(Cleared.SIGNAL_NOT_FLYTE_POD, not_flyte)

    def _not_a_project(self, ns: str, hit: SignalHit) -> int:
        """A signalled namespace no project and domain maps to: 1 when it is no Flyte pod at all;
        a known project's namespace with an unknown domain part is shown as `unresolved`."""
        project = self.projects.known_project_of(ns)
        if project is None:
            return 1
        if not self.scope.projects or project in self.scope.projects:
            domains_of = self.projects.domains_of
            domains = ", ".join(domains_of[project]) if domains_of else ""
            self.tally.unresolve(
                hit,
                f"namespace {ns} names project {project} but none of its domains "
                f"({domains}): check [flyte] namespace_template and domains",
            )
        return 0

    # -- the Admin sweep -------------------------------------------------------------------------
    def _list_one(self, project: str, domain: str, filters: str) -> None:
        error = sweep.list_executions(
            self.sources.admin,
            self.lookups.slots,
            project,
            domain,
            filters,
            self._on_listed,
        )
        if error is not None:
            w = self.window
            self.tally.add_gap(
                Gap(
                    "admin",
                    w.start,
                    w.end,
                    f"{project}/{domain}: {error.cause}",
                    failure=error.kind,
                )
            )

    def _on_listed(self, ex: ExecutionRecord) -> None:
        """Sweep each listed execution once: the listings are disjoint when read, but an
        execution may move from one to the other while they are (a running one that ends)."""
        with self._lock:
            listed = self._listed.setdefault((ex.ref.project, ex.ref.domain), set())
            if ex.ref.name in listed:
                return
            listed.add(ex.ref.name)
        self._admin_lane.submit(partial(self._sweep_execution, ex))

    def _sweep_execution(self, ex: ExecutionRecord) -> None:
        try:
            with self.lookups.slots:
                swept = self.sources.admin.sweep_attempts(ex)
        except SourceError as e:
            self.tally.add_gap(
                Gap("admin", ex.created_at, ex.updated_at, f"{ex.ref}: {e.cause}", failure=e.kind)
            )
            return
        finally:
            self.progress.advance("sweep")
        attempts = swept.attempts
        for a in attempts:
            self.coverage.ran(a.started_at, a.ended_at)
        candidates = self._candidates(ex, attempts)
        with self._lock:
            self._swept.setdefault((ex.ref.project, ex.ref.domain), set()).add(ex.ref.name)
            if self._passed_over(ex.ref, swept.skipped) or swept.direct:
                # Pods no attempt claims send their execution to be looked up whole: a passed
                # over node's, or a child of a node listed directly (a `@dynamic` one's).
                self._partial.add(ex.ref)
            if not self._signals_final:
                self._parked.append((ex, attempts, candidates, swept.skipped))
                return
        self._settle(ex, attempts, candidates, swept.skipped)

    def _candidates(
        self,
        ex: ExecutionRecord,
        attempts: list[AttemptRecord],
        every: Sequence[AttemptRecord] | None = None,
    ) -> list[Candidate]:
        """The sweep candidates among `attempts` (`every`: all the execution's attempts listed,
        for re-runs of trials; default `attempts`), their outputs.pb checks batched."""
        siblings = attempts if every is None else every
        candidates = [
            Candidate(ex, a, siblings=siblings) for a in attempts if sweep_candidate(a, self.window)
        ]
        # Whether signalled or not, an elastic success needs its outputs.pb checked now, unless
        # its task declares outputs (Flyte then proved them before accepting the success).
        checks = []
        for c in candidates:
            if needs_outputs_check(c.att):
                checks.append(c)
            else:
                c.checked = True  # not yet shared with any other thread
        self._batch(checks)
        return candidates

    def _batch(self, checks: list[Candidate]) -> None:
        """Hold outputs.pb checks until `OUTPUTS_BATCH` of them (or the sweep's end): the more a
        batch holds, the more of a listing page's keys it needs (`callplan`)."""
        if not checks:
            return
        full = None
        with self._lock:
            self._outputs_batch += checks
            if len(self._outputs_batch) >= OUTPUTS_BATCH:
                full, self._outputs_batch = self._outputs_batch, []
        if full is not None:
            self._send_checks(full)

    def _send_checks(self, checks: list[Candidate]) -> None:
        """A batch of outputs.pb checks into the S3 lane: runs of sorted keys to walk, about one
        per worker, and a HEAD each for the rest."""
        # Where Admin gives no outputs.pb location (an empty dir, which no plan can list),
        # `lookups.outputs` says why with no S3 call.
        direct, runs = callplan.plan(
            checks,
            lambda c: "" if c.att.outputs_unknown else (c.att.output_dir or ""),
            lambda c: c.att.inputs_uri,
            self.settings.workers,
        )
        for run in runs:
            self._s3_lane.submit(partial(self._check_run, run))
        for c in direct:
            self._s3_lane.submit(partial(self._check_outputs, c))

    def _passed_over(self, ref: ExecutionRef, skipped: Sequence[SkippedNode]) -> bool:
        """Whether the sweep passed over a node `_settle` will not list: once the signals are
        final, one the evidence does not point at; before, any (caller holds `_lock`)."""
        if not skipped or not self._signals_final:
            return bool(skipped)
        pointed = self._pods.points_at(ref)
        return any(n.node_id not in pointed for n in skipped)

    def _was_swept(self, ref: ExecutionRef) -> bool:
        """Whether every task node of `ref` was listed by the sweep (an execution whose
        non-elastic nodes were passed over is looked up again for pods no attempt claimed)."""
        with self._lock:
            return ref.name in self._swept.get((ref.project, ref.domain), ()) and (
                ref not in self._partial
            )

    def _settle(
        self,
        ex: ExecutionRecord,
        attempts: list[AttemptRecord],
        candidates: list[Candidate],
        skipped: Sequence[SkippedNode] = (),
    ) -> None:
        """Signals are final: list the passed-over nodes the evidence points at, join the
        signals to this execution's attempts and release its candidates."""
        pointed = self._pods.points_at(ex.ref) if skipped else frozenset()
        wanted = [n for n in skipped if n.node_id in pointed]
        if wanted:
            try:
                with self.lookups.slots:
                    more = self.sources.admin.node_attempts(ex.ref, wanted)
            except SourceError as e:
                w = (ex.created_at, ex.updated_at)
                self.tally.add_gap(Gap("admin", *w, f"{ex.ref}: {e.cause}", failure=e.kind))
                more = []
            for a in more:  # as the sweep marks the attempts it listed
                self.coverage.ran(a.started_at, a.ended_at)
            attempts = [*attempts, *more]
            candidates = [*candidates, *self._candidates(ex, more, every=attempts)]
        hits = self._pods.match(ex, attempts)
        by_ref = {c.att.ref: c for c in candidates}
        for att in attempts:
            signal = hits.get(att.ref)
            c = by_ref.get(att.ref)
            disruption = self.disruptions.for_attempt(ex, att, self.settings)
            if c is None and signal is None:
                # The whole class (docs/verdicts.md): any task's success whose pod Kubernetes
                # recorded as disrupted is examined; only where evidence points (bounded cost).
                if disruption is not None and disruption_candidate(att, self.window):
                    later = [a for a in attempts if a.ref.node_id == att.ref.node_id]
                    self._signalled(Candidate(ex, att, None, later, disruption=disruption))
                continue
            if signal is not None:
                later = [a for a in attempts if a.ref.node_id == att.ref.node_id]
                if c is None:
                    self._signalled(
                        Candidate(ex, att, signal, later, disruption=disruption, siblings=attempts)
                    )
                    continue
                c.later = later
            if c is not None:
                c.disruption = disruption
                self._release(c, signal)

    # -- signalled pods that no swept execution claimed: one by one --------------------------------
    def _resolve_unclaimed(self) -> None:
        """Look up each signalled pod no swept execution claimed (a hashed name, a failed
        listing, a pod that is no Flyte task's), then decide the attempts found."""
        unmatched = self._pods.unclaimed()
        late: dict[AttemptRef, tuple[ExecutionRecord, AttemptRecord, list[SignalHit]]] = {}
        for key in unmatched:
            self._admin_lane.submit(partial(self._resolve_one, key, late))
        self._admin_lane.drain()
        for ex, att, hits in late.values():
            every = self.lookups.attempts(ex.ref)
            later = [a for a in every if a.ref.node_id == att.ref.node_id]
            disruption = self.disruptions.for_attempt(ex, att, self.settings)
            self._signalled(
                Candidate(ex, att, earliest(hits), later, disruption=disruption, siblings=every)
            )

    def _resolve_one(
        self,
        key: PodKey,
        late: dict[AttemptRef, tuple[ExecutionRecord, AttemptRecord, list[SignalHit]]],
    ) -> None:
        ns, pod = key
        hit = self._pods.hit(key)
        try:
            with self.lookups.slots:
                result = resolve(
                    self.lookups, self.projects, ns, pod, hit.at, self.scope, swept=self._was_swept
                )
        except SourceError as e:
            # The second around the signal: a window a rescan can cover (a point could not).
            end = hit.at + timedelta(seconds=1)
            self.tally.add_gap(
                Gap("admin", hit.at, end, f"pod {ns}/{pod}: {e.cause}", failure=e.kind)
            )
            return
        match result:
            case Unowned(reason=reason):
                self.tally.unresolve(hit, reason)
            case OutOfScope():
                pass
            case Cleared():
                self.tally.clear(result)
            case (ex, att):
                with self._lock:
                    # A PyTorchJob's pods collapse into one attempt.
                    late.setdefault(att.ref, (ex, att, []))[2].append(hit)
            case _:
                assert_never(result)

    # -- candidates: outputs.pb, then the verdict ----------------------------------------------
    def _signalled(self, c: Candidate) -> None:
        """A signalled attempt the sweep did not check: outputs.pb if only S3 knows, then decide.
        `c` is new here (no other thread holds it): its flags need no lock yet."""
        c.final = True
        if needs_outputs_check(c.att):
            self._s3_lane.submit(partial(self._check_outputs, c))
        else:
            c.checked = c.done = True
            self._conclude(c)  # failed, unfinished or outputs declared: decided without S3

    @staticmethod
    def _both_known(c: Candidate) -> bool:
        """Under `_lock`, after `c.final` or `c.checked` was set: True exactly once, for the
        second of the two (the one that concludes `c`)."""
        ready = c.checked and c.final and not c.done
        c.done = c.done or ready
        return ready

    def _release(self, c: Candidate, signal: SignalHit | None) -> None:
        with self._lock:
            c.signal, c.final = signal, True
            ready = self._both_known(c)
        if ready:
            self._s3_lane.submit(partial(self._conclude, c))  # a finding lists its checkpoint

    def _check_run(self, run: list[callplan.Listed[Candidate]]) -> None:
        """A run of sorted outputs.pb keys answered by walking their bucket's listing; a HEAD
        each for what no page answered."""
        store = self.sources.store

        def list_from(bucket: str, prefix: str, after: str, keys: int) -> KeyPage | ObjectCheck:
            page = store.list_from(bucket, prefix, after, keys)
            if isinstance(page, ObjectCheck) and self._first_refusal(bucket):
                log.info(
                    "s3://%s/%s: listing failed (%s): outputs.pb checked with a HEAD each",
                    bucket,
                    prefix,
                    page.reason,
                )
            return page

        for w in callplan.walk(run, list_from):
            if w.outputs is None:
                self._check_outputs(w.item)
            else:
                self._check_outputs(
                    w.item, store.judged(w.outputs, w.item.att.inputs_uri, w.witness)
                )

    def _first_refusal(self, bucket: str) -> bool:
        """True the first time a listing of `bucket` fails in this run (one log line)."""
        with self._lock:
            first = bucket not in self._refused
            self._refused.add(bucket)
        return first

    def _check_outputs(self, c: Candidate, outputs: ObjectCheck | None = None) -> None:
        if outputs is None:
            outputs = self.lookups.outputs(c.att)
        with self._lock:
            c.outputs, c.checked = outputs, True
            ready = self._both_known(c)
        if ready:
            self._conclude(c)

    def _conclude(self, c: Candidate) -> None:
        decision = c.decide()
        ex, att, signal, outputs = c.ex, c.att, c.signal, decision.outputs
        if log.isEnabledFor(logging.INFO):  # one line per candidate: not built unless shown
            log.info(
                "%s %s/%s (%s, signal %s, outputs.pb %s): %s",
                ex.ref,
                att.ref.node_id,
                att.ref.attempt,
                att.phase,
                rfc3339(signal.at) if signal else "none",
                outputs.state if outputs else "not checked",
                decision.verdict or f"cleared: {decision.cleared}",
            )
        finding = None
        if decision.is_finding:
            checkpoint = self.lookups.checkpoint(ex, att, signal)
            links = finding_links(self.settings, ex, signal)
            finding = build_finding(
                decision, ex, att, signal, checkpoint, links, disruption=c.disruption
            )
            finding = note_absent(self.coverage, att, finding)
        self.tally.record(decision, ex, att, signal, finding)
