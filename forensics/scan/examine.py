"""One execution judged by the scan's own rules: what `show` and `relaunch`'s re-check read.

The scan's collection narrowed to one execution: its attempts, the death signals of their pods
over its life, their disruptions and outputs.pb, as `Evidence`, judged by the same `judge`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from forensics.detect import Decision, disruption_candidate, earliest, sweep_candidate
from forensics.evidence.flyte_names import namespace_for
from forensics.evidence.logs import SIGNAL_LINE_REGEX
from forensics.model import (
    UTC,
    AttemptRecord,
    AttemptRef,
    Checkpoint,
    Disruption,
    ExecutionRecord,
    ExecutionRef,
    Gap,
    ObjectCheck,
    ShardRead,
    SignalHit,
    Window,
)
from forensics.scan.disruptions import (
    DisruptionIndex,
    blind_events_gaps,
    disruption_reads,
    disruption_sources_on,
)
from forensics.scan.evidence import Evidence, judge
from forensics.scan.lookups import Lookups
from forensics.scan.resolve import owner_of
from forensics.scan.scope import pod_query
from forensics.scan.signals import SignalLines
from forensics.scan.source_gaps import events_gaps, shard_gaps
from forensics.sources import Sources


@dataclass(frozen=True)
class Examined:
    """One attempt of an examined execution: the scan's decision (None: not examined)."""

    attempt: AttemptRecord
    decision: Decision | None
    signal: SignalHit | None
    outputs: ObjectCheck | None
    checkpoint: Checkpoint | None
    disruptions: tuple[Disruption, ...] = ()  # Kubernetes' record of its pods', earliest first

    @property
    def disruption(self) -> Disruption | None:
        """The earliest disruption: the one the decision and a finding use."""
        return self.disruptions[0] if self.disruptions else None


@dataclass
class Examination:
    """One execution judged by the scan's rules: its attempts, the window read, and gaps."""

    execution: ExecutionRecord
    window: Window
    attempts: list[Examined] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    unparsed: int = 0  # lines the signal filter matched that the parser could not read


def life_window(ex: ExecutionRecord, now: datetime) -> Window:
    """The execution's whole life: from its creation to Admin's end of it plus ten minutes for
    late sibling signals, or, while it still runs, to now (flyteadmin moves `updated_at` only on
    workflow-level events, so a running execution's says nothing about its attempts)."""
    start = (ex.created_at or now) - timedelta(minutes=5)
    end = now + timedelta(minutes=1)
    if not ex.running and ex.updated_at is not None:
        end = min(ex.updated_at + timedelta(minutes=10), end)
    return Window(start, max(end, start + timedelta(minutes=1)))


def examine(
    sources: Sources, ref: ExecutionRef | str, *, now: datetime | None = None
) -> Examination:
    """Every attempt of one execution, decided by the scan's own rules (`detect.decide`).

    Signals are read over the execution's whole life (`life_window`). Every signalled attempt
    and every elastic success is examined, as the scan's sweep does over a window covering the
    execution. NotFoundError when Admin does not know `ref` (an ExecutionRef or a form the CLI
    takes, `project:domain:name`).
    """
    from forensics.arguments import execution_of

    ref = execution_of(ref, param="ref")
    now = now or datetime.now(UTC)
    lookups = Lookups(sources)
    ex = sources.admin.get_execution(ref)
    attempts = lookups.attempts(ref)
    result = Examination(ex, life_window(ex, now))
    hits = _signals(sources, ex, attempts, result)
    index = _disruptions(sources, result, bool(attempts))
    for a in attempts:
        found = tuple(index.all_for_attempt(ex, a, sources.settings))
        # show lists outputs.pb for every success, declared outputs included (the verdict
        # does not read it for those: Flyte proved them).
        outputs = lookups.outputs(a) if a.phase == "SUCCEEDED" else None
        e = Evidence(
            ex,
            a,
            earliest(hits.get(a.ref, [])),
            found[0] if found else None,
            [b for b in attempts if b.ref.node_id == a.ref.node_id],
            attempts,
            outputs,
        )
        examined = e.signal is not None or sweep_candidate(a, result.window)
        if e.disruption is not None and disruption_candidate(a, result.window):
            examined = True  # the whole class, as the scan examines it
        if not examined:
            result.attempts.append(Examined(a, None, None, outputs, None, found))
            continue
        decision = judge(e)
        ck = lookups.checkpoint(ex, a, e.signal) if decision.is_finding else None
        result.attempts.append(Examined(a, decision, e.signal, outputs, ck, found))
    return result


def _disruptions(sources: Sources, result: Examination, attempts_ran: bool) -> DisruptionIndex:
    """The pods' disruption evidence over the examination's window (`[k8s_events]`,
    `[prometheus]`, when on); a failed read is a gap of that source, as in a scan."""
    index = DisruptionIndex()
    if disruption_sources_on(sources.settings):
        reads = disruption_reads(sources, result.window)
        for read in reads:
            result.gaps.extend(events_gaps(read))
        if attempts_ran:
            result.gaps.extend(blind_events_gaps(reads, result.window))
        index.fill(*reads)
    return index


def _signals(
    sources: Sources, ex: ExecutionRecord, attempts: list[AttemptRecord], result: Examination
) -> dict[AttemptRef, list[SignalHit]]:
    """The death signals of the attempts' pods over the examination's window, per attempt."""
    settings = sources.settings
    ref = ex.ref
    owners: dict[str, dict[str, AttemptRecord]] = defaultdict(dict)
    for a in attempts:
        ns = a.namespace or namespace_for(
            ref.project, ref.domain, settings.flyte.namespace_template
        )
        owners[ns].update({pod: a for pod in a.pods if pod not in owners[ns]})

    def on_shard(item: ShardRead) -> None:
        result.gaps.extend(shard_gaps(item))

    lines = SignalLines(sources.loki, settings.loki)
    hits: dict[AttemptRef, list[SignalHit]] = defaultdict(list)
    for ns, owned in sorted(owners.items()):
        if not owned:
            continue
        query = pod_query(settings, ns, set(owned), SIGNAL_LINE_REGEX)
        for hit in lines.read(query, result.window, on_shard):
            a = owner_of(owned, hit.pod)
            if a is not None:
                hits[a.ref].append(hit)
    result.unparsed = lines.unparsed
    result.gaps.extend(lines.label_gaps(result.window))
    return hits
