"""Pure decisions: evidence about one attempt → verdict (affected / suspected / cleared-because).

The rules and why they are so: docs/verdicts.md. Nothing here does I/O; the scan, `show`'s
timeline and `relaunch`'s re-check all judge an attempt through `decide` and assemble a finding
through `build_finding`. Every rule, for a signal line and for a disruption event alike, reads in
one place beside the enums it dispatches over.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import NoReturn

from forensics.config import Settings
from forensics.evidence.flyte_names import unique_node_id
from forensics.evidence.k8s_events import fails_the_pod
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    Checkpoint,
    Disruption,
    ExecutionRecord,
    Finding,
    ObjectCheck,
    SignalHit,
    Window,
    rfc3339,
)
from forensics.sources.logql import selector


def assert_never(value: NoReturn) -> NoReturn:
    """A dispatch over an enum missed a member (typing.assert_never is Python 3.11+)."""
    raise AssertionError(f"unhandled value: {value!r}")


class _StrEnum(str, Enum):
    """A str-valued enum whose members print as their value (enum.StrEnum is Python 3.11+)."""

    def __str__(self) -> str:
        return str(self.value)


class Verdict(_StrEnum):
    """What an examined attempt is: a finding (affected, suspected) or still to be judged."""

    AFFECTED = "affected"
    SUSPECTED = "suspected"
    # Not a finding yet: a signalled attempt still running is listed in the report's `pending`
    # (docs/verdicts.md), to be judged by a rescan once it ends.
    PENDING = "pending"


class Cleared(_StrEnum):
    """Why an examined attempt is not a finding; each has its own counter in the summary."""

    SIGNAL_OUTPUTS_WRITTEN = "signal-then-outputs-written"
    SIGNAL_FAILED_RETRIED = "signal-then-failed-and-retried"
    SIGNAL_EXECUTION_FAILED = "signal-then-execution-failed"
    SIGNAL_NOT_FLYTE_POD = "signal-not-a-flyte-task-pod"
    SIGNAL_AFTER_SUCCESS = "signal-after-success"
    OUTPUTS_WRITTEN = "outputs-written"
    # A success of a task whose interface declares outputs: propeller's ValidateOutput turns a
    # missing outputs.pb into "OutputsNotFound" (flyteorg/flyte flytepropeller
    # pkg/controller/nodes/task/handler.go), so Flyte's own success proves it was written.
    OUTPUTS_DECLARED = "outputs-declared"
    # Kubernetes recorded a disruption of the attempt's pod (docs/verdicts.md "Disruption
    # evidence"), but outputs.pb exists: before the end (it finished its work in time), or after.
    DISRUPTION_OUTPUTS_WRITTEN = "disruption-then-outputs-written"
    DISRUPTION_AFTER_SUCCESS = "disruption-after-success"
    # A disruption of a task whose success never writes outputs.pb: a raw container without
    # declared outputs gets no uploader (flyteorg/flyte v1.16.8 flyteplugins/go/tasks/
    # pluginmachinery/flytek8s/copilot.go:245-270, AddCoPilotToPod), so the artefact cannot tell
    # loss from health and the event alone is no finding (docs/verdicts.md).
    DISRUPTION_NO_ARTEFACT = "disruption-no-outputs-artefact"
    # A disruption that sets its pod Failed before the kill (the kubelet's node-pressure eviction,
    # graceful node shutdown) joined to a single-pod attempt Flyte recorded SUCCEEDED: the event
    # is another pod's (a wrong join), not this attempt's end (docs/verdicts.md).
    DISRUPTION_WRONG_JOIN = "disruption-contradicts-success"
    # No signal, and the attempt's node folder has expired (outputs.pb and the node's inputs.pb,
    # which propeller writes before the node runs, are both gone): nothing says it went wrong and
    # S3 can no longer say it went right. Not a finding on a guess (docs/verdicts.md).
    OUTPUTS_EXPIRED = "outputs-expired"
    # A trial of a retried @dynamic parent: propeller re-ran every child under the parent's new
    # attempt (`nodes/common/utils.go` GenerateUniqueID: `n0-<k>-dnX`), and that re-run
    # succeeded; the workflow went on with the re-run's outputs, not this trial's. The re-run is
    # judged on its own (docs/verdicts.md).
    SUPERSEDED = "superseded-by-rerun"


class Cause(_StrEnum):
    """What made a success silent (docs/verdicts.md "Causes")."""

    # kfpytorch's elastic task turns the agent's SignalException into IgnoreOutputs: exit 0,
    # no outputs.pb (flytekitplugins-kfpytorch task.py).
    ELASTIC_IGNORE_OUTPUTS = "elastic-ignore-outputs"
    # Any other task that exited 0 after its pod was told to stop: a SIGTERM handler that
    # calls sys.exit(0) (flytekit's dispatch catches Exception, not SystemExit), a TFJob whose
    # worker 0 exited 0; propeller accepts a success without outputs.pb for a task that
    # declares no outputs (flytepropeller pkg/controller/nodes/task/handler.go ValidateOutput).
    EXIT_0_AFTER_SIGNAL = "exit-0-after-signal"


def cause_of(attempt: AttemptRecord) -> Cause:
    """The cause a finding of this attempt names: by its task's plugin."""
    return Cause.ELASTIC_IGNORE_OUTPUTS if attempt.is_elastic else Cause.EXIT_0_AFTER_SIGNAL


