"""Pure decisions: evidence about one attempt → verdict (affected / suspected / cleared-because)."""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from forensics.config import CheckpointSettings
from forensics.model import (
    AttemptRecord,
    ExecutionRecord,
    ObjectCheck,
    PrefixListing,
    SignalHit,
    Window,
    rfc3339,
)

# Why an examined attempt is not a finding (SPEC §5); each has its own counter in the summary.
SIGNAL_OUTPUTS_WRITTEN = "signal-then-outputs-written"
SIGNAL_FAILED_RETRIED = "signal-then-failed-and-retried"
SIGNAL_EXECUTION_FAILED = "signal-then-execution-failed"
SIGNAL_NOT_FLYTE_POD = "signal-not-a-flyte-task-pod"
SIGNAL_NOT_FINISHED = "signal-attempt-not-finished"
# Not a cleared class: a signalled attempt still running is listed in the report's `pending`
# (SPEC §5), to be judged by a rescan once it ends.
PENDING = "pending"
SIGNAL_AFTER_SUCCESS = "signal-after-success"
SIGNAL_OUTSIDE_SCOPE = "signal-outside-scope"
OUTPUTS_WRITTEN = "outputs-written"
# A success of a task whose interface declares outputs: propeller's ValidateOutput turns a missing
# outputs.pb into "OutputsNotFound" (FACTS §1.3-1.4), so Flyte's own success proves it was written.
OUTPUTS_DECLARED = "outputs-declared"

FAILED_PHASES = frozenset({"FAILED", "RETRYABLE_FAILED", "ABORTED", "TIMED_OUT"})


@dataclass(frozen=True)
class Verdict:
    """The decision about one attempt: a finding's verdict, or the reason it was cleared."""

    verdict: str | None  # "affected" | "suspected" | "pending" | None (cleared)
    cleared: str | None = None
    note: str | None = None  # why a finding is weaker than it looks (e.g. outputs unknown)


def earliest(hits: Iterable[SignalHit]) -> SignalHit | None:
    """The earliest death-signal line among an attempt's pods (SPEC §5 `signal`)."""
    return min(hits, key=lambda h: (h.at, h.pod), default=None)


# FACTS §13: for a single-pod attempt (the container plugin) Admin's end is the container's
# FinishedAt, which Kubernetes keeps in whole seconds, so a signal logged within the second before
# the pod exited reads up to one second *after* that end. For a PyTorchJob propeller stamps the end
# itself when it observes the job's success (`time.Now()`), with no such truncation.
WHOLE_SECOND = timedelta(seconds=1)


def end_precision(attempt: AttemptRecord) -> timedelta:
    """How far after Admin's recorded end a signal may lie and still precede the real end."""
    return timedelta(0) if attempt.task_type == "pytorch" else WHOLE_SECOND


def signal_precedes_end(attempt: AttemptRecord, signal: SignalHit) -> bool:
    """SPEC §5: the signal came before the attempt's end, or within the end's precision."""
    if attempt.ended_at is None:
        return True
    return signal.at <= attempt.ended_at + end_precision(attempt)


def late_signal_note(attempt: AttemptRecord, signal: SignalHit) -> str:
    """The note a finding keeps about a death signal that does not qualify (SPEC §6 `notes`)."""
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
    later_attempts: Sequence[AttemptRecord] = (),
) -> Verdict:
    """An attempt one of whose pods logged a death signal.

    The artefact decides, timing only grades (SPEC §5): a success without outputs.pb is always a
    finding — `affected` when the signal precedes the end (within its precision), else
    `suspected`; `signal-after-success` clears only a success whose outputs.pb exists.
    """
    if attempt.phase == "SUCCEEDED":
        if attempt.outputs_declared:
            return Verdict(None, OUTPUTS_DECLARED)
        if outputs is None or outputs.state == "unknown":
            return _unchecked(outputs)
        before = signal_precedes_end(attempt, signal)
        if outputs.state == "present":
            return Verdict(None, SIGNAL_OUTPUTS_WRITTEN if before else SIGNAL_AFTER_SUCCESS)
        return Verdict("affected") if before else Verdict("suspected")
    if attempt.phase in FAILED_PHASES:
        if any(a.ref.attempt > attempt.ref.attempt for a in later_attempts):
            return Verdict(None, SIGNAL_FAILED_RETRIED)
        return Verdict(None, SIGNAL_EXECUTION_FAILED)
    return Verdict(PENDING)


