"""A task that declares outputs cannot succeed silently: Flyte itself fails a success without
outputs.pb (propeller's ValidateOutput, docs/upstream.md#the-bug-chain). The scan clears such attempts from
Admin's task template alone, so an outputs.pb deleted later (bucket lifecycle rules) is no false
finding, and it spends no S3 call on them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from support.cli import run
from support.scan import WINDOW, sandbox_fixtures

from forensics.sandbox.incident import ScenarioBuilder, _try

pytestmark = pytest.mark.integration

UTC = timezone.utc
T0 = datetime(2026, 9, 8, 3, 0, 0, tzinfo=UTC)
NS = "gs1-production"
SIGNALLED, QUIET, VOID = "a1declaredsignalled0", "b2declaredquiet00000", "c3voidquiet000000000"


def _scenario():
    b = ScenarioBuilder()
    gs1 = ("gs1", "production")
    returns_model = b.task(*gs1, "train.returns_model", has_outputs=True)
    void = b.task(*gs1, "train.void")
    for i, (name, task) in enumerate(
        [(SIGNALLED, returns_model), (QUIET, returns_model), (VOID, void)]
    ):
        start = T0 + timedelta(hours=i)
        end = start + timedelta(minutes=30)
        # None of them has outputs.pb in S3 (write_outputs is False): expired, or never written.
        b.one_node(
            *gs1,
            name,
            "SUCCEEDED",
            start,
            end + timedelta(seconds=5),
            _try(name, 0, "SUCCEEDED", start, end, task),
        )
    b.signal_pod(T0 + timedelta(minutes=29), NS, f"{SIGNALLED}-n0-0", f"{SIGNALLED}-n0-0")
    return b.build()


box, env = sandbox_fixtures(_scenario)


def test_declared_outputs_success_is_cleared_without_reading_s3(box, capsys):
    box.s3.requests.clear()
    code, out, _ = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    report = json.loads(out)
    assert code == 1 and report["complete"]
    # The task without declared outputs is the only finding; the signalled one and the quiet one
    # of the task that returns a model are cleared by their template.
    assert [(f["execution"]["name"], f["verdict"]) for f in report["findings"]] == [
        (VOID, "suspected")
    ]
    assert report["summary"]["attempts_examined"] == 3
    assert report["summary"]["cleared"] == {"outputs-declared": 2}
    heads = [r.path for r in box.s3.requests if r.method == "HEAD"]
    # Only the void task's outputs.pb, and (it is missing) its node's inputs.pb, the witness
    # that tells never written from expired (docs/verdicts.md).
    assert len(heads) == 2 and all(VOID in h for h in heads)
    assert heads[0].endswith("/outputs.pb") and heads[1].endswith("/data/inputs.pb")


def test_show_still_reads_outputs_pb_and_says_why_the_attempt_is_cleared(capsys):
    code, out, _ = run(["show", f"gs1:production:{SIGNALLED}", "-o", "json"], capsys)
    shown = json.loads(out)
    assert code == 0 and shown["complete"]
    (attempt,) = shown["attempts"]
    assert attempt["outputs"] == "missing"  # the evidence, as S3 has it today
    assert (attempt["verdict"], attempt["reason"]) == ("not-affected", "outputs-declared")