FAILED_PHASES = frozenset({"FAILED", "RETRYABLE_FAILED", "ABORTED", "TIMED_OUT"})


@dataclass(frozen=True, slots=True)
class Decision:
    """The decision about one attempt: a verdict or the reason it was cleared, and the
    outputs.pb check it rests on (None: not read for this decision)."""

    outcome: Verdict | Cleared
    note: str | None = None  # why a finding is weaker than it looks (e.g. outputs unknown)
    outputs: ObjectCheck | None = None
    rerun: AttemptRef | None = None  # the attempt that re-ran a superseded trial

    @property
    def verdict(self) -> Verdict | None:
        """The verdict, or None when the attempt was cleared."""
        return self.outcome if isinstance(self.outcome, Verdict) else None

    @property
    def cleared(self) -> Cleared | None:
        """Why the attempt was cleared, or None when it has a verdict."""
        return self.outcome if isinstance(self.outcome, Cleared) else None

    @property
    def is_finding(self) -> bool:
        """Whether the attempt is a finding of the report (affected or suspected)."""
        match self.outcome:
            case Verdict.AFFECTED | Verdict.SUSPECTED:
                return True
            case Verdict.PENDING | Cleared():
                return False
            case _:
                assert_never(self.outcome)


def decide(
    attempt: AttemptRecord,
    execution: ExecutionRecord,
    signal: SignalHit | None,
    outputs: ObjectCheck | None,
    *,
    node_attempts: Sequence[AttemptRecord] = (),
    disruption: Disruption | None = None,
    execution_attempts: Sequence[AttemptRecord] = (),
) -> Decision:
    """The one decision about an attempt whose signal, disruption and outputs are known (scan,
    show and relaunch all judge through it); a failed attempt's outputs are not read.

    A disruption event is a second witness (docs/verdicts.md "Disruption evidence"): alone it
    grades a success as a signal line does; beside a late signal it can only raise the grade.
    A finding whose trial was re-run successfully under its dynamic parent's later attempt
    (among `execution_attempts`, every attempt of the execution) is cleared as superseded."""
    if signal is not None:
        outputs = outputs if attempt.phase == "SUCCEEDED" else None
        d = classify_signalled(attempt, execution, signal, outputs, node_attempts=node_attempts)
        if (
            disruption is not None
            and d.outcome is Verdict.SUSPECTED
            and d.note is None
            and disruption_precedes_end(attempt, disruption)
            and not wrong_join(attempt, disruption)
        ):
            d = Decision(Verdict.AFFECTED)
    elif disruption is not None and attempt.phase == "SUCCEEDED":
        d = classify_disrupted(attempt, disruption, outputs)
    else:
        d = classify_unsignalled(attempt, outputs)
    if d.is_finding:
        rerun = rerun_of(attempt, execution_attempts)
        if rerun is not None:
            d = Decision(Cleared.SUPERSEDED, note=f"re-run as {rerun.ref}", rerun=rerun.ref)
    return replace(d, outputs=outputs)


def disruption_precedes_end(attempt: AttemptRecord, disruption: Disruption) -> bool:
    """The disruption was recorded before the attempt's end, or within the end's precision."""
    return precedes_end(attempt, disruption.at)


