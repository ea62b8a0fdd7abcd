"""Orchestration of a scan: window → Loki shards → candidates → Admin + S3 → verdicts → Report."""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from forensics import TOOL
from forensics.config import Settings
from forensics.detect import (
    PENDING,
    SIGNAL_NOT_FLYTE_POD,
    Verdict,
    checkpoint_location,
    classify_signalled,
    classify_unsignalled,
    console_link,
    earliest,
    explore_link,
    late_signal_note,
    needs_outputs_check,
    sweep_candidate,
    written_after,
)
from forensics.errors import NotFoundError, SourceError, UsageError
from forensics.evidence.flyte_names import (
    namespace_for,
    namespace_to_project_domain,
    parse_pod_name,
)
from forensics.evidence.logs import SIGNAL_LINE_REGEX, parse_signal
from forensics.model import (
    UTC,
    AttemptRecord,
    AttemptRef,
    Checkpoint,
    ExecutionRecord,
    ExecutionRef,
    Finding,
    Gap,
    LogEntry,
    ObjectCheck,
    Pending,
    Report,
    SignalHit,
    Summary,
    UnparsedLine,
    Unresolved,
    Window,
    rfc3339,
)
from forensics.progress import Progress
from forensics.sources.admin import AdminClient
from forensics.sources.admin_filters import attempts_may_end_during
from forensics.sources.logql import build_query, matcher, regex_escape, selector
from forensics.sources.loki import LokiClient, ShardOutcome
from forensics.sources.storage import ObjectStore

log = logging.getLogger("elastic-audit")


@dataclass(frozen=True)
class ScanScope:
    """Which projects and domains a scan covers (empty: every project, the configured domains)."""

    projects: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()


def task_selector(
    settings: Settings, scope: ScanScope, domains: Sequence[str] | None = None
) -> str:
    """The configured task selector, narrowed to the scope's namespaces when one is given.

    `domains`: the scope's projects' domains (from Admin unless configured; default: the
    configured ones). Values are RE2-escaped and LogQL-quoted, so a project name can never
    inject LogQL.
    """
    sel = settings.loki.task_selector.strip()
    if not scope.projects and not scope.domains:
        return sel
    domains = scope.domains or domains or settings.flyte.domains
    template = settings.flyte.namespace_template
    alternatives = []
    for d in domains:
        if scope.projects:
            alternatives += [regex_escape(namespace_for(p, d, template)) for p in scope.projects]
        else:
            head, _, tail = template.partition("{project}")
            lit = [regex_escape(part.replace("{domain}", d)) for part in (head, tail)]
            alternatives.append(lit[0] + ".+" + lit[1])
    extra = matcher(settings.loki.namespace_label, "=~", "(" + "|".join(alternatives) + ")")
    return sel[:-1].rstrip().rstrip(",") + ", " + extra + "}"


def signal_query(settings: Settings, scope: ScanScope, domains: Sequence[str] | None = None) -> str:
    """The LogQL query that finds death-signal lines: the task selector (see `task_selector`)
    and one line filter, `|~ SIGNAL_LINE_REGEX`, which matches every line `parse_signal` accepts
    (a superset)."""
    return build_query(task_selector(settings, scope, domains), [("|~", SIGNAL_LINE_REGEX)])


@dataclass(eq=False, slots=True)
class _Candidate:
    """One attempt whose verdict is being decided: it waits for its outputs.pb check (if it needs
    one) and for the signals to be final (Loki read, pods matched), then it is concluded once."""

    ex: ExecutionRecord
    att: AttemptRecord
    signal: SignalHit | None = None
    later: Sequence[AttemptRecord] = ()  # the attempts of the same node (retried or not)
    outputs: ObjectCheck | None = None
    checked: bool = False  # outputs known (or not needed)
    final: bool = False  # signal known
    done: bool = False


@dataclass(frozen=True)
class Unowned:
    """A signalled pod that is evidently Flyte's but that no attempt owns, and why (SPEC §5)."""

    reason: str


class _Stopped(Exception):
    """The scan is stopping (an error elsewhere, or Ctrl-C): a job gives up quietly."""


class _Lane:
    """`workers` daemon threads running jobs from one bounded queue (one lane per source).

    Bounded: a producer waits while the queue is full (a few jobs per worker), so memory holds
    only what is in flight, however many executions the window has. The first exception a job
    raises stops the scan and is re-raised by `drain()` in the caller's thread; once the scan
    stops, queued jobs are dropped and the workers end.
    """

    def __init__(self, name: str, workers: int, stop: threading.Event, errors: list[BaseException]):
        self._stop = stop
        self._errors = errors
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=64 + 4 * workers)
        self._pending = 0
        self._idle = threading.Condition()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, job: Callable[[], None]) -> None:
        with self._idle:
            self._pending += 1
        while True:
            if self._stop.is_set():
                with self._idle:
                    self._pending -= 1
                raise _Stopped()
            try:
                self._queue.put(job, timeout=0.1)
                return
            except queue.Full:
                continue

    def _work(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=0.5)
            except queue.Empty:
                if self._stop.is_set():
                    return
                continue
            if job is None:
                return
            try:
                if not self._stop.is_set():
                    job()
            except _Stopped:
                pass
            except BaseException as e:  # a bug must surface in the caller, not vanish here
                self._errors.append(e)
                self._stop.set()
            finally:
                with self._idle:
                    self._pending -= 1
                    if self._pending == 0:
                        self._idle.notify_all()

    def drain(self) -> None:
        """Wait until every submitted job has run (Ctrl-C stays deliverable meanwhile)."""
        with self._idle:
            while self._pending and not self._stop.is_set():
                self._idle.wait(0.1)
        _raise_first(self._errors)

    def close(self) -> None:
        """End the workers: at once when idle, else once they see the stop (never waits)."""
        for _ in self._threads:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break


