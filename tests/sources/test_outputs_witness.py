"""`expiry.judge_outputs`: outputs.pb absent, told apart by the node's inputs.pb (the witness
propeller writes before the node runs, flytepropeller `nodes/executor.go` preExecute)."""

from __future__ import annotations

from forensics.model import ObjectCheck
from forensics.sources.expiry import expires, judge_outputs

INPUTS = "s3://flyte-metadata/metadata/propeller/p-d-x/n0/data/inputs.pb"
MISSING, PRESENT = ObjectCheck("missing"), ObjectCheck("present")


def test_witness_present_means_never_written():
    assert judge_outputs(MISSING, PRESENT, INPUTS) == MISSING


def test_witness_gone_too_means_expired_never_missing():
    got = judge_outputs(MISSING, ObjectCheck("missing"), INPUTS)
    assert (got.state, got.expired) == ("unknown", True) and INPUTS in (got.reason or "")


def test_an_unreadable_witness_leaves_the_outputs_unknown_not_expired():
    got = judge_outputs(MISSING, ObjectCheck("unknown", "forbidden (403)"), INPUTS)
    assert (got.state, got.expired) == ("unknown", False) and "forbidden (403)" in (
        got.reason or ""
    )


def test_outputs_found_need_no_witness():
    assert judge_outputs(PRESENT, ObjectCheck("missing"), INPUTS) == PRESENT


def test_which_lifecycle_rules_may_have_expired_a_key():
    key = "metadata/propeller/p-d-x/n0/data/inputs.pb"
    days = {"Expiration": {"Days": 30}, "Status": "Enabled"}
    assert expires({**days, "Filter": {"Prefix": "metadata/"}}, key)
    assert expires({**days, "Filter": {"And": {"Prefix": "metadata/", "Tags": []}}}, key)
    assert expires({**days, "Prefix": ""}, key)  # the legacy form: the whole bucket
    assert not expires({**days, "Filter": {"Prefix": "raw/"}}, key)
    assert not expires({**days, "Status": "Disabled", "Filter": {}}, key)
    assert not expires({"Status": "Enabled", "Filter": {}, "Transitions": []}, key)
