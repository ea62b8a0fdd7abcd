"""What a scan (or one examination) collects about one attempt, and the verdict it gets.

`Evidence` is plain and immutable: the attempt, its execution, its node's attempts, its
execution's attempts, its earliest death signal, its pod's disruption, and its outputs.pb
check. `judge` gives it its one decision (`detect.decide`), the same for scan, show and relaunch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forensics.detect import Decision, decide
from forensics.model import AttemptRecord, Disruption, ExecutionRecord, ObjectCheck, SignalHit


@dataclass(frozen=True, slots=True)
class Evidence:
    """One examined attempt and everything its verdict rests on.

    `node_attempts`: every attempt of its node (retried or not), where a signal makes them
    matter; `execution_attempts`: every attempt of its execution the sweep listed (re-runs of
    trials); `outputs`: the outputs.pb check, None when not read (not needed, or a failure);
    `logs_absent`: Loki holds no task log for the time it ran (docs/upstream.md, "Log coverage").
    """

    execution: ExecutionRecord
    attempt: AttemptRecord
    signal: SignalHit | None = None
    disruption: Disruption | None = None
    node_attempts: Sequence[AttemptRecord] = ()
    execution_attempts: Sequence[AttemptRecord] = ()
    outputs: ObjectCheck | None = None
    logs_absent: bool = False


def judge(e: Evidence) -> Decision:
    """The attempt's decision: a verdict or why it was cleared (docs/verdicts.md)."""
    return decide(
        e.attempt,
        e.execution,
        e.signal,
        e.outputs,
        node_attempts=e.node_attempts,
        disruption=e.disruption,
        execution_attempts=e.execution_attempts,
    )
