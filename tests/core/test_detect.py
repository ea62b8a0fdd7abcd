"""Pure verdicts (docs/verdicts.md) from plain data: no servers, no I/O."""

from datetime import datetime, timedelta

import pytest

from forensics.checkpoints import checkpoint_location
from forensics.config import CheckpointSettings
from forensics.detect import (
    Cleared,
    classify_signalled,
    classify_unsignalled,
    earliest,
    late_signal_note,
    needs_outputs_check,
    sweep_candidate,
)
from forensics.model import (
    UTC,
    AttemptRecord,
    AttemptRef,
    ExecutionRecord,
    ExecutionRef,
    ObjectCheck,
    SignalHit,
    Window,
)

EX = ExecutionRef("gs1", "production", "azvg5f9v9974m78fvlf7")
SIG_AT = datetime(2026, 9, 10, 19, 45, 22, tzinfo=UTC)


def attempt(
    phase="SUCCEEDED",
    n=0,
    ended=SIG_AT + timedelta(seconds=7),
    ttype="python-task",
    version=1,
    is_array=False,
    ck=None,
    declared=False,
):
    return AttemptRecord(
        ref=AttemptRef(EX, "n0", n),
        phase=phase,
        task_type=ttype,
        task_type_version=version,
        is_array=is_array,
        started_at=SIG_AT - timedelta(hours=8),
        ended_at=ended,
        output_dir=f"s3://meta/{n}/",
        pods=(f"{EX.name}-n0-{n}",),
        namespace="gs1-production",
        checkpoint_uri=ck,
        outputs_declared=declared,
    )


def execution(phase="SUCCEEDED", labels=None):
    return ExecutionRecord(
        EX,
        phase,
        SIG_AT - timedelta(hours=9),
        SIG_AT + timedelta(seconds=9),
        "MANUAL",
        None,
        labels or {},
    )


def hit(at=SIG_AT, pod="azvg5f9v9974m78fvlf7-n0-0"):
    return SignalHit("SIGTERM", 15, at, "gs1-production", pod, None, "agent", "Received 15 ...")


MISSING, PRESENT = ObjectCheck("missing"), ObjectCheck("present")


def test_preempted_attempt_without_outputs_is_affected():
    assert classify_signalled(attempt(), execution(), hit(), MISSING).verdict == "affected"


def test_signal_then_outputs_written_is_cleared():
    v = classify_signalled(attempt(), execution(), hit(), PRESENT)
    assert v.verdict is None and v.cleared == Cleared.SIGNAL_OUTPUTS_WRITTEN


def test_signalled_attempt_that_failed_and_was_retried_is_cleared():
    failed, retry = attempt("RETRYABLE_FAILED", 0), attempt("SUCCEEDED", 1)
    v = classify_signalled(failed, execution(), hit(), None, node_attempts=[failed, retry])
    assert v.cleared == Cleared.SIGNAL_FAILED_RETRIED


def test_sibling_signalled_after_genuine_failure_is_cleared():
    v = classify_signalled(attempt("FAILED"), execution("FAILED"), hit(), None)
    assert v.verdict is None and v.cleared == Cleared.SIGNAL_EXECUTION_FAILED


def test_signal_after_success_clears_only_a_success_whose_outputs_exist():
    # docs/verdicts.md: the artefact decides, timing only grades.
    late = attempt(ended=SIG_AT - timedelta(seconds=2))
    assert (
        classify_signalled(late, execution(), hit(), PRESENT).cleared
        == Cleared.SIGNAL_AFTER_SUCCESS
    )
    v = classify_signalled(late, execution(), hit(), MISSING)
    assert v.verdict == "suspected"
    assert "2s after the attempt's end" in late_signal_note(late, hit())


def test_a_signal_within_the_whole_second_of_a_single_pod_end_precedes_it():
    # docs/upstream.md#shapes-met-in-the-field: Admin's single-pod end is FinishedAt in whole seconds.
    for after in (timedelta(milliseconds=400), timedelta(seconds=1)):
        a = attempt(ended=SIG_AT - after)
        assert classify_signalled(a, execution(), hit(), MISSING).verdict == "affected"
        assert (
            classify_signalled(a, execution(), hit(), PRESENT).cleared
            != Cleared.SIGNAL_AFTER_SUCCESS
        )
    # A PyTorchJob's end is stamped by propeller itself: no such slack.
    job = attempt(ended=SIG_AT - timedelta(milliseconds=400), ttype="pytorch")
    assert classify_signalled(job, execution(), hit(), MISSING).verdict == "suspected"