def classify_unsignalled(attempt: AttemptRecord, outputs: ObjectCheck | None) -> Verdict:
    """An elastic attempt that ended SUCCEEDED in the window with no death-signal evidence."""
    if attempt.outputs_declared:
        return Verdict(None, OUTPUTS_DECLARED)
    if outputs is None or outputs.state == "unknown":
        return _unchecked(outputs)
    if outputs.state == "present":
        return Verdict(None, OUTPUTS_WRITTEN)
    return Verdict("suspected")


def _unchecked(outputs: ObjectCheck | None) -> Verdict:
    """A success whose outputs.pb could not be read: never cleared, a weaker finding (SPEC §5)."""
    reason = outputs.reason if outputs else "not checked"
    return Verdict("suspected", note=f"outputs.pb could not be checked: {reason}")


def needs_outputs_check(attempt: AttemptRecord) -> bool:
    """Whether only S3 can say if this attempt wrote outputs.pb: a success of a task that declares
    no outputs (a declared-outputs success is proven by Flyte itself, `OUTPUTS_DECLARED`)."""
    return attempt.phase == "SUCCEEDED" and not attempt.outputs_declared


def sweep_candidate(attempt: AttemptRecord, window: Window) -> bool:
    """Whether the Admin sweep examines this attempt: elastic, SUCCEEDED, ended in the window."""
    return (
        attempt.is_elastic
        and attempt.phase == "SUCCEEDED"
        and attempt.ended_at is not None
        and attempt.ended_at in window
    )


class _Fields(dict):
    """Template fields `inputs.X` / `labels.X` resolve through attribute access."""

    def __getattr__(self, name: str) -> str:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class CheckpointLocation:
    """Where a finding's checkpoints should be, and which rule said so (or why unknown)."""

    uri: str | None
    source: str | None
    reason: str | None = None


def checkpoint_location(
    settings: CheckpointSettings,
    attempt: AttemptRecord,
    execution: ExecutionRecord,
    inputs: Mapping[str, str] | None,
    *,
    node_inputs: Mapping[str, str] | None = None,
) -> CheckpointLocation:
    """SPEC §4.4/§5: the input named by `input` — the attempt's own node inputs first, then the
    execution's —, else `template` (`inputs.X` the same way), else Flyte's own."""
    for where, found in (("node-input", node_inputs), ("input", inputs)):
        if settings.input and found and found.get(settings.input):
            return CheckpointLocation(as_prefix(found[settings.input]), f"{where}:{settings.input}")
    if settings.template:
        fields = {
            "project": execution.ref.project,
            "domain": execution.ref.domain,
            "name": execution.ref.name,
            "node_id": attempt.ref.node_id,
            "inputs": _Fields({**(inputs or {}), **(node_inputs or {})}),
            "labels": _Fields(execution.labels),
        }
        try:
            uri = string.Formatter().vformat(settings.template, (), fields)
        except (KeyError, AttributeError, IndexError, ValueError) as e:
            return CheckpointLocation(
                None, "template", f"checkpoint template field {e} is not known for this execution"
            )
        return CheckpointLocation(as_prefix(uri), "template")
    if attempt.checkpoint_uri:
        return CheckpointLocation(as_prefix(attempt.checkpoint_uri), "flyte-checkpoint")
    return CheckpointLocation(None, None, "no checkpoint location known")


def as_prefix(uri: str) -> str:
    """A checkpoint location is listed as a prefix, with its trailing `/`."""
    return uri if uri.endswith("/") else uri + "/"


def written_after(listing: PrefixListing, signal: SignalHit | None) -> bool | None:
    """Whether the newest checkpoint object is younger than the death signal."""
    if signal is None or listing.latest is None:
        return None
    return listing.latest > signal.at


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
