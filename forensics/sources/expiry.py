"""What a missing outputs.pb means: never written, or expired with its node folder (pure).

Pure so that any way of learning which objects exist — a HEAD each, or one ListObjectsV2 of the
execution's prefix that holds both keys — reaches the same answer; `storage.ObjectStore` is one
such way. The rule and the upstream lines it rests on: docs/verdicts.md (`outputs-expired`),
docs/upstream.md ("Expired outputs").
"""

from __future__ import annotations

from typing import Any

from forensics.model import ObjectCheck

__all__ = ["describe_rule", "expires", "judge_outputs", "rule_prefix"]


def rule_prefix(rule: dict[str, Any]) -> str:
    """The key prefix an S3 lifecycle rule is limited to (`Filter.Prefix`, `Filter.And.Prefix`
    or the legacy top-level `Prefix`; "" for the whole bucket)."""
    f = rule.get("Filter") or {}
    return str(f.get("Prefix") or (f.get("And") or {}).get("Prefix") or rule.get("Prefix") or "")


def expires(rule: dict[str, Any], key: str) -> bool:
    """Whether an enabled rule with an `Expiration` may have expired `key` (tag and size
    conditions are not read: such a rule counts as one that may)."""
    expiration = rule.get("Expiration") or {}
    ages = expiration.get("Days") or expiration.get("Date")
    return rule.get("Status") == "Enabled" and bool(ages) and key.startswith(rule_prefix(rule))


def describe_rule(rule: dict[str, Any]) -> str:
    expiration = rule.get("Expiration") or {}
    when = (
        f"after {expiration['Days']} days"
        if expiration.get("Days")
        else f"from {expiration.get('Date')}"
    )
    prefix = rule_prefix(rule)
    where = f" under {prefix!r}" if prefix else ""
    return f"{rule.get('ID') or '(unnamed)'!r} ({when}{where})"


def judge_outputs(outputs: ObjectCheck, witness: ObjectCheck, inputs_uri: str) -> ObjectCheck:
    """An attempt's outputs.pb check, given whether its node's inputs.pb exists.

    Pure, so that any way of learning the two (two HEADs, or one prefix listing that holds both
    keys) reaches the same answer. propeller writes `<node data dir>/inputs.pb` in preExecute,
    before the node runs (flytepropeller v1.16.8 `nodes/executor.go`: `Resolve` always returns a
    map, `WriteProtobuf(GetInputsFile(dataDir))`), so it is older than any outputs.pb of the
    node. An age-based lifecycle expiration removes the older object first: inputs.pb present
    means outputs.pb was never written (`missing`); inputs.pb gone too means the folder expired
    (or was deleted), and S3 can no longer tell — `unknown`, `expired`, never `missing`.
    """
    if outputs.state != "missing":
        return outputs
    match witness.state:
        case "present":
            return outputs
        case "missing":
            return ObjectCheck(
                "unknown",
                f"outputs.pb is absent and so is the node's {inputs_uri}, which propeller writes "
                "before the node runs: the folder has expired (a bucket lifecycle rule) or was "
                "deleted, so whether outputs.pb was ever written cannot be told",
                expired=True,
            )
        case _:
            return ObjectCheck(
                "unknown",
                f"outputs.pb is absent, and the node's {inputs_uri} that would tell expired from "
                f"never written could not be read: {witness.reason}",
                failure=witness.failure,
            )