def test_a_signalled_attempt_not_finished_is_pending_never_cleared():
    assert classify_signalled(attempt("RUNNING", ended=None), execution(), hit(), None).verdict == (
        "pending"
    )


def test_outputs_that_could_not_be_checked_never_clear_a_signalled_attempt():
    v = classify_signalled(attempt(), execution(), hit(), ObjectCheck("unknown", "forbidden"))
    assert v.verdict == "suspected" and "forbidden" in v.note


def test_unsignalled_elastic_success_without_outputs_is_suspected():
    assert classify_unsignalled(attempt(), MISSING).verdict == "suspected"
    assert classify_unsignalled(attempt(), PRESENT).cleared == Cleared.OUTPUTS_WRITTEN
    assert (
        classify_unsignalled(attempt(), ObjectCheck("unknown", "throttled")).verdict == "suspected"
    )


@pytest.mark.parametrize(
    "kw,expected",
    [
        ({}, True),
        ({"ttype": "pytorch", "version": 0}, True),
        ({"version": 0}, False),  # plain python task
        ({"is_array": True}, False),  # map task
        ({"phase": "FAILED"}, False),
        ({"ended": datetime(2026, 9, 11, tzinfo=UTC)}, False),  # end is exclusive
        ({"ended": None}, False),
    ],
)
def test_sweep_examines_only_elastic_successes_ending_in_the_window(kw, expected):
    w = Window(datetime(2026, 9, 4, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))
    assert sweep_candidate(attempt(**kw), w) is expected


def test_earliest_signal_among_pods_of_one_attempt():
    a, b = hit(SIG_AT + timedelta(seconds=1), "x-worker-1"), hit(SIG_AT, "x-worker-0")
    assert earliest([a, b]) is b
    assert earliest([]) is None


def test_checkpoint_input_then_template_then_flyte():
    att, ex = (
        attempt(ck="s3://meta/raw/ab/x/_flytecheckpoints"),
        execution(labels={"team": "distill"}),
    )
    inputs = {"checkpoint_dir": "s3://exa-models/checkpoints/run"}
    both = CheckpointSettings(input="checkpoint_dir", template="s3://b/{labels.team}/{name}")
    assert checkpoint_location(both, att, ex, inputs).uri == "s3://exa-models/checkpoints/run/"
    loc = checkpoint_location(both, att, ex, {})
    assert (loc.uri, loc.source) == (f"s3://b/distill/{EX.name}/", "template")
    loc = checkpoint_location(CheckpointSettings(), att, ex, None)
    assert (loc.uri, loc.source) == ("s3://meta/raw/ab/x/_flytecheckpoints/", "flyte-checkpoint")
    loc = checkpoint_location(CheckpointSettings(), attempt(), ex, None)
    assert loc.uri is None and "no checkpoint location" in loc.reason


def test_checkpoint_template_with_an_unknown_field_is_unknown_not_a_crash():
    loc = checkpoint_location(
        CheckpointSettings(template="s3://b/{inputs.missing}/"), attempt(), execution(), {}
    )
    assert loc.uri is None and "missing" in loc.reason


def test_success_of_a_task_with_declared_outputs_is_cleared_whatever_s3_says_now():
    # Flyte fails such a success without outputs.pb; a missing one was deleted afterwards.
    declared = attempt(declared=True)
    for outputs in (MISSING, PRESENT, None):
        assert (
            classify_signalled(declared, execution(), hit(), outputs).cleared
            == Cleared.OUTPUTS_DECLARED
        )
        assert classify_unsignalled(declared, outputs).cleared == Cleared.OUTPUTS_DECLARED
    early = attempt(declared=True, ended=SIG_AT - timedelta(seconds=5))
    assert classify_signalled(early, execution(), hit(), None).cleared == Cleared.OUTPUTS_DECLARED
    failed = attempt(phase="FAILED", declared=True)
    assert (
        classify_signalled(failed, execution(), hit(), None).cleared
        == Cleared.SIGNAL_EXECUTION_FAILED
    )
    assert needs_outputs_check(attempt()) and not needs_outputs_check(declared)
    assert not needs_outputs_check(failed) and not needs_outputs_check(attempt(phase="FAILED"))
