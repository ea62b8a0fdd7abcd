"""Orchestration of a scan: window → Loki shards → candidates → Admin + S3 → verdicts → Report."""

from __future__ import annotations

import logging
import signal as signals
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from forensics import TOOL
from forensics.config import Settings
from forensics.detect import (
    SIGNAL_NOT_FLYTE_POD,
    Verdict,
    checkpoint_location,
    classify_signalled,
    classify_unsignalled,
    console_link,
    earliest,
    explore_link,
    sweep_candidate,
    written_after,
)
from forensics.errors import NotFoundError, SourceError
from forensics.evidence import (
    SIGNAL_LINE_REGEX,
    namespace_for,
    namespace_to_project_domain,
    parse_pod_name,
    parse_signal,
)
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    Checkpoint,
    ExecutionRecord,
    ExecutionRef,
    Finding,
    Gap,
    ObjectCheck,
    Report,
    SignalHit,
    Summary,
    Window,
    rfc3339,
)
from forensics.progress import Progress
from forensics.sources.admin import AdminClient, live_during
from forensics.sources.loki import (
    LokiClient,
    ShardOutcome,
    build_query,
    matcher,
    regex_escape,
    selector,
)
from forensics.sources.storage import ObjectStore

log = logging.getLogger("elastic-audit")


@dataclass(frozen=True)
class ScanScope:
    """Which projects and domains a scan covers (empty: every project, the configured domains)."""

    projects: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()


@dataclass
class _Evidence:
    """Hits grouped per attempt, and what could not be resolved."""

    by_attempt: dict[AttemptRef, list[SignalHit]] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)


def task_selector(settings: Settings, scope: ScanScope) -> str:
    """The configured task selector, narrowed to the scope's namespaces when one is given.

    Values are RE2-escaped and LogQL-quoted, so a project name can never inject LogQL.
    """
    sel = settings.loki.task_selector.strip()
    if not scope.projects and not scope.domains:
        return sel
    domains = scope.domains or settings.flyte.domains
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