def classify_disrupted(
    attempt: AttemptRecord, disruption: Disruption, outputs: ObjectCheck | None
) -> Decision:
    """A success whose pod Kubernetes recorded as disrupted, with no death-signal line: the
    artefact decides, the event's time grades, as for a signal (docs/verdicts.md). Not where the
    artefact cannot decide (a task that never writes outputs.pb), nor where the event contradicts
    the success (it set a single pod Failed); an aggregated event's last time never places the
    disruption after the end."""
    if wrong_join(attempt, disruption):
        return Decision(Cleared.DISRUPTION_WRONG_JOIN)
    if never_writes_outputs(attempt):
        return Decision(Cleared.DISRUPTION_NO_ARTEFACT)
    before = disruption_precedes_end(attempt, disruption)
    if disruption.last_only and not before:
        d = grade_success(
            attempt,
            outputs,
            False,
            (Cleared.DISRUPTION_OUTPUTS_WRITTEN, Cleared.DISRUPTION_OUTPUTS_WRITTEN),
        )
        if d.outcome is Verdict.SUSPECTED and d.note is None:
            d = replace(d, note=aggregated_note(attempt, disruption))
        return d
    return grade_success(
        attempt,
        outputs,
        before,
        (Cleared.DISRUPTION_OUTPUTS_WRITTEN, Cleared.DISRUPTION_AFTER_SUCCESS),
    )


def never_writes_outputs(attempt: AttemptRecord) -> bool:
    """A task whose success never writes outputs.pb: a raw container (flytekit's ContainerTask,
    task type `raw-container`) that declares no outputs has no copilot uploader."""
    return attempt.task_type == "raw-container" and not attempt.outputs_declared


def single_pod(attempt: AttemptRecord) -> bool:
    """An attempt of one pod (the container plugin), not a PyTorchJob's replicas."""
    return attempt.task_type != "pytorch" and len(attempt.pods) <= 1


def wrong_join(attempt: AttemptRecord, disruption: Disruption) -> bool:
    """A disruption that set its pod Failed, joined to a single-pod attempt Flyte recorded
    SUCCEEDED: the pod it stopped is not the attempt's (docs/verdicts.md)."""
    return attempt.phase == "SUCCEEDED" and single_pod(attempt) and fails_the_pod(disruption)


def aggregated_note(attempt: AttemptRecord, disruption: Disruption) -> str:
    """Why an aggregated event after the end does not clear or place the disruption."""
    return (
        f"{disruption.reason} event for pod {disruption.namespace}/{disruption.pod} is an "
        f"aggregated one last seen at {rfc3339(disruption.at)}, after the attempt's end; its "
        "first occurrence is unknown"
    )


def grade_success(
    attempt: AttemptRecord,
    outputs: ObjectCheck | None,
    before: bool,
    written: tuple[Cleared, Cleared],
) -> Decision:
    """A success with evidence of a stop (a signal line or a disruption) that came `before` its
    end or not: the artefact decides, the time grades. `written` names the cleared classes for
    outputs.pb present with the evidence before the end, and after it."""
    if attempt.outputs_declared:
        return Decision(Cleared.OUTPUTS_DECLARED)
    if outputs is None or outputs.state == "unknown":
        return _unchecked(outputs)
    if outputs.state == "present":
        return Decision(written[0] if before else written[1])
    return Decision(Verdict.AFFECTED if before else Verdict.SUSPECTED)


def disruption_candidate(attempt: AttemptRecord, window: Window) -> bool:
    """Whether a disruption event makes the scan examine this attempt, whatever its task type:
    a success that ended in the window (docs/verdicts.md "The whole class")."""
    return (
        attempt.phase == "SUCCEEDED" and attempt.ended_at is not None and attempt.ended_at in window
    )


def late_disruption_note(attempt: AttemptRecord, disruption: Disruption) -> str:
    """The note a finding keeps about a disruption recorded after the attempt's end."""
    text = (
        f"{disruption.reason} event at {rfc3339(disruption.at)} for pod "
        f"{disruption.namespace}/{disruption.pod}"
    )
    if attempt.ended_at is not None and not disruption_precedes_end(attempt, disruption):
        after = (disruption.at - attempt.ended_at).total_seconds()
        text += f", {after:g}s after the attempt's end"
    return text


def rerun_of(attempt: AttemptRecord, attempts: Sequence[AttemptRecord]) -> AttemptRecord | None:
    """The successful re-run of a dynamic parent's child under a later attempt of the parent.

    propeller names a dynamic's child `GenerateUniqueID(parent unique id, parent attempt, spec
    id)` (flytepropeller `nodes/common/utils.go`, hashed past 20 characters) and, when the
    parent is retried, runs every child again under the parent's new attempt. The trial's
    parent attempt is the one whose id reproduces the trial's; its re-run is the same spec id
    under a later parent attempt, SUCCEEDED (the last such, if several).
    """
    parent, spec = attempt.parent_node, attempt.spec_node_id
    if parent is None or spec is None:
        return None
    tries = sorted({a.ref.attempt for a in attempts if a.ref.node_id == parent})
    own = next((k for k in tries if unique_node_id(parent, k, spec) == attempt.ref.node_id), None)
    if own is None:
        return None
    for k in reversed([k for k in tries if k > own]):
        rerun_id = unique_node_id(parent, k, spec)
        done = [a for a in attempts if a.ref.node_id == rerun_id and a.phase == "SUCCEEDED"]
        if done:
            return max(done, key=lambda a: a.ref.attempt)
    return None