def _raise_first(errors: list[BaseException]) -> None:
    if errors:
        raise errors[0]


def _join(thread: threading.Thread, errors: list[BaseException]) -> None:
    """Join `thread` in short steps, so Ctrl-C reaches the main thread meanwhile."""
    while thread.is_alive():
        thread.join(0.1)
        _raise_first(errors)
    _raise_first(errors)


class Scanner:
    """Runs one scan against the three sources; every outside call goes through them.

    `run` is one pipeline (SPEC §8): the Loki shards, the Admin sweep and the S3 checks run at
    the same time, each source at most `settings.workers` requests at once. One ListProjects
    gives each project's domains; executions stream from two disjoint listings per project and
    domain (`attempts_may_end_during`: those updated in the window, and those still running
    since before it); each costs one ListNodeExecutions and one ListTaskExecutions per task
    node, and each elastic success of a task that declares no outputs one outputs.pb check.
    Death signals are joined to the swept attempts by pod name, so a signalled attempt costs no
    extra Admin call; only signalled pods that no swept execution claims are looked up one by
    one (`resolve`). Memory holds what is in flight, the signalled pods and the findings: it
    grows with candidates, not with log lines.
    """

    def __init__(
        self,
        settings: Settings,
        loki: LokiClient,
        admin: AdminClient,
        store: ObjectStore,
        *,
        progress: Progress | None = None,
    ) -> None:
        self.settings = settings
        self.loki = loki
        self.admin = admin
        self.store = store
        self.progress = progress or Progress.null()
        self._lock = threading.Lock()
        self._executions: dict[ExecutionRef, ExecutionRecord | None] = {}
        self._attempts: dict[ExecutionRef, list[AttemptRecord]] = {}
        self._ref_locks: dict[ExecutionRef, threading.Lock] = defaultdict(threading.Lock)
        # Admin calls in flight, whichever thread makes them: at most `workers`.
        self._admin_slots = threading.BoundedSemaphore(settings.workers)
        self._swept: dict[tuple[str, str], set[str]] = {}
        self._inputs: dict[ExecutionRef, dict[str, str]] = {}
        self.unparsed: tuple[int, UnparsedLine | None] = (0, None)  # of the last `signals`
        # Each project's domains (None: not known, the configured domains stand in).
        self._projects: dict[str, tuple[str, ...]] | None = None
        self._projects_error: str | None = None

    # -- cached Admin look-ups -------------------------------------------------------------
    def execution(self, ref: ExecutionRef) -> ExecutionRecord | None:
        with self._ref_locks[ref]:
            if ref not in self._executions:
                try:
                    self._executions[ref] = self.admin.get_execution(ref)
                except NotFoundError:
                    self._executions[ref] = None
            return self._executions[ref]

    def attempts(self, ref: ExecutionRef) -> list[AttemptRecord]:
        with self._ref_locks[ref]:
            if ref not in self._attempts:
                self._attempts[ref] = self.admin.list_attempts(ref)
            return self._attempts[ref]

    # -- phase 1: Loki ---------------------------------------------------------------------
    def signals(
        self, window: Window, scope: ScanScope, stop: threading.Event | None = None
    ) -> tuple[dict[tuple[str, str], SignalHit], list[Gap], int]:
        """The earliest death-signal hit per (namespace, pod), the Loki gaps, the shard count."""
        query = signal_query(self.settings, scope, self._scope_domains(scope))
        labels = self.settings.loki
        hits: dict[tuple[str, str], SignalHit] = {}
        gaps: list[Gap] = []
        unparsed = 0
        unparsed_first: LogEntry | None = None
        shards = len(window.split(min(labels.shard, labels.max_query_length)))
        log.info(
            "window %s → %s (end exclusive): %d Loki shard(s) of at most %s at %s; query %s",
            rfc3339(window.start),
            rfc3339(window.end),
            shards,
            _hours(labels.shard),
            labels.url,
            query,
        )
        self.progress.start("loki", "Reading Loki shards", shards)
        items = self.loki.scan(
            query, window, shard=labels.shard, max_query_length=labels.max_query_length
        )
        try:
            for item in items:
                if stop is not None and stop.is_set():
                    raise _Stopped()
                if isinstance(item, ShardOutcome):
                    log.info(
                        "Loki shard %s → %s: %s, %d line(s) in %d request(s)",
                        rfc3339(item.window.start),
                        rfc3339(item.window.end),
                        "read" if not item.failures else f"FAILED ({item.error or 'in part'})",
                        item.entries,
                        item.requests,
                    )
                    for part, error in item.failures:
                        gaps.append(Gap("loki", part.start, part.end, error))
                    self.progress.advance("loki")
                    continue
                hit = parse_signal(
                    item,
                    namespace_label=labels.namespace_label,
                    pod_label=labels.pod_label,
                    container_label=labels.container_label,
                )
                if hit is None:
                    # Loki matched it as a death signal: an unreadable one is counted and shown.
                    unparsed += 1
                    if unparsed_first is None or item.ts_ns < unparsed_first.ts_ns:
                        unparsed_first = item
                    continue
                if hit.at in window:
                    # Only the earliest line of a pod counts (SPEC §5); ties keep the first.
                    key = (hit.namespace, hit.pod)
                    first = hits.get(key)
                    if first is None or hit.at < first.at:
                        hits[key] = hit
        finally:
            items.close()  # stops the shard workers when the scan stops early
        self.progress.finish("loki")
        self.unparsed = (unparsed, _unparsed_example(unparsed_first))
        return hits, gaps, shards

    # -- signalled pods that no swept execution claimed: one by one ---------------------------
    def resolve(
        self, namespace: str, pod: str, at: datetime, scope: ScanScope
    ) -> tuple[ExecutionRecord, AttemptRecord] | Unowned | str:
        """The attempt a pod belongs to, or why it is none: a cleared-reason string, or
        `Unowned` for a pod that is evidently Flyte's yet no attempt owns (SPEC §5).

        Executions the current run has swept already are skipped: their attempts were matched
        against every signalled pod when they were read.
        """
        pd = self.project_domain(namespace)
        if pd is None:
            return SIGNAL_NOT_FLYTE_POD
        project, domain = pd
        if scope.projects and project not in scope.projects:
            return "out-of-scope"
        if scope.domains and domain not in scope.domains:
            return "out-of-scope"
        parsed = parse_pod_name(pod)
        if parsed is not None:
            for name, _node, _attempt in parsed.candidates:
                ref = ExecutionRef(project, domain, name)
                if self._was_swept(ref):
                    continue
                ex = self.execution(ref)
                if ex is None:
                    continue
                for a in self.attempts(ref):
                    if pod in a.pods or parsed.generated in a.pods:
                        return ex, a
        # Hashed (or otherwise unparseable) names: look among the executions live at `at`,
        # including those still running with an old `updated_at` (FACTS §13).
        for filters in attempts_may_end_during(at, at + timedelta(seconds=1)):
            for ex in self.admin.list_executions(project, domain, filters=filters):
                if self._was_swept(ex.ref):
                    continue
                with self._lock:
                    self._executions.setdefault(ex.ref, ex)
                for a in self.attempts(ex.ref):
                    if pod in a.pods or (parsed and parsed.generated in a.pods):
                        return ex, a
        if parsed is not None:
            # A task pod's name in a Flyte namespace that no attempt owns: evidently Flyte's,
            # so a configuration problem to show, not a pod to clear (SPEC §5).
            return Unowned(
                f"a task pod's name in {project}/{domain}'s namespace, but no attempt of "
                f"{project}/{domain} owns it (check [flyte] namespace_template and domains)",
            )
        return SIGNAL_NOT_FLYTE_POD

    # -- projects and their domains ---------------------------------------------------------
    def load_projects(self, scope: ScanScope = ScanScope()) -> None:
        """Each project's domains: `[flyte] domains` when configured, else Admin's (SPEC §4.4).

        A scope naming a project Admin does not know, or a domain that project does not have, is
        a usage error (flyteadmin answers an unknown domain with an empty page, FACTS §13, so a
        typo would read as "coverage complete"). If ListProjects fails the scan goes on with
        the configured domains and a gap says the sweep is missing.
        """
        flyte = self.settings.flyte
        self._projects = None
        self._projects_error = None
        try:
            with self._admin_slots:
                listed = self.admin.project_domains()
        except SourceError as e:
            self._projects_error = e.cause
            return
        if flyte.domains_configured:
            listed = {p: tuple(flyte.domains) for p in listed}
        projects = {p: d or tuple(flyte.domains) for p, d in listed.items()}
        for p in scope.projects:
            if p not in projects:
                known = ", ".join(sorted(projects)) or "none"
                raise UsageError(
                    f"--project {p!r}: Flyte Admin has no such project (known: {known})"
                )
        for d in scope.domains:
            lacking = [p for p in scope.projects if d not in projects[p]]
            if lacking:
                raise UsageError(
                    f"--domain {d!r}: project {lacking[0]!r} has no such domain "
                    f"(its domains: {', '.join(projects[lacking[0]])})"
                )
            if not any(d in ds for ds in projects.values()):
                every = dict.fromkeys(x for ds in projects.values() for x in ds)
                raise UsageError(
                    f"--domain {d!r}: no project has such a domain (domains: {', '.join(every)})"
                )
        self._projects = projects

    def all_domains(self) -> tuple[str, ...]:
        """Every domain of every known project (the configured ones if Admin's are unknown)."""
        if not self._projects:
            return tuple(self.settings.flyte.domains)
        return tuple(dict.fromkeys(d for ds in self._projects.values() for d in ds))

    def _scope_domains(self, scope: ScanScope) -> tuple[str, ...]:
        if scope.projects and self._projects:
            return tuple(dict.fromkeys(d for p in scope.projects for d in self._projects[p]))
        return self.all_domains()

    def project_domain(self, namespace: str) -> tuple[str, str] | None:
        """The (project, domain) whose Flyte namespace `namespace` is, or None."""
        flyte = self.settings.flyte
        pd = namespace_to_project_domain(namespace, flyte.namespace_template, self.all_domains())
        if pd is not None and self._projects is not None:
            if pd[1] not in self._projects.get(pd[0], ()):
                return None  # no such project, or a domain only other projects have
        return pd

    def known_project_of(self, namespace: str) -> str | None:
        """A known project whose namespace `namespace` is in shape, whatever its domain part."""
        template = self.settings.flyte.namespace_template
        for p in sorted(self._projects or {}, key=len, reverse=True):
            head, _, tail = namespace_for(p, "\0", template).partition("\0")
            if (
                len(namespace) > len(head) + len(tail)
                and namespace.startswith(head)
                and namespace.endswith(tail)
            ):
                return p
        return None

    def _was_swept(self, ref: ExecutionRef) -> bool:
        with self._lock:
            return ref.name in self._swept.get((ref.project, ref.domain), ())

    # -- the whole scan ----------------------------------------------------------------------
    def run(self, window: Window, scope: ScanScope = ScanScope()) -> Report:
        """Scan `window`: findings, summary and gaps (SPEC §5-§7)."""
        workers = self.settings.workers
        self._window, self._scope = window, scope
        self._summary = Summary()
        self._findings: list[Finding] = []
        self._pending: list[Pending] = []
        self._finding_execs: dict[ExecutionRef, ExecutionRecord] = {}
        self._gaps: list[Gap] = []
        self._unresolved: list[Unresolved] = []
        self._swept = {}
        # Signals: pod hits, the index that joins them to attempts, and whether both are final.
        self._pod_hits: dict[tuple[str, str], SignalHit] = {}
        self._pod_index: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
        self._matched: set[tuple[str, str]] = set()
        self._signals_final = False
        self._parked: list[tuple[ExecutionRecord, list[AttemptRecord], list[_Candidate]]] = []
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._admin_lane = _Lane("admin", workers, self._stop, self._errors)
        self._s3_lane = _Lane("s3", workers, self._stop, self._errors)
        try:
            return self._run(window, scope)
        finally:
            self._stop.set()  # whatever happened, no thread goes on working for this run
            self._admin_lane.close()
            self._s3_lane.close()

    def _run(self, window: Window, scope: ScanScope) -> Report:
        # One ListProjects first: the Loki query, the namespace mapping and the sweep all need
        # each project's domains (and a scope naming an unknown one stops here, exit 2).
        self.load_projects(scope)
        if self._projects_error is not None:
            self._add_gap(
                Gap("admin", window.start, window.end, f"listing projects: {self._projects_error}")
            )
        loki = threading.Thread(
            target=self._guarded, args=(self._loki_phase,), name="loki", daemon=True
        )
        loki.start()
        self.progress.start("sweep", "Sweeping Admin executions", None)
        listers = [
            threading.Thread(target=self._guarded, args=(job,), name=f"list-{i}", daemon=True)
            for i, job in enumerate(self._listing_jobs(window, scope))
        ]
        for t in listers:
            t.start()
        for t in listers:
            _join(t, self._errors)
        _join(loki, self._errors)  # signals are final from here on
        self._admin_lane.drain()  # every swept execution matched and its checks queued
        self.progress.finish("sweep")

        # Signalled pods no swept execution claimed: look each one up (SPEC §5 not-a-pod etc.).
        unmatched = sorted(k for k in self._pending_pods() if k not in self._matched)
        late: dict[AttemptRef, list[Any]] = {}
        for key in unmatched:
            self._admin_lane.submit(partial(self._resolve_one, key, late))
        self._admin_lane.drain()
        for ex, att, hits in late.values():
            later = [a for a in self.attempts(ex.ref) if a.ref.node_id == att.ref.node_id]
            self._signalled(_Candidate(ex, att, earliest(hits), later))
        self._s3_lane.drain()

        findings = sorted(
            self._findings,
            key=lambda f: (
                f.signal.at if f.signal else f.succeeded_at or window.end,
                str(f.attempt),
            ),
        )
        findings = self._relaunched(findings)
        gaps = sorted(
            self._gaps,
            key=lambda g: (g.source, g.start or window.start, g.end or window.end, g.error),
        )
        log.info(
            "calls: Loki %d shard(s), Flyte Admin %d (%s), S3 %d (%s); %d gap(s)",
            len(window.split(min(self.settings.loki.shard, self.settings.loki.max_query_length))),
            self.admin.calls_total,
            self.admin.endpoint,
            self.store.call_count,
            self.store.endpoint,
            len(gaps),
        )
        pending = sorted(self._pending, key=lambda p: (p.signal.at, str(p.attempt)))
        unresolved = sorted(self._unresolved, key=lambda u: (u.signal.at, u.signal.pod))
        return Report(
            TOOL,
            window,
            tuple(gaps),
            self._summary,
            tuple(findings),
            pending=tuple(pending),
            unresolved=tuple(unresolved),
        )

    def _guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except _Stopped:
            pass
        except BaseException as e:  # surfaces in the main thread (LokiQueryError, bugs)
            self._errors.append(e)
            self._stop.set()

    # -- Loki, then the join index ---------------------------------------------------------------
    def _loki_phase(self) -> None:
        hits, gaps, _ = self.signals(self._window, self._scope, self._stop)
        unparsed, example = self.unparsed
        if example is not None:
            log.warning(
                "Loki matched %d death-signal line(s) that could not be read "
                "(summary.unparsed_lines); the earliest, %s %s: %s",
                unparsed,
                rfc3339(example.at),
                ", ".join(f"{k}={v}" for k, v in example.labels) or "(no labels)",
                example.line,
            )
        with self._lock:
            self._summary.unparsed_lines = unparsed
            self._summary.unparsed_example = example
        scope = self._scope
        index: dict[tuple[str, str, str], list[tuple[str, str]]] = defaultdict(list)
        pending: dict[tuple[str, str], SignalHit] = {}
        not_flyte = 0
        for (ns, pod), hit in hits.items():
            pd = self.project_domain(ns)
            if pd is None:
                project = self.known_project_of(ns)
                if project is None:
                    not_flyte += 1
                elif not scope.projects or project in scope.projects:
                    domains = ", ".join(self._projects[project]) if self._projects else ""
                    self._unresolve(
                        hit,
                        f"namespace {ns} names project {project} but none of its domains "
                        f"({domains}): check [flyte] namespace_template and domains",
                    )
                continue
            project, domain = pd
            if (scope.projects and project not in scope.projects) or (
                scope.domains and domain not in scope.domains
            ):
                continue
            pending[(ns, pod)] = hit
            parsed = parse_pod_name(pod)
            # A PyTorchJob replica is found by its job's generated name, as `resolve` does.
            for name in dict.fromkeys([pod, parsed.generated if parsed else pod]):
                index[(project, domain, name)].append((ns, pod))
        with self._lock:
            self._gaps.extend(gaps)
            for _ in range(not_flyte):
                self._summary.attempts_examined += 1
                self._summary.clear(SIGNAL_NOT_FLYTE_POD)
            self._pod_hits = pending
            self._pod_index = dict(index)
            self._signals_final = True
            parked, self._parked = self._parked, []
        for ex, attempts, candidates in parked:
            self._settle(ex, attempts, candidates)

    def _unresolve(self, hit: SignalHit, reason: str) -> None:
        """A signalled pod evidently Flyte's that resolves to nothing: never cleared, shown in
        the report's `unresolved` (and, like `pending`, never "nothing found")."""
        with self._lock:
            self._unresolved.append(Unresolved(hit, reason))

    def _pending_pods(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._pod_hits)

    # -- the Admin sweep -------------------------------------------------------------------------
    def _listing_jobs(self, window: Window, scope: ScanScope) -> list[Callable[[], None]]:
        """One job per lister thread; they share the (project, domain, listing) triples."""
        if self._projects is None:
            return []  # ListProjects failed: the gap is recorded
        projects = list(scope.projects) or sorted(self._projects)
        todo: queue.SimpleQueue[tuple[str, str, str]] = queue.SimpleQueue()
        pairs = [
            (p, d)
            for p in projects
            for d in self._projects[p]
            if not scope.domains or d in scope.domains
        ]
        # Executions that changed in the window, and those still running with an older
        # `updated_at` (FACTS §13): every attempt that ended in the window is in one of them.
        for project, domain in pairs:
            for filters in attempts_may_end_during(window.start, window.end):
                todo.put((project, domain, filters))

        def lister() -> None:
            while True:
                try:
                    project, domain, filters = todo.get_nowait()
                except queue.Empty:
                    return
                self._list_one(project, domain, filters)

        # Listing is one page per hundred executions: a few listers keep every worker busy.
        return [lister] * max(1, min(len(pairs), (self.settings.workers + 3) // 4))

    def _list_one(self, project: str, domain: str, filters: str) -> None:
        executions = self.admin.list_executions(project, domain, filters=filters)
        while True:
            try:
                with self._admin_slots:
                    ex = next(executions, None)
            except SourceError as e:
                w = self._window
                self._add_gap(Gap("admin", w.start, w.end, f"{project}/{domain}: {e.cause}"))
                return
            if ex is None:
                return
            self._admin_lane.submit(partial(self._sweep_execution, ex))

    def _sweep_execution(self, ex: ExecutionRecord) -> None:
        try:
            with self._admin_slots:
                attempts = self.admin.list_attempts(ex.ref)
        except SourceError as e:
            self._add_gap(Gap("admin", ex.created_at, ex.updated_at, f"{ex.ref}: {e.cause}"))
            return
        finally:
            self.progress.advance("sweep")
        window = self._window
        candidates = [_Candidate(ex, a) for a in attempts if sweep_candidate(a, window)]
        # Whether signalled or not, an elastic success needs its outputs.pb checked now, unless
        # its task declares outputs (Flyte then proved them before accepting the success).
        for c in candidates:
            if needs_outputs_check(c.att):
                self._s3_lane.submit(partial(self._check_outputs, c))
            else:
                c.checked = True  # not yet shared with any other thread
        with self._lock:
            self._swept.setdefault((ex.ref.project, ex.ref.domain), set()).add(ex.ref.name)
            if not self._signals_final:
                self._parked.append((ex, attempts, candidates))
                return
        self._settle(ex, attempts, candidates)

    def _settle(
        self, ex: ExecutionRecord, attempts: list[AttemptRecord], candidates: list[_Candidate]
    ) -> None:
        """Signals are final: join them to this execution's attempts and release its candidates."""
        hits = self._match(ex, attempts)
        by_ref = {c.att.ref: c for c in candidates}
        for att in attempts:
            signal = hits.get(att.ref)
            c = by_ref.get(att.ref)
            if signal is not None:
                later = [a for a in attempts if a.ref.node_id == att.ref.node_id]
                if c is None:
                    self._signalled(_Candidate(ex, att, signal, later))
                    continue
                c.later = later
            if c is not None:
                self._release(c, signal)

    def _match(
        self, ex: ExecutionRecord, attempts: list[AttemptRecord]
    ) -> dict[AttemptRef, SignalHit]:
        """The earliest signal of each attempt whose pods logged one (SPEC §5)."""
        index = self._pod_index
        if not index:
            return {}
        project, domain = ex.ref.project, ex.ref.domain
        out: dict[AttemptRef, SignalHit] = {}
        with self._lock:
            for att in attempts:
                for name in att.pods:
                    for key in index.get((project, domain, name), ()):
                        if key in self._matched:
                            continue  # a pod belongs to one attempt: the first that claims it
                        self._matched.add(key)
                        hit = self._pod_hits[key]
                        best = out.get(att.ref)
                        if best is None or (hit.at, hit.pod) < (best.at, best.pod):
                            out[att.ref] = hit
        return out

    def _resolve_one(self, key: tuple[str, str], late: dict[AttemptRef, list[Any]]) -> None:
        ns, pod = key
        hit = self._pod_hits[key]
        try:
            with self._admin_slots:
                result = self.resolve(ns, pod, hit.at, self._scope)
        except SourceError as e:
            # The second around the signal: a window a rescan can cover (a point could not).
            end = hit.at + timedelta(seconds=1)
            self._add_gap(Gap("admin", hit.at, end, f"pod {ns}/{pod}: {e.cause}"))
            return
        if isinstance(result, Unowned):
            self._unresolve(hit, result.reason)
            return
        with self._lock:
            if isinstance(result, str):
                if result != "out-of-scope":
                    self._summary.attempts_examined += 1
                    self._summary.clear(result)
                return
            ex, att = result
            # A PyTorchJob's pods collapse into one attempt.
            late.setdefault(att.ref, [ex, att, []])[2].append(hit)

    # -- candidates: outputs.pb, then the verdict ----------------------------------------------
    def _signalled(self, c: _Candidate) -> None:
        """A signalled attempt the sweep did not check: outputs.pb if only S3 knows, then decide."""
        c.final = True
        if needs_outputs_check(c.att):
            self._s3_lane.submit(partial(self._check_outputs, c))
        else:
            c.checked = c.done = True
            self._conclude(c)  # failed, unfinished or outputs declared: decided without S3

    def _release(self, c: _Candidate, signal: SignalHit | None) -> None:
        with self._lock:
            c.signal, c.final = signal, True
            ready = c.checked and not c.done
            c.done = c.done or ready
        if ready:
            self._s3_lane.submit(partial(self._conclude, c))  # a finding lists its checkpoint

    def _check_outputs(self, c: _Candidate) -> None:
        outputs = self.outputs(c.att)
        with self._lock:
            c.outputs, c.checked = outputs, True
            ready = c.final and not c.done
            c.done = c.done or ready
        if ready:
            self._conclude(c)

    def _conclude(self, c: _Candidate) -> None:
        verdict, outputs = self._decide(c)
        self._record(verdict, c.ex, c.att, c.signal, outputs)

    def _decide(self, c: _Candidate) -> tuple[Verdict, ObjectCheck | None]:
        """The verdict of one candidate whose signal and outputs are known (scan and examine)."""
        if c.signal is not None:
            outputs = c.outputs if c.att.phase == "SUCCEEDED" else None
            return classify_signalled(
                c.att, c.ex, c.signal, outputs, later_attempts=c.later
            ), outputs
        return classify_unsignalled(c.att, c.outputs), c.outputs

    # -- one execution, judged as the scan judges it (show, relaunch) ------------------------------
    def examine(self, ref: ExecutionRef, *, now: datetime | None = None) -> Examination:
        """Every attempt of one execution, decided by the scan's own rules (`_decide`).

        Signals are read over the execution's whole life — from its creation to Admin's end of
        it plus ten minutes for late sibling signals (SPEC §5), or, while it still runs, to now:
        flyteadmin moves `updated_at` only on workflow-level events (FACTS §13), so a running
        execution's `updated_at` says nothing about when its attempts were signalled. Every
        signalled attempt and every elastic success is examined, as the scan's sweep does over
        a window covering the execution. NotFoundError when Admin does not know `ref`.
        """
        now = now or datetime.now(UTC)
        ex = self.admin.get_execution(ref)
        attempts = self.attempts(ref)
        start = (ex.created_at or now) - timedelta(minutes=5)
        end = now + timedelta(minutes=1)
        if not ex.running and ex.updated_at is not None:
            end = min(ex.updated_at + timedelta(minutes=10), end)
        window = Window(start, max(end, start + timedelta(minutes=1)))
        result = Examination(ex, window)
        lk = self.settings.loki
        pods_by_ns: dict[str, set[str]] = defaultdict(set)
        owner: dict[tuple[str, str], AttemptRecord] = {}
        for a in attempts:
            ns = a.namespace or namespace_for(
                ref.project, ref.domain, self.settings.flyte.namespace_template
            )
            pods_by_ns[ns].update(a.pods)
            for pod in a.pods:
                owner.setdefault((ns, pod), a)
        hits: dict[AttemptRef, list[SignalHit]] = defaultdict(list)
        for ns, pods in sorted(pods_by_ns.items()):
            if not pods:
                continue
            for item in self.loki.scan(
                pod_query(self.settings, ns, pods, SIGNAL_LINE_REGEX),
                window,
                shard=lk.shard,
                max_query_length=lk.max_query_length,
            ):
                if isinstance(item, ShardOutcome):
                    if item.error is not None:
                        result.gaps.append(
                            Gap("loki", item.window.start, item.window.end, item.error)
                        )
                    continue
                hit = parse_signal(
                    item,
                    namespace_label=lk.namespace_label,
                    pod_label=lk.pod_label,
                    container_label=lk.container_label,
                )
                if hit is None:
                    result.unparsed += 1  # matched, unreadable: counted as the scan counts them
                    continue
                # A PyTorchJob replica `<generated>-worker-N` belongs to its job's attempt.
                a = owner.get((ns, hit.pod)) or owner.get((ns, _job_name(hit.pod)))
                if a is not None:
                    hits[a.ref].append(hit)
        for a in attempts:
            later = [b for b in attempts if b.ref.node_id == a.ref.node_id]
            c = _Candidate(ex, a, earliest(hits.get(a.ref, [])), later)
            # show lists outputs.pb for every success, declared outputs included (the verdict
            # does not read it for those: Flyte proved them).
            c.outputs = self.outputs(a) if a.phase == "SUCCEEDED" else None
            if c.signal is None and not sweep_candidate(a, window):
                result.attempts.append(Examined(a, None, None, c.outputs, None))
                continue
            verdict, outputs = self._decide(c)
            ck = (
                self.checkpoint(ex, a, c.signal)
                if verdict.verdict in ("affected", "suspected")
                else None
            )
            result.attempts.append(Examined(a, verdict, c.signal, c.outputs, ck))
        return result

    def _add_gap(self, gap: Gap) -> None:
        with self._lock:
            self._gaps.append(gap)

    # -- helpers -------------------------------------------------------------------------------
    def outputs(self, att: AttemptRecord) -> ObjectCheck:
        """Whether the attempt's outputs.pb exists (unknown, with why, when Admin has no location)."""
        if att.outputs_unknown:
            return ObjectCheck("unknown", att.outputs_unknown)
        if not att.output_dir:
            return ObjectCheck("unknown", "Admin records no output location for this attempt")
        return self.store.outputs_check(att.output_dir)

    def _record(
        self,
        verdict: Verdict,
        ex: ExecutionRecord,
        att: AttemptRecord,
        signal: SignalHit | None,
        outputs: ObjectCheck | None,
    ) -> None:
        log.info(
            "%s %s/%s (%s, signal %s, outputs.pb %s): %s",
            ex.ref,
            att.ref.node_id,
            att.ref.attempt,
            att.phase,
            rfc3339(signal.at) if signal else "none",
            outputs.state if outputs else "not checked",
            verdict.verdict or f"cleared: {verdict.cleared or 'cleared'}",
        )
        finding = None
        if verdict.verdict not in (None, PENDING):
            finding = self._finding(verdict, ex, att, signal, outputs)
        with self._lock:
            summary = self._summary
            summary.attempts_examined += 1
            if verdict.verdict == PENDING:
                assert signal is not None  # only a signalled attempt is pending
                summary.pending += 1
                self._pending.append(Pending(att.ref, att.phase, signal))
                return
            if verdict.verdict is None:
                summary.clear(verdict.cleared or "cleared")
                return
            if verdict.verdict == "affected":
                summary.affected += 1
            else:
                summary.suspected += 1
            # An S3 read that failed is a gap a rescan can close; a location Admin's record does
            # not give (inline raw-output policy) is not: the finding itself says why.
            if outputs is not None and outputs.state == "unknown" and not att.outputs_unknown:
                self._gaps.append(
                    Gap(
                        "s3",
                        att.ended_at,
                        att.ended_at,
                        f"{att.output_dir}outputs.pb: {outputs.reason}",
                    )
                )
            assert finding is not None
            self._findings.append(finding)
            self._finding_execs[ex.ref] = ex

    def _finding(
        self,
        verdict: Verdict,
        ex: ExecutionRecord,
        att: AttemptRecord,
        signal: SignalHit | None,
        outputs: ObjectCheck | None,
    ) -> Finding:
        ck = self.checkpoint(ex, att, signal)
        links: dict[str, str] = {}
        flyte = console_link(self.settings.flyte.console_url, *_ref_parts(ex.ref))
        if flyte:
            links["flyte"] = flyte
        if signal is not None:
            loki = self.settings.loki
            sel = selector(
                [(loki.namespace_label, "=", signal.namespace), (loki.pod_label, "=", signal.pod)]
            )
            logs = explore_link(
                loki.grafana_explore_url,
                loki.grafana_datasource,
                sel,
                signal.at - timedelta(minutes=10),
                signal.at + timedelta(minutes=5),
            )
            if logs:
                links["logs"] = logs
        notes = (verdict.note,) if verdict.note else ()
        if signal is not None and verdict.verdict != "affected":
            # SPEC §6: `signal` is null for `suspected`; the hit is kept as a note.
            notes += (late_signal_note(att, signal),)
            signal = None
        notes += shape_notes(ex, att)
        written = (
            None if outputs is None or outputs.state == "unknown" else outputs.state == "present"
        )
        return Finding(
            attempt=att.ref,
            verdict=verdict.verdict or "",
            execution_phase=ex.phase,
            signal=signal,
            succeeded_at=att.ended_at,
            outputs_written=written,
            checkpoint=ck,
            links=links,
            evidence=notes,
            parent=ex.parent,
        )

    def checkpoint(
        self, ex: ExecutionRecord, att: AttemptRecord, signal: SignalHit | None
    ) -> Checkpoint:
        """SPEC §4.4: locate the checkpoint and list it (never `empty` for an error)."""
        inputs = node_inputs = None
        ck = self.settings.checkpoints
        if ck.input or (ck.template and "{inputs." in ck.template):
            # SPEC §5: the attempt's own node inputs first (a @dynamic sweep or a map passes each
            # trial its own prefix), then the execution's; the latter only when still needed.
            try:
                with self._admin_slots:
                    node_inputs = self.admin.get_node_inputs(
                        att.ref, array_node=att.array_node, array_index=att.array_index
                    )
            except SourceError as e:
                return Checkpoint(None, "unknown", reason=f"node inputs: {e.cause}")
            if not (ck.input and node_inputs.get(ck.input)):
                try:
                    inputs = self._execution_inputs(ex.ref)
                except SourceError as e:
                    return Checkpoint(None, "unknown", reason=f"execution inputs: {e.cause}")
        loc = checkpoint_location(ck, att, ex, inputs, node_inputs=node_inputs)
        if loc.uri is None:
            return Checkpoint(None, "unknown", reason=loc.reason, source=loc.source)
        listing = self.store.list_prefix(loc.uri)
        return Checkpoint(
            uri=loc.uri,
            state=listing.state,
            objects=listing.objects,
            latest=listing.latest,
            reason=listing.reason,
            source=loc.source,
            written_after_signal=written_after(listing, signal),
        )

    def _execution_inputs(self, ref: ExecutionRef) -> dict[str, str]:
        """GetExecutionData once per execution, whatever the number of its findings."""
        # The Admin slot before the execution's lock, the order `resolve` takes them in.
        with self._admin_slots, self._ref_locks[ref]:
            if ref not in self._inputs:
                self._inputs[ref] = self.admin.get_inputs(ref)
            return self._inputs[ref]

    def _relaunched(self, findings: list[Finding]) -> list[Finding]:
        """Fill `relaunched_as` from existing RELAUNCH executions that reference a finding."""
        from dataclasses import replace

        scopes: dict[tuple[str, str], datetime] = {}
        for f in findings:
            ex = self._finding_execs.get(f.attempt.execution)
            since = ex.created_at if ex and ex.created_at else f.succeeded_at
            key = (f.attempt.execution.project, f.attempt.execution.domain)
            if since is not None and (key not in scopes or since < scopes[key]):
                scopes[key] = since
        relaunches: dict[ExecutionRef, ExecutionRef] = {}

        def lookup(project: str, domain: str, since: datetime) -> None:
            try:
                with self._admin_slots:
                    found = self.admin.relaunches_of(project, domain, since)
            except SourceError as e:
                # relaunched_as would read "not relaunched" for what is merely unknown.
                self._add_gap(
                    Gap(
                        "admin",
                        since,
                        None,
                        f"existing relaunches in {project}/{domain} "
                        f"could not be listed, relaunched_as may be missing: {e.cause}",
                    )
                )
                return
            with self._lock:
                relaunches.update(found)

        for (project, domain), since in sorted(scopes.items()):
            self._admin_lane.submit(partial(lookup, project, domain, since))
        self._admin_lane.drain()
        return [replace(f, relaunched_as=relaunches.get(f.attempt.execution)) for f in findings]


def _hours(d: timedelta) -> str:
    """A shard length as the config writes it: `24h`, `90m`."""
    seconds = int(d.total_seconds())
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{seconds // 60}m"


@dataclass(frozen=True)
class Examined:
    """One attempt of an examined execution: the scan's verdict (None: not examined)."""

    attempt: AttemptRecord
    verdict: Verdict | None
    signal: SignalHit | None
    outputs: ObjectCheck | None
    checkpoint: Checkpoint | None


@dataclass
class Examination:
    """One execution judged by the scan's rules: its attempts, the window read, and gaps."""

    execution: ExecutionRecord
    window: Window
    attempts: list[Examined] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    unparsed: int = 0  # lines the signal filter matched that the parser could not read


def pod_query(settings: Settings, namespace: str, pods: set[str], regex: str) -> str:
    """A Loki query for the lines of some pods (PyTorchJob replicas included) matching `regex`."""
    lk = settings.loki
    pods_re = "(" + "|".join(regex_escape(p) for p in sorted(pods)) + ")"
    sel = selector([(lk.namespace_label, "=", namespace), (lk.pod_label, "=~", pods_re + _REPLICA)])
    return build_query(sel, [("|~", regex)])


_REPLICA = "(-(worker|master)-[0-9]+)?"


def _job_name(pod: str) -> str:
    return re.sub(r"-(worker|master)-\d+$", "", pod)


def shape_notes(ex: ExecutionRecord, att: AttemptRecord) -> tuple[str, ...]:
    """What a finding's shape means for the operator: a child execution, an array subtask."""
    notes: tuple[str, ...] = ()
    if att.array_node is not None:
        notes += (f"subtask {att.array_index} of array (map) node {att.array_node}",)
    if ex.parent is not None:
        notes += (
            f"child execution of {ex.parent.execution} (node {ex.parent.node_id}): relaunching "
            "this child alone will not re-run the parent's later steps; relaunch the parent "
            f"(elastic-audit relaunch --parent {ex.ref})",
        )
    return notes


def _unparsed_example(entry: LogEntry | None) -> UnparsedLine | None:
    if entry is None:
        return None
    line = entry.line
    if len(line) > UnparsedLine.MAX_CHARS:
        line = line[: UnparsedLine.MAX_CHARS] + "…"
    return UnparsedLine(entry.at, entry.labels, line)


def _ref_parts(ref: ExecutionRef) -> tuple[str, str, str]:
    return ref.project, ref.domain, ref.name


def scanner_for(settings: Settings, *, progress: Progress | None = None) -> Scanner:
    """A Scanner over the three production clients."""
    return Scanner(settings, *build_sources(settings), progress=progress)


def build_sources(settings: Settings) -> tuple[LokiClient, AdminClient, ObjectStore]:
    """The three production clients, configured by their own conventions (SPEC §4)."""
    from forensics.verbosity import adopt_flytekit

    adopt_flytekit()  # flytekit is imported by now; its warnings must not reach stdout
    loki = LokiClient(settings.loki, workers=settings.workers)
    admin = AdminClient.from_settings(settings.flyte)
    store = ObjectStore.default(workers=settings.workers)
    return loki, admin, store
