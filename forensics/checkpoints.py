"""Where a finding's checkpoint lives and what its listing says (pure: no I/O).

The rules are in docs/configuration.md ("Checkpoints") and docs/verdicts.md ("Checkpoints"):
`[checkpoints] input` names an input holding the URI (the attempt's own node inputs first, then
the execution's), else `template` renders one, else Flyte's own checkpoint location is used.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass

from forensics.config import CheckpointSettings
from forensics.model import (
    AttemptRecord,
    Checkpoint,
    ExecutionRecord,
    PrefixListing,
    SignalHit,
)


def needs_inputs(settings: CheckpointSettings) -> bool:
    """Whether locating a checkpoint reads Admin's inputs (an input rule, or `inputs.X` fields)."""
    return bool(settings.input or (settings.template and "{inputs." in settings.template))


def needs_execution_inputs(settings: CheckpointSettings, node_inputs: Mapping[str, str]) -> bool:
    """Whether the execution's inputs are needed too: the node's own do not hold the input."""
    return not (settings.input and node_inputs.get(settings.input))


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
    """The input named by `input` — the attempt's own node inputs first, then the execution's —,
    else `template` (`inputs.X` the same way), else Flyte's own."""
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


def checkpoint_from(
    location: CheckpointLocation, listing: PrefixListing | None, signal: SignalHit | None
) -> Checkpoint:
    """The finding's checkpoint: its location, and what the listing found (None: not listed)."""
    if location.uri is None or listing is None:
        return Checkpoint(None, "unknown", reason=location.reason, source=location.source)
    return Checkpoint(
        uri=location.uri,
        state=listing.state,
        objects=listing.objects,
        latest=listing.latest,
        reason=listing.reason,
        source=location.source,
        written_after_signal=written_after(listing, signal),
        failure=listing.failure,
    )