def earliest(hits: Iterable[SignalHit]) -> SignalHit | None:
    """The earliest death-signal line among an attempt's pods (docs/report.md `signal`)."""
    return min(hits, key=lambda h: (h.at, h.pod), default=None)


# For a single-pod attempt (the container plugin) Admin's end is the container's
# FinishedAt, which Kubernetes keeps in whole seconds, so a signal logged within the second before
# the pod exited reads up to one second *after* that end. For a PyTorchJob propeller stamps the end
# itself when it observes the job's success (`time.Now()`), with no such truncation
# (docs/upstream.md, "Shapes met in the field").
WHOLE_SECOND = timedelta(seconds=1)


def end_precision(attempt: AttemptRecord) -> timedelta:
    """How far after Admin's recorded end a signal may lie and still precede the real end.

    An end read from `updated_at` (an attempt propeller never saw RUNNING) is propeller's own
    report time, at or after the pod's exit and not truncated: no slack after it."""
    if attempt.task_type == "pytorch" or attempt.end_from == "updated_at":
        return timedelta(0)
    return WHOLE_SECOND


def precedes_end(attempt: AttemptRecord, at: datetime) -> bool:
    """`at` (a signal's or a disruption's time) is before the attempt's end, or within the end's
    precision; an attempt without an end has not ended yet."""
    if attempt.ended_at is None:
        return True
    return at <= attempt.ended_at + end_precision(attempt)


def signal_precedes_end(attempt: AttemptRecord, signal: SignalHit) -> bool:
    """The signal came before the attempt's end, or within the end's precision."""
    return precedes_end(attempt, signal.at)


def late_signal_note(attempt: AttemptRecord, signal: SignalHit) -> str:
    """The note a finding keeps about a death signal that does not qualify (docs/report.md `evidence`)."""
    text = (
        f"{signal.signal} death signal at {rfc3339(signal.at)} in pod "
        f"{signal.namespace}/{signal.pod}"
    )
    if attempt.ended_at is not None and not signal_precedes_end(attempt, signal):
        after = (signal.at - attempt.ended_at).total_seconds()
        text += f", {after:g}s after the attempt's end (e.g. a sibling deleted after the success)"
    return text


def classify_signalled(
    attempt: AttemptRecord,
    execution: ExecutionRecord,
    signal: SignalHit,
    outputs: ObjectCheck | None,
    *,
    node_attempts: Sequence[AttemptRecord] = (),
) -> Decision:
    """An attempt one of whose pods logged a death signal.

    The artefact decides, timing only grades (docs/verdicts.md): a success without outputs.pb is always a
    finding — `affected` when the signal precedes the end (within its precision), else
    `suspected`; `signal-after-success` clears only a success whose outputs.pb exists.
    """
    if attempt.phase == "SUCCEEDED":
        return grade_success(
            attempt,
            outputs,
            signal_precedes_end(attempt, signal),
            (Cleared.SIGNAL_OUTPUTS_WRITTEN, Cleared.SIGNAL_AFTER_SUCCESS),
        )
    if attempt.phase in FAILED_PHASES:
        if any(a.ref.attempt > attempt.ref.attempt for a in node_attempts):
            return Decision(Cleared.SIGNAL_FAILED_RETRIED)
        return Decision(Cleared.SIGNAL_EXECUTION_FAILED)
    return Decision(Verdict.PENDING)


def classify_unsignalled(attempt: AttemptRecord, outputs: ObjectCheck | None) -> Decision:
    """An elastic attempt that ended SUCCEEDED in the window with no death-signal evidence."""
    if attempt.outputs_declared:
        return Decision(Cleared.OUTPUTS_DECLARED)
    if outputs is not None and outputs.expired:
        return Decision(Cleared.OUTPUTS_EXPIRED, note=outputs.reason)
    if outputs is None or outputs.state == "unknown":
        return _unchecked(outputs)
    if outputs.state == "present":
        return Decision(Cleared.OUTPUTS_WRITTEN)
    return Decision(Verdict.SUSPECTED)


def _unchecked(outputs: ObjectCheck | None) -> Decision:
    """A success whose outputs.pb could not be read: never cleared, a weaker finding."""
    reason = outputs.reason if outputs else "not checked"
    return Decision(Verdict.SUSPECTED, note=f"outputs.pb could not be checked: {reason}")


