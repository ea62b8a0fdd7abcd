"""Collect a scan's evidence: per examined attempt one `Evidence`, plus the gaps and counts.

The reads run in phases; each ends with a join (`Pools.results`), and what a phase decides
reads only what the phases before it finished:

1. ListProjects: the Loki query, the namespace mapping and the sweep's listings need each
   project's domains.
2. At once: the Loki death signals (then the coverage probes) and the disruption sources
   (`[k8s_events]`, `[prometheus]`), and the Admin sweep: the listings (`sweep.listings`), each
   execution swept once (its nodes that can run an elastic task). The outputs.pb checks that
   need no signal (elastic successes ending in the window) are sent to the S3 pool in batches
   of `OUTPUTS_BATCH` as the sweep finds them. Join.
3. With the signals final: the last batch of outputs.pb checks is walked (`callplan`) while
   the passed-over nodes the evidence points at are listed; join. The signals and the
   batches' answers are joined to the swept attempts by pod name (`join.PodIndex`), each
   evidence built once, whole. Then the signalled pods no swept execution claims are looked
   up one by one (`resolve`); join.
4. A HEAD each for the attempts no batch checked: those only a signal or a disruption made
   candidates, and a passed-over node's. Join.

docs/performance.md says what each phase calls and what it costs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from forensics.concurrency import Pools
from forensics.detect import (
    Cleared,
    assert_never,
    disruption_candidate,
    earliest,
    needs_outputs_check,
    sweep_candidate,
)
from forensics.errors import SourceError
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    Gap,
    KeyPage,
    ObjectCheck,
    ShardRead,
    SignalHit,
    UnparsedLine,
    Unresolved,
    Window,
)
from forensics.progress import NULL, Progress
from forensics.scan import callplan, sweep
from forensics.scan.coverage import Coverage, coverage_gaps
from forensics.scan.disruptions import (
    DisruptionIndex,
    blind_events_gaps,
    disruption_reads,
    disruption_sources_on,
)
from forensics.scan.evidence import Evidence
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
from forensics.sources import Sources
from forensics.sources.admin_types import SkippedNode
from forensics.sources.k8s_events import EventsRead
from forensics.sources.loki_limits import reading_length

log = logging.getLogger("elastic-audit")

# outputs.pb checks sent together (the rest after the sweep): the more a batch holds, the more
# of a listing page's keys it needs (`callplan`); a batch's attempts wait in memory meanwhile.
OUTPUTS_BATCH = 50_000


@dataclass(frozen=True)
class Collected:
    """What a scan read: the evidence per examined attempt, the gaps, the signalled pods
    cleared before any attempt was found (no Flyte pod), the signalled Flyte pods no attempt
    owns, and the death-signal lines that could not be read."""

    window: Window
    scope: ScanScope
    evidence: tuple[Evidence, ...]
    gaps: tuple[Gap, ...]
    cleared: tuple[Cleared, ...] = ()
    unresolved: tuple[Unresolved, ...] = ()
    unparsed: int = 0
    unparsed_example: UnparsedLine | None = None


@dataclass(frozen=True, slots=True)
class _Swept:
    """One execution as the sweep read it: the attempts listed and the task nodes passed over
    (`direct`: its nodes were listed directly, a `@dynamic` node's children unseen)."""

    ex: ExecutionRecord
    attempts: list[AttemptRecord]
    skipped: tuple[SkippedNode, ...]
    direct: bool


@dataclass(frozen=True, slots=True)
class _Listing:
    """One of the sweep's listings (`sweep.listings`) and its pages, read one at a time."""

    project: str
    domain: str
    filters: str
    pages: Iterator[list[ExecutionRecord]]


class _Signals(NamedTuple):
    pods: PodIndex  # the signalled pods in scope (the earliest hit each)
    cleared: list[Cleared]  # a signalled pod of no Flyte namespace each
    unresolved: list[Unresolved]  # a known project's namespace with an unknown domain each
    unparsed: int
    example: UnparsedLine | None
    gaps: list[Gap]


Step = Callable[[str], None]
# Per execution, the passed-over nodes the evidence points at and their attempts (or the gap).
_PassedOver = dict[ExecutionRef, tuple[list[SkippedNode], list[AttemptRecord] | Gap]]


def collect(
    sources: Sources,
    window: Window,
    scope: ScanScope = ScanScope(),
    *,
    progress: Progress | None = None,
    lookups: Lookups | None = None,
    step: Step = lambda name: None,
) -> Collected:
    """Read the evidence of every attempt the scan examines in `window` within `scope`.

    `step(name)` is called as each phase ends (the `-v` timing line). The first error of any
    read (a bug, a refused query) stops the others and is raised here; so is Ctrl-C.
    """
    return _Collect(sources, window, scope, progress or NULL, lookups or Lookups(sources)).run(step)


class _Collect:
    """The phases of one collection; the state a phase shares between its threads is the
    sweep's bookkeeping (listed names, the batch of outputs.pb checks not yet sent) only."""

    def __init__(
        self,
        sources: Sources,
        window: Window,
        scope: ScanScope,
        progress: Progress,
        lookups: Lookups,
    ) -> None:
        self.sources = sources
        self.settings = settings = sources.settings
        self.window = window
        self.scope = scope
        self.progress = progress
        self.lookups = lookups
        self.projects = Projects(settings)
        lk = settings.loki
        # Whether Loki still holds the task pods' logs, shard by shard (docs/upstream.md).
        self.coverage = Coverage(
            sources.loki, window, reading_length(lk.shard, lk.max_query_length)
        )
        self.pools = Pools({})  # made once the projects are known (`_run`)
        self._lock = threading.Lock()
        self._listed: set[ExecutionRef] = set()
        self._batch: list[AttemptRecord] = []  # outputs.pb checks not yet sent
        self._checks: list[Future[dict[AttemptRef, ObjectCheck]]] = []
        self._refused: set[str] = set()  # buckets whose listing failed (logged once each)
        # Executions whose every task node the sweep listed: `resolve` does not read them again.
        self._swept_whole: set[ExecutionRef] = set()

    def run(self, step: Step) -> Collected:
        try:
            collected = self._run(step)
        except BaseException:
            self.pools.close()  # running jobs see the stop
            raise
        self.pools.close(idle=True)  # every job has ended
        return collected

    def _run(self, step: Step) -> Collected:
        gaps: list[Gap] = []
        # 1. ListProjects (a scope naming an unknown project or domain stops here, exit 2).
        projects, w = self.projects, self.window
        projects.load(self.sources.admin, self.scope, self.lookups.slots)
        if projects.error is not None:
            why = f"listing projects: {projects.error}"
            gaps.append(Gap("admin", w.start, w.end, why, failure=projects.failure))
        step("projects")
        todo = sweep.listings(projects, self.scope, w, self.settings.flyte.clock_skew)
        workers = self.settings.workers
        sizes = {"loki": 2, "admin": workers, "s3": workers}
        self.pools = Pools(sizes)
        self.coverage.selector = task_selector(
            self.settings, self.scope, projects.scope_domains(self.scope)
        )
        # 2. Loki and the disruption sources, beside the Admin sweep.
        swept, signals, reads = self._read(todo, gaps, step)
        # 3. The evidence joined: signals, disruptions, the nodes they point at, unclaimed pods.
        gaps += signals.gaps
        for read in reads:
            gaps += events_gaps(read)
        gaps += coverage_gaps(self.coverage, self.sources.loki)
        if self.coverage.any_ran():
            gaps += blind_events_gaps(reads, w)
        unresolved, cleared, pods = list(signals.unresolved), list(signals.cleared), signals.pods
        disruptions = DisruptionIndex()
        disruptions.fill(*reads)
        pods.point(self._disrupted_pods(disruptions))
        self._flush()  # the last batch, walked while the passed-over nodes are listed
        more = self._passed_over(swept, pods)
        found = self._found()
        step("outputs.pb checks")
        # Coverage is final: which attempts ran where Loki holds no task log (none, unless a
        # shard is dark).
        coverage = self.coverage if self.coverage.any_dark() else None
        evidence, direct = self._join(swept, more, pods, disruptions, gaps, found, coverage)
        swept.clear()  # what no evidence holds (attempts, passed-over nodes) goes now
        step("signals joined")
        direct += self._unclaimed(pods, disruptions, unresolved, cleared, gaps)
        step("unclaimed pods")
        # 4. A HEAD each for the attempts no batch checked.
        evidence += self._checked(direct, coverage)
        step("outputs.pb HEADs")
        return Collected(
            w,
            self.scope,
            tuple(evidence),
            tuple(gaps),
            tuple(cleared),
            tuple(unresolved),
            signals.unparsed,
            signals.example,
        )

    # -- 2. Loki, the disruption sources and the Admin sweep, at once -----------------------------
    def _read(
        self, todo: list[sweep.Listing], gaps: list[Gap], step: Step
    ) -> tuple[list[_Swept], _Signals, list[EventsRead]]:
        pools = self.pools
        signals = pools.submit("loki", self._read_signals)
        events = None
        if disruption_sources_on(self.settings):
            events = pools.submit("loki", self._read_disruptions)
        self.progress.start("sweep", "Sweeping Admin executions", None)
        swept: list[_Swept] = []
        seeds = [_Listing(*listing, self.lookups.execution_pages(*listing)) for listing in todo]
        for s in pools.crawl("admin", seeds, self._sweep_work, self.settings.workers):
            if isinstance(s, Gap):
                gaps.append(s)
            else:
                swept.append(s)
        step("sweep")
        (read,) = pools.results([signals])
        reads = pools.results([events])[0] if events is not None else []
        step("signals")
        self.progress.finish("sweep")
        return swept, read, reads

    def _read_signals(self) -> _Signals:
        """The earliest death-signal hit per (namespace, pod), then the coverage probes."""
        settings, window = self.settings, self.window
        query = signal_query(settings, self.scope, self.projects.scope_domains(self.scope))
        self.progress.start("loki", "Reading Loki shards", log_window(window, settings.loki, query))
        lines = SignalLines(self.sources.loki, settings.loki)
        gaps: list[Gap] = []

        def shard_read(item: ShardRead) -> None:
            log_shard(item)
            self.coverage.shard_read(item)
            gaps.extend(shard_gaps(item))
            self.progress.advance("loki")

        read = lines.read(query, window, shard_read, stop=self.pools.stop)
        hits = earliest_per_pod(read, window)
        self.progress.finish("loki")
        self.coverage.probe(settings.workers)  # before any verdict is final
        log_unparsed(lines)
        gaps += lines.label_gaps(window)  # a label name the lines lack
        # Indexed here, beside the sweep: joining them to the swept attempts waits for both.
        unresolved: list[Unresolved] = []
        cleared: list[Cleared] = []
        pods = self._pod_index(hits, unresolved, cleared)
        return _Signals(pods, cleared, unresolved, lines.unparsed, lines.unparsed_example, gaps)

    def _read_disruptions(self) -> list[EventsRead]:
        """Events in Loki (`[k8s_events]`) and DisruptionTarget conditions in Prometheus
        (`[prometheus]`), only of the namespaces in scope."""
        return disruption_reads(self.sources, self.window, self.pools.stop, self._in_scope)

    def _in_scope(self, ns: str) -> bool:
        pd = self.projects.project_domain(ns)
        return pd is not None and self.scope.covers(*pd)

    def _sweep_work(
        self, item: _Listing | ExecutionRecord, add: Callable[[object], None]
    ) -> _Swept | Gap | None:
        """One item of the sweep's work (`Pools.crawl`): a listing's next page, whose
        executions not listed yet are added after the page that follows (a failed page is the
        listing's gap), or one execution swept. One Admin call at a time per worker: the admin
        pool alone bounds the calls in flight."""
        if isinstance(item, ExecutionRecord):
            return self._sweep(item)
        try:
            page = next(item.pages, None)
        except SourceError as e:
            w = self.window
            why = f"{item.project}/{item.domain}: {e.cause}"
            return Gap("admin", w.start, w.end, why, failure=e.kind)
        if page is None:
            return None
        add(item)  # the next page, read while this one's executions are swept
        for ex in page:
            # Sweep each listed execution once: the listings are disjoint when read, but an
            # execution may move from one to the other while they are (a running one that ends).
            with self._lock:
                new = ex.ref not in self._listed
                self._listed.add(ex.ref)
            if new:
                add(ex)
        return None

    def _sweep(self, ex: ExecutionRecord) -> _Swept | Gap:
        """The execution's attempts of the nodes that can run an elastic task; its outputs.pb
        checks that need no signal go to the batch."""
        try:
            swept = self.lookups.sweep(ex)
        except SourceError as e:
            return Gap(
                "admin", ex.created_at, ex.updated_at, f"{ex.ref}: {e.cause}", failure=e.kind
            )
        finally:
            self.progress.advance("sweep")
        for a in swept.attempts:  # where Loki must hold the task pods' logs
            self.coverage.ran(a.started_at, a.ended_at)
        self._add_checks(self._candidates(swept.attempts))
        return _Swept(ex, swept.attempts, swept.skipped, swept.direct)

    def _candidates(self, attempts: Sequence[AttemptRecord]) -> list[AttemptRecord]:
        """The sweep candidates among `attempts` whose outputs.pb only S3 can prove (a task
        that declares outputs had them proven by Flyte before it accepted the success)."""
        w = self.window
        return [a for a in attempts if sweep_candidate(a, w) and needs_outputs_check(a)]

    def _add_checks(self, attempts: list[AttemptRecord]) -> None:
        if not attempts:
            return
        full = None
        with self._lock:
            self._batch += attempts
            if len(self._batch) >= OUTPUTS_BATCH:
                full, self._batch = self._batch, []
        if full is not None:
            self._send(full)

    def _send(self, attempts: list[AttemptRecord]) -> None:
        """A batch of outputs.pb checks into the S3 pool: runs of sorted keys to walk, about one
        per worker, and a HEAD each for the rest."""
        # Where Admin gives no outputs.pb location (an empty dir, which no plan can list),
        # `lookups.outputs` says why with no S3 call.
        direct, runs = callplan.plan(
            attempts,
            lambda a: "" if a.outputs_unknown else (a.output_dir or ""),
            lambda a: a.inputs_uri,
            self.settings.workers,
        )
        futures = [self.pools.submit("s3", self._check_run, attempts, run) for run in runs]
        futures += [self.pools.submit("s3", self._check_one, attempts[i]) for i in direct]
        with self._lock:
            self._checks += futures

    def _check_run(
        self, attempts: list[AttemptRecord], run: list[callplan.Listed]
    ) -> dict[AttemptRef, ObjectCheck]:
        """A run of sorted outputs.pb keys (of `attempts`) answered by walking their bucket's
        listing; a HEAD each for what no page answered."""
        lookups = self.lookups

        def list_from(bucket: str, prefix: str, after: str, keys: int) -> KeyPage | ObjectCheck:
            page = lookups.list_from(bucket, prefix, after, keys)
            if isinstance(page, ObjectCheck) and self._first_refusal(bucket):
                log.info(
                    "s3://%s/%s: listing failed (%s): outputs.pb checked with a HEAD each",
                    bucket,
                    prefix,
                    page.reason,
                )
            return page

        out = {}
        for w in callplan.walk(run, list_from):
            att = attempts[w.index]
            if w.outputs is None:
                out[att.ref] = lookups.outputs(att)
            else:
                out[att.ref] = lookups.judged(w.outputs, att.inputs_uri, w.witness)
        return out

    def _check_one(self, att: AttemptRecord) -> dict[AttemptRef, ObjectCheck]:
        return {att.ref: self.lookups.outputs(att)}

    def _first_refusal(self, bucket: str) -> bool:
        """True the first time a listing of `bucket` fails in this run (one log line)."""
        with self._lock:
            first = bucket not in self._refused
            self._refused.add(bucket)
        return first

    # -- 3. the signals joined to the swept attempts ------------------------------------------------
    def _pod_index(
        self,
        hits: dict[PodKey, SignalHit],
        unresolved: list[Unresolved],
        cleared: list[Cleared],
    ) -> PodIndex:
        """The signalled pods in scope, by project and domain; a pod of no Flyte namespace is
        cleared, a known project's with an unknown domain part is `unresolved`."""
        signalled: list[tuple[str, str, SignalHit]] = []
        for (ns, _pod), hit in hits.items():
            pd = self.projects.project_domain(ns)
            if pd is None:
                if self._not_a_project(ns, hit, unresolved):
                    cleared.append(Cleared.SIGNAL_NOT_FLYTE_POD)
            elif self.scope.covers(*pd):
                signalled.append((*pd, hit))
        pods = PodIndex()
        pods.fill(signalled)
        return pods

    def _not_a_project(self, ns: str, hit: SignalHit, unresolved: list[Unresolved]) -> bool:
        """True when `ns` is no Flyte pod's at all; a known project's namespace with an unknown
        domain part is shown as `unresolved` (when the scope covers the project)."""
        project = self.projects.known_project_of(ns)
        if project is None:
            return True
        if not self.scope.projects or project in self.scope.projects:
            domains_of = self.projects.domains_of
            domains = ", ".join(domains_of[project]) if domains_of else ""
            why = (
                f"namespace {ns} names project {project} but none of its domains "
                f"({domains}): check [flyte] namespace_template and domains"
            )
            unresolved.append(Unresolved(hit, why))
        return False

    def _disrupted_pods(self, disruptions: DisruptionIndex) -> list[tuple[str, str, str]]:
        """A disrupted pod points the sweep at its node whatever its task (docs/performance.md):
        a plain task that exited 0 after its node was drained is examined too."""
        pointed = []
        for ns, pod in disruptions.pods():
            pd = self.projects.project_domain(ns)
            if pd is not None:
                pointed.append((*pd, pod))
        return pointed

    def _passed_over(self, swept: list[_Swept], pods: PodIndex) -> _PassedOver:
        """List the passed-over nodes the evidence points at: per execution, those nodes and
        their attempts (or the gap)."""
        wanted = {}
        for s in swept:
            nodes = pods.points_at(s.ex.ref) if s.skipped else frozenset()
            named = [n for n in s.skipped if n.node_id in nodes]
            if named:
                wanted[s.ex.ref] = (s.ex, named)
        listed = self.pools.results(
            [self.pools.submit("admin", self._node_attempts, ex, n) for ex, n in wanted.values()]
        )
        return {
            ref: (named, found)
            for (ref, (_, named)), found in zip(wanted.items(), listed, strict=True)
        }

    def _join(
        self,
        swept: list[_Swept],
        more: _PassedOver,
        pods: PodIndex,
        disruptions: DisruptionIndex,
        gaps: list[Gap],
        found: dict[AttemptRef, ObjectCheck],
        coverage: Coverage | None,
    ) -> tuple[list[Evidence], list[Evidence]]:
        """Join each swept execution's attempts (and those of its passed-over nodes, `more`)
        to the signals, the disruptions and the batches' outputs.pb answers (`found`): the
        evidence that is complete, and the evidence that still needs a check of its own (or
        none)."""
        complete: list[Evidence] = []
        direct: list[Evidence] = []
        for s in sorted(swept, key=lambda s: str(s.ex.ref)):  # a pod to the first that claims it
            named, listed = more.get(s.ex.ref, ((), None))
            extra: list[AttemptRecord] = []
            if isinstance(listed, Gap):
                gaps.append(listed)
            elif listed is not None:
                extra = listed
            # Pods no attempt claims send their execution to be looked up whole: a passed over
            # node's (not listed), or a child of a node listed directly (a `@dynamic` one's).
            if not s.direct and len(s.skipped) == len(named) and not isinstance(listed, Gap):
                self._swept_whole.add(s.ex.ref)
            self._settle(s, extra, pods, disruptions, found, coverage, complete, direct)
        return complete, direct

    def _node_attempts(
        self, ex: ExecutionRecord, nodes: list[SkippedNode]
    ) -> list[AttemptRecord] | Gap:
        try:
            return self.lookups.passed_over(ex.ref, nodes)
        except SourceError as e:
            return Gap(
                "admin", ex.created_at, ex.updated_at, f"{ex.ref}: {e.cause}", failure=e.kind
            )

    def _settle(
        self,
        s: _Swept,
        more: list[AttemptRecord],
        pods: PodIndex,
        disruptions: DisruptionIndex,
        found: dict[AttemptRef, ObjectCheck],
        coverage: Coverage | None,
        complete: list[Evidence],
        direct: list[Evidence],
    ) -> None:
        """The evidence of one swept execution's examined attempts: its sweep candidates (with
        their batch's outputs.pb answer), and the attempts a signal or a disruption names."""
        ex, window, settings = s.ex, self.window, self.settings
        attempts = [*s.attempts, *more] if more else s.attempts
        # A candidate's execution attempts are those listed with it (re-runs of trials).
        siblings = {a.ref: s.attempts for a in s.attempts if sweep_candidate(a, window)}
        siblings.update({a.ref: attempts for a in more if sweep_candidate(a, window)})
        hits = pods.match(ex, attempts)
        for att in attempts:
            signal = hits.get(att.ref)
            every = siblings.get(att.ref)
            disruption = disruptions.for_attempt(ex, att, settings)
            if every is None and signal is None:
                # The whole class (docs/verdicts.md): any task's success whose pod Kubernetes
                # recorded as disrupted is examined; only where evidence points (bounded cost).
                if disruption is not None and disruption_candidate(att, window):
                    node = _node_of(attempts, att)
                    direct.append(Evidence(ex, att, None, disruption, node))
                continue
            node = _node_of(attempts, att) if signal is not None else ()
            if every is None:
                direct.append(Evidence(ex, att, signal, disruption, node, attempts))
                continue
            outputs = found.get(att.ref)
            if outputs is None and needs_outputs_check(att):
                # a passed-over node's: listed after the last batch was sent
                direct.append(Evidence(ex, att, signal, disruption, node, every))
                continue
            absent = coverage is not None and coverage.absent(att.started_at, att.ended_at)
            complete.append(Evidence(ex, att, signal, disruption, node, every, outputs, absent))

    # -- 3. signalled pods that no swept execution claimed: one by one ------------------------------
    def _unclaimed(
        self,
        pods: PodIndex,
        disruptions: DisruptionIndex,
        unresolved: list[Unresolved],
        cleared: list[Cleared],
        gaps: list[Gap],
    ) -> list[Evidence]:
        """Look up each signalled pod no swept execution claimed (a hashed name, a failed
        listing, a pod that is no Flyte task's): the evidence of the attempts found."""
        keys = pods.unclaimed()
        hits = [pods.hit(key) for key in keys]
        found = self.pools.results([self.pools.submit("admin", self._resolve, h) for h in hits])
        late: dict[AttemptRef, tuple[ExecutionRecord, AttemptRecord, list[SignalHit]]] = {}
        for hit, result in zip(hits, found, strict=True):
            match result:
                case Gap():
                    gaps.append(result)
                case Unowned(reason=reason):
                    unresolved.append(Unresolved(hit, reason))
                case OutOfScope():
                    pass
                case Cleared():
                    cleared.append(result)
                case (ex, att):
                    # A PyTorchJob's pods collapse into one attempt.
                    late.setdefault(att.ref, (ex, att, []))[2].append(hit)
                case _:
                    assert_never(result)
        out = []
        for ex, att, signals in late.values():
            every = self.lookups.attempts(ex.ref)  # read by `resolve` already
            disruption = disruptions.for_attempt(ex, att, self.settings)
            node = _node_of(every, att)
            out.append(Evidence(ex, att, earliest(signals), disruption, node, every))
        return out

    def _resolve(self, hit: SignalHit) -> object:
        swept = self._swept_whole
        try:
            with self.lookups.slots:
                return resolve(
                    self.lookups,
                    self.projects,
                    hit.namespace,
                    hit.pod,
                    hit.at,
                    self.scope,
                    swept=lambda ref: ref in swept,
                )
        except SourceError as e:
            # The second around the signal: a window a rescan can cover (a point could not).
            end = hit.at + timedelta(seconds=1)
            why = f"pod {hit.namespace}/{hit.pod}: {e.cause}"
            return Gap("admin", hit.at, end, why, failure=e.kind)

    # -- the batches' answers, and the checks of their own -----------------------------------------
    def _flush(self) -> None:
        """Send the batch of outputs.pb checks still waiting (the sweep has ended)."""
        with self._lock:
            last, self._batch = self._batch, []
        if last:
            self._send(last)

    def _found(self) -> dict[AttemptRef, ObjectCheck]:
        """Every batch's outputs.pb answers (a join)."""
        with self._lock:
            futures = list(self._checks)
        found: dict[AttemptRef, ObjectCheck] = {}
        for answers in self.pools.results(futures):
            found.update(answers)
        return found

    def _checked(self, direct: list[Evidence], coverage: Coverage | None) -> list[Evidence]:
        """The evidence no batch checked, with a HEAD each where a check is needed."""
        own = [e for e in direct if needs_outputs_check(e.attempt)]
        heads = [self.pools.submit("s3", self.lookups.outputs, e.attempt) for e in own]
        checks = dict(zip(map(id, own), self.pools.results(heads), strict=True))
        return [self._final(e, checks.get(id(e)), coverage) for e in direct]

    @staticmethod
    def _final(e: Evidence, outputs: ObjectCheck | None, coverage: Coverage | None) -> Evidence:
        att = e.attempt
        absent = coverage is not None and coverage.absent(att.started_at, att.ended_at)
        if outputs is None and not absent:
            return e
        return Evidence(
            e.execution,
            att,
            e.signal,
            e.disruption,
            e.node_attempts,
            e.execution_attempts,
            outputs,
            absent,
        )


def _node_of(attempts: Sequence[AttemptRecord], att: AttemptRecord) -> list[AttemptRecord]:
    """Every attempt of `att`'s node among `attempts`."""
    return [a for a in attempts if a.ref.node_id == att.ref.node_id]
