"""The re-check before a relaunch: one verdict for an execution from the scan's own decisions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from forensics.detect import Decision, Verdict
from forensics.model import AttemptRecord, ExecutionRecord, rfc3339

if TYPE_CHECKING:
    from forensics.model import Checkpoint
    from forensics.scan.examine import Examination, Examined


@dataclass(frozen=True)
class Recheck:
    """The scan's verdict on one execution, as a relaunch decision needs it."""

    verdict: str  # affected / suspected / not-affected / not-examined / inconclusive (...)
    checkpoint: str  # what a relaunch will find in the checkpoint location
    execution: ExecutionRecord
    tasks: tuple[tuple[str, str, str, str], ...] = ()  # tasks of the attempts found lying
    found: Checkpoint | None = None  # the checkpoint as data (the plan's machine-readable fields)
    lost: tuple[AttemptRecord, ...] = ()  # the attempts proven affected or suspected


def describe_checkpoint(ck: Checkpoint | None) -> str:
    """What a relaunch will find in the checkpoint location, in words."""
    if ck is None:
        return "checkpoint not inspected"
    if ck.state == "present" and ck.written_after_signal:
        # A write that raced the SIGTERM may be cut short (docs/verdicts.md, checkpoints).
        return (
            f"checkpoint has {ck.objects} object(s), newest {rfc3339(ck.latest)}, written AFTER "
            "the signal: it may be partial; check it before relying on a resume"
        )
    if ck.state == "present":
        return f"checkpoint has {ck.objects} object(s), newest {rfc3339(ck.latest)}: training resumes from it"
    if ck.state == "empty":
        return f"checkpoint {ck.uri} is empty: training restarts from scratch"
    return f"checkpoint unknown ({ck.reason}): check it before relying on a resume"


def recheck_of(exam: Examination) -> Recheck:
    """One verdict for an execution from the scan's verdicts on all of its attempts.

    A relaunch must rest on evidence: an attempt whose outputs.pb could not be read proves
    nothing, but it does not mask another attempt that is proven affected or suspected.
    """
    found = [e for e in exam.attempts if e.decision is not None and e.decision.is_finding]
    proven = [e for e in found if e.outputs is not None and e.outputs.state == "missing"]
    proven.sort(key=lambda e: _verdict(e) is not Verdict.AFFECTED)
    ex = exam.execution
    if proven:
        tasks = tuple(dict.fromkeys(e.attempt.task_id for e in proven if e.attempt.task_id))
        first = proven[0]
        return Recheck(
            str(_verdict(first)),
            describe_checkpoint(first.checkpoint),
            ex,
            tasks,
            first.checkpoint,
            tuple(e.attempt for e in proven),
        )
    pending = [e for e in exam.attempts if _verdict(e) is Verdict.PENDING]
    if pending:
        a = pending[0].attempt.ref
        return Recheck(
            f"pending (attempt {a.node_id}/{a.attempt} was signalled and has not finished: "
            "re-check once it ends)",
            "",
            ex,
        )
    if found:
        reason = found[0].outputs.reason if found[0].outputs else "not checked"
        return Recheck(f"inconclusive (outputs.pb could not be checked: {reason})", "", ex)
    if exam.gaps:
        return Recheck(f"inconclusive ({'; '.join(g.error for g in exam.gaps)})", "", ex)
    if exam.unparsed:
        # A matched line the parser cannot read is never dropped silently (docs/verdicts.md); it may be
        # the signal that makes an attempt a finding.
        return Recheck(
            f"inconclusive ({exam.unparsed} death-signal line(s) matched but could not be read; "
            "see `show`)",
            "",
            ex,
        )
    examined = any(e.decision is not None for e in exam.attempts)
    return Recheck("not-affected" if examined else "not-examined", "", ex)


def _verdict(e: Examined) -> Verdict | None:
    return e.decision.verdict if e.decision is not None else None


# What relaunch acts on: exactly the verdicts the scan reports as findings (one definition).
RELAUNCHABLE = tuple(str(v) for v in Verdict if Decision(v).is_finding)