def needs_outputs_check(attempt: AttemptRecord) -> bool:
    """Whether only S3 can say if this attempt wrote outputs.pb: a success of a task that declares
    no outputs (a declared-outputs success is proven by Flyte itself, `Cleared.OUTPUTS_DECLARED`)."""
    return attempt.phase == "SUCCEEDED" and not attempt.outputs_declared


def sweep_candidate(attempt: AttemptRecord, window: Window) -> bool:
    """Whether the Admin sweep examines this attempt: elastic, SUCCEEDED, ended in the window."""
    return (
        attempt.is_elastic
        and attempt.phase == "SUCCEEDED"
        and attempt.ended_at is not None
        and attempt.ended_at in window
    )


def console_link(console_url: str | None, project: str, domain: str, name: str) -> str | None:
    if not console_url:
        return None
    return f"{console_url.rstrip('/')}/projects/{project}/domains/{domain}/executions/{name}"


def explore_link(
    grafana_url: str | None,
    datasource: str,
    selector: str,
    start: datetime,
    end: datetime,
) -> str | None:
    """A Grafana Explore link to the pod's logs around the signal."""
    if not grafana_url:
        return None
    import json
    from urllib.parse import quote

    left = {
        "datasource": datasource,
        "queries": [{"refId": "A", "expr": selector, "datasource": datasource}],
        "range": {
            "from": str(int(start.timestamp() * 1000)),
            "to": str(int(end.timestamp() * 1000)),
        },
    }
    return f"{grafana_url.rstrip('/')}/explore?orgId=1&left={quote(json.dumps(left, separators=(',', ':')))}"


def finding_links(
    settings: Settings, execution: ExecutionRecord, signal: SignalHit | None
) -> dict[str, str]:
    """The console link to the execution and the Grafana link to the signalled pod's logs."""
    links: dict[str, str] = {}
    ref = execution.ref
    flyte = console_link(settings.flyte.console_url, ref.project, ref.domain, ref.name)
    if flyte:
        links["flyte"] = flyte
    if signal is not None:
        loki = settings.loki
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
    return links


def shape_notes(ex: ExecutionRecord, att: AttemptRecord) -> tuple[str, ...]:
    """What a finding's shape means for the operator: a child execution, an array subtask."""
    notes: tuple[str, ...] = ()
    if att.end_from == "updated_at":
        notes += (
            "Admin recorded no start for this attempt (propeller never saw it RUNNING): its end "
            "is the terminal event's report time (updated_at), at or after the pod's exit",
        )
    if att.array_node is not None:
        notes += (f"subtask {att.array_index} of array (map) node {att.array_node}",)
    if ex.parent is not None:
        notes += (
            f"child execution of {ex.parent.execution} (node {ex.parent.node_id}): relaunching "
            "this child alone will not re-run the parent's later steps; relaunch the parent "
            f"(elastic-audit relaunch --parent {ex.ref})",
        )
    return notes


def build_finding(
    decision: Decision,
    ex: ExecutionRecord,
    att: AttemptRecord,
    signal: SignalHit | None,
    checkpoint: Checkpoint,
    links: dict[str, str],
    *,
    disruption: Disruption | None = None,
) -> Finding:
    """The report's finding for an attempt decided affected or suspected (docs/report.md)."""
    verdict = decision.verdict
    assert verdict is not None and decision.is_finding
    outputs = decision.outputs
    notes = (decision.note,) if decision.note else ()
    if (
        signal is not None
        and verdict is not Verdict.AFFECTED
        and not signal_precedes_end(att, signal)
    ):
        # A signal after the attempt's end is no death signal of it (docs/report.md): `signal`
        # is null and the hit is kept as a note. One before the end stays evidence, whatever
        # made the verdict `suspected` (S3 unreadable, say).
        notes += (late_signal_note(att, signal),)
        signal = None
    if (
        disruption is not None
        and not disruption.last_only
        and not disruption_precedes_end(att, disruption)
    ):
        notes += (late_disruption_note(att, disruption),)
    notes += shape_notes(ex, att)
    written = None if outputs is None or outputs.state == "unknown" else outputs.state == "present"
    return Finding(
        attempt=att.ref,
        verdict=verdict,
        execution_phase=ex.phase,
        signal=signal,
        succeeded_at=att.ended_at,
        outputs_written=written,
        checkpoint=checkpoint,
        links=links,
        evidence=notes,
        parent=ex.parent,
        disruption=disruption,
        cause=str(cause_of(att)),
    )