class Scanner:
    """Runs one scan against the three sources; every outside call goes through them."""

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
    def signals(self, window: Window, scope: ScanScope) -> tuple[dict, list[Gap], int]:
        """Death-signal hits per (namespace, pod), the Loki gaps, and the shard count."""
        query = build_query(task_selector(self.settings, scope), [("|~", SIGNAL_LINE_REGEX)])
        labels = self.settings.loki
        hits: dict[tuple[str, str], list[SignalHit]] = defaultdict(list)
        gaps: list[Gap] = []
        shards = len(window.split(min(labels.shard, labels.max_query_length)))
        self.progress.start("loki", "Reading Loki shards", shards)
        for item in self.loki.scan(
            query, window, shard=labels.shard, max_query_length=labels.max_query_length
        ):
            if isinstance(item, ShardOutcome):
                if item.error is not None:
                    gaps.append(Gap("loki", item.window.start, item.window.end, item.error))
                self.progress.advance("loki")
                continue
            hit = parse_signal(
                item,
                namespace_label=labels.namespace_label,
                pod_label=labels.pod_label,
                container_label=labels.container_label,
            )
            if hit is not None and hit.at in window:
                hits[(hit.namespace, hit.pod)].append(hit)
        self.progress.finish("loki")
        return hits, gaps, shards

    # -- phase 2: resolve pods to attempts -------------------------------------------------
    def resolve(
        self, namespace: str, pod: str, at: datetime, scope: ScanScope
    ) -> tuple[ExecutionRecord, AttemptRecord] | str:
        """The attempt a pod belongs to, or why it is none (a cleared-reason string)."""
        flyte = self.settings.flyte
        pd = namespace_to_project_domain(namespace, flyte.namespace_template, flyte.domains)
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
                ex = self.execution(ref)
                if ex is None:
                    continue
                for a in self.attempts(ref):
                    if pod in a.pods or parsed.generated in a.pods:
                        return ex, a
        # Hashed (or otherwise unparseable) names: look among the executions live at `at`.
        for ex in self.admin.list_executions(
            project,
            domain,
            # Executions live at the signal: created before it, still changing after it.
            filters=live_during(at, at + timedelta(seconds=1)),
        ):
            with self._lock:
                self._executions.setdefault(ex.ref, ex)
            for a in self.attempts(ex.ref):
                if pod in a.pods or (parsed and parsed.generated in a.pods):
                    return ex, a
        return SIGNAL_NOT_FLYTE_POD

    # -- the whole scan ----------------------------------------------------------------------
    def run(self, window: Window, scope: ScanScope = ScanScope()) -> Report:
        summary = Summary()
        findings: list[Finding] = []
        gaps: list[Gap] = []
        pod_hits, loki_gaps, _ = self.signals(window, scope)
        gaps.extend(loki_gaps)

        # Resolve each signalled pod to its attempt; a PyTorchJob's pods collapse into one.
        by_attempt: dict[AttemptRef, list[SignalHit]] = defaultdict(list)
        records: dict[AttemptRef, tuple[ExecutionRecord, AttemptRecord]] = {}
        self.progress.start("resolve", "Resolving signalled pods", len(pod_hits))

        def resolve_one(key: tuple[str, str]) -> None:
            ns, pod = key
            first = earliest(pod_hits[key])
            assert first is not None
            try:
                result = self.resolve(ns, pod, first.at, scope)
            except SourceError as e:
                with self._lock:
                    gaps.append(Gap("admin", first.at, first.at, f"pod {ns}/{pod}: {e.cause}"))
                return
            finally:
                self.progress.advance("resolve")
            with self._lock:
                if isinstance(result, str):
                    if result != "out-of-scope":
                        summary.attempts_examined += 1
                        summary.clear(result)
                    return
                ex, att = result
                by_attempt[att.ref].extend(pod_hits[key])
                records[att.ref] = (ex, att)

        self._parallel(resolve_one, list(pod_hits))
        self.progress.finish("resolve")

        # Signalled attempts: Admin phase + S3 outputs.pb decide.
        self.progress.start("check", "Checking signalled attempts", len(by_attempt))

        def check_signalled(ref: AttemptRef) -> None:
            ex, att = records[ref]
            signal = earliest(by_attempt[ref])
            assert signal is not None
            outputs = self._outputs(att) if att.phase == "SUCCEEDED" else None
            later = [a for a in self.attempts(ex.ref) if a.ref.node_id == att.ref.node_id]
            verdict = classify_signalled(att, ex, signal, outputs, later_attempts=later)
            self._record(verdict, ex, att, signal, outputs, summary, findings, gaps)
            self.progress.advance("check")

        self._parallel(check_signalled, list(by_attempt))
        self.progress.finish("check")

        # Admin sweep: elastic successes without outputs.pb and without any signal evidence.
        gaps.extend(self._sweep(window, scope, set(by_attempt), summary, findings, gaps))

        findings.sort(
            key=lambda f: (
                f.signal.at if f.signal else f.succeeded_at or window.end,
                str(f.attempt),
            )
        )
        findings = self._relaunched(findings)
        gaps.sort(key=lambda g: (g.source, g.start or window.start))
        return Report(TOOL, window, tuple(gaps), summary, tuple(findings))

    def _sweep(
        self,
        window: Window,
        scope: ScanScope,
        signalled: set[AttemptRef],
        summary: Summary,
        findings: list[Finding],
        gaps: list[Gap],
    ) -> list[Gap]:
        sweep_gaps: list[Gap] = []
        try:
            projects = list(scope.projects) or self.admin.list_projects()
        except SourceError as e:
            return [Gap("admin", window.start, window.end, f"listing projects: {e.cause}")]
        domains = list(scope.domains) or list(self.settings.flyte.domains)
        filters = live_during(window.start, window.end)
        executions: list[ExecutionRecord] = []
        for project in projects:
            for domain in domains:
                try:
                    executions.extend(self.admin.list_executions(project, domain, filters=filters))
                except SourceError as e:
                    sweep_gaps.append(
                        Gap("admin", window.start, window.end, f"{project}/{domain}: {e.cause}")
                    )
        self.progress.start("sweep", "Sweeping Admin for output-less successes", len(executions))

        def sweep_one(ex: ExecutionRecord) -> None:
            try:
                attempts = self.attempts(ex.ref)
            except SourceError as e:
                with self._lock:
                    sweep_gaps.append(
                        Gap("admin", ex.created_at, ex.updated_at, f"{ex.ref}: {e.cause}")
                    )
                return
            finally:
                self.progress.advance("sweep")
            for att in attempts:
                if att.ref in signalled or not sweep_candidate(att, window):
                    continue
                outputs = self._outputs(att)
                with self._lock:
                    self._executions.setdefault(ex.ref, ex)
                verdict = classify_unsignalled(att, outputs)
                self._record(verdict, ex, att, None, outputs, summary, findings, gaps)

        self._parallel(sweep_one, executions)
        self.progress.finish("sweep")
        return sweep_gaps

    # -- helpers -------------------------------------------------------------------------------
    def _outputs(self, att: AttemptRecord) -> ObjectCheck:
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
        summary: Summary,
        findings: list[Finding],
        gaps: list[Gap],
    ) -> None:
        finding = None
        if verdict.verdict is not None:
            finding = self._finding(verdict, ex, att, signal, outputs)
        with self._lock:
            summary.attempts_examined += 1
            if verdict.verdict is None:
                summary.clear(verdict.cleared or "cleared")
                return
            if verdict.verdict == "affected":
                summary.affected += 1
            else:
                summary.suspected += 1
            if outputs is not None and outputs.state == "unknown":
                gaps.append(
                    Gap(
                        "s3",
                        att.ended_at,
                        att.ended_at,
                        f"{att.output_dir}outputs.pb: {outputs.reason}",
                    )
                )
            assert finding is not None
            findings.append(finding)

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
            notes += (
                f"{signal.signal} death signal at {rfc3339(signal.at)} in pod "
                f"{signal.namespace}/{signal.pod}",
            )
            signal = None
        return Finding(
            attempt=att.ref,
            verdict=verdict.verdict or "",
            execution_phase=ex.phase,
            signal=signal,
            succeeded_at=att.ended_at,
            outputs_written=bool(outputs and outputs.state == "present"),
            checkpoint=ck,
            links=links,
            evidence=notes,
        )

    def checkpoint(
        self, ex: ExecutionRecord, att: AttemptRecord, signal: SignalHit | None
    ) -> Checkpoint:
        """SPEC §4.4: locate the checkpoint and list it (never `empty` for an error)."""
        inputs = None
        ck = self.settings.checkpoints
        if ck.input or (ck.template and "{inputs." in ck.template):
            try:
                inputs = self.admin.get_inputs(ex.ref)
            except SourceError as e:
                return Checkpoint(None, "unknown", reason=f"execution inputs: {e.cause}")
        loc = checkpoint_location(ck, att, ex, inputs)
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

    def _relaunched(self, findings: list[Finding]) -> list[Finding]:
        """Fill `relaunched_as` from existing RELAUNCH executions that reference a finding."""
        from dataclasses import replace

        scopes: dict[tuple[str, str], datetime] = {}
        for f in findings:
            ex = self._executions.get(f.attempt.execution)
            since = ex.created_at if ex and ex.created_at else f.succeeded_at
            key = (f.attempt.execution.project, f.attempt.execution.domain)
            if since is not None and (key not in scopes or since < scopes[key]):
                scopes[key] = since
        relaunches: dict[ExecutionRef, ExecutionRef] = {}
        for (project, domain), since in scopes.items():
            try:
                relaunches.update(self.admin.relaunches_of(project, domain, since))
            except SourceError as e:
                log.warning(
                    "could not look up existing relaunches in %s/%s: %s", project, domain, e.cause
                )
        return [replace(f, relaunched_as=relaunches.get(f.attempt.execution)) for f in findings]

    def _parallel(self, fn: Callable, items: Sequence) -> None:
        if not items:
            return
        with ThreadPoolExecutor(max_workers=self.settings.workers) as pool:
            for fut in [pool.submit(fn, item) for item in items]:
                fut.result()


def _ref_parts(ref: ExecutionRef) -> tuple[str, str, str]:
    return ref.project, ref.domain, ref.name


def build_sources(settings: Settings) -> tuple[LokiClient, AdminClient, ObjectStore]:
    """The three production clients, configured by their own conventions (SPEC §4)."""
    loki = LokiClient(settings.loki, workers=settings.workers)
    admin = AdminClient.from_settings(settings.flyte)
    if threading.current_thread() is threading.main_thread():
        # flytekit installs a SIGINT handler that calls exit(1) on import; Ctrl-C must stay a
        # KeyboardInterrupt so the CLI exits 130 and leaves no partial report.
        signals.signal(signals.SIGINT, signals.default_int_handler)
    store = ObjectStore.default(workers=settings.workers)
    return loki, admin, store
