"""A saved JSON report (docs/report.md, schema_version 1) back into the typed `Report`: the one
way back from JSON, for `merge`, guard state and `relaunch --from-report`.

`report_from_json(report.as_dict()).as_dict() == report.as_dict()` for every report (what the
JSON does not hold — a signal's line, the page's activity — stays empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from forensics.model import (
    UTC,
    AttemptRef,
    Checkpoint,
    Cost,
    Disruption,
    ExecutionRef,
    Finding,
    Gap,
    ParentNode,
    Pending,
    Report,
    Scope,
    SignalHit,
    Summary,
    Superseded,
    UnparsedLine,
    Unresolved,
    Window,
)


def report_from_json(doc: Mapping[str, Any]) -> Report:
    """The typed report of a JSON report. A document that is not one raises ValueError
    (another schema_version), KeyError (a required key missing) or TypeError (a wrong type)."""
    if doc.get("schema_version") != 1:
        raise ValueError(f"schema_version {doc.get('schema_version')!r}, not 1")
    try:
        return _report(doc)
    except AttributeError as e:  # a list or a number where an object or a time belongs
        raise TypeError(str(e)) from None


def _report(doc: Mapping[str, Any]) -> Report:
    w = doc["window"]
    scope = doc.get("scope")
    return Report(
        tool=str(doc["tool"]),
        window=Window(_time(w["start"]), _time(w["end"])),
        gaps=tuple(gap_from_json(g) for g in doc["gaps"]),
        summary=_summary(doc["summary"]),
        findings=tuple(finding_from_json(f) for f in doc["findings"]),
        pending=tuple(pending_from_json(p) for p in doc.get("pending", ())),
        unresolved=tuple(
            Unresolved(_signal(u["signal"]), str(u["reason"])) for u in doc.get("unresolved", ())
        ),
        superseded=tuple(
            Superseded(
                _attempt(x),
                AttemptRef(
                    _execution(x["execution"]), x["rerun"]["node_id"], x["rerun"]["attempt"]
                ),
            )
            for x in doc.get("superseded", ())
        ),
        scope=None if scope is None else Scope(tuple(scope["projects"]), tuple(scope["domains"])),
    )


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _opt_time(text: str | None) -> datetime | None:
    return None if text is None else _time(text)


def _execution(e: Mapping[str, Any]) -> ExecutionRef:
    return ExecutionRef(str(e["project"]), str(e["domain"]), str(e["name"]))


def _attempt(item: Mapping[str, Any]) -> AttemptRef:
    return AttemptRef(_execution(item["execution"]), str(item["node_id"]), int(item["attempt"]))


def _signal(s: Mapping[str, Any]) -> SignalHit:
    # The JSON keeps no container, line kind or line (signal_dict): they stay empty.
    return SignalHit(
        signal=s["name"],
        number=int(s["number"]),
        at=_time(s["at"]),
        namespace=s["namespace"],
        pod=s["pod"],
        container=None,
        kind="",
        line="",
        at_source=s.get("at_source", "loki"),
    )


def gap_from_json(g: Mapping[str, Any]) -> Gap:
    """One of the report's `gaps` (a gap saved without `kind` is `failed`, as before kinds)."""
    return Gap(
        g["source"], _opt_time(g["start"]), _opt_time(g["end"]), g["error"], g.get("kind", "failed")
    )


def _summary(s: Mapping[str, Any]) -> Summary:
    ex = s.get("unparsed_example")
    return Summary(
        attempts_examined=s["attempts_examined"],
        affected=s["affected"],
        suspected=s["suspected"],
        not_affected=s["not_affected"],
        cleared=dict(s.get("cleared") or {}),
        pending=s.get("pending", 0),
        unparsed_lines=s["unparsed_lines"],
        unparsed_example=None
        if ex is None
        else UnparsedLine(_time(ex["at"]), tuple(ex["labels"].items()), ex["line"]),
        cost=s.get("cost"),
        by_disruption_reason=dict(s.get("findings_by_disruption_reason") or {}),
    )


def _disruption(d: Mapping[str, Any]) -> Disruption:
    return Disruption(
        d["source"],
        d["reason"],
        d["initiator"],
        _time(d["at"]),
        d["namespace"],
        d["pod"],
        d["text"],
    )


def _checkpoint(c: Mapping[str, Any]) -> Checkpoint:
    return Checkpoint(
        uri=c["uri"],
        state=c["state"],
        objects=c["objects"],
        latest=_opt_time(c["latest"]),
        reason=c["reason"],
        source=c.get("source"),
        written_after_signal=c.get("written_after_signal"),
    )


def _cost(c: Mapping[str, Any]) -> Cost:
    return Cost(
        **{k: c[k] for k in Cost.__dataclass_fields__ if k != "unknown"},
        unknown=tuple(c.get("unknown", ())),
    )


def pending_from_json(p: Mapping[str, Any]) -> Pending:
    """One of the report's `pending` attempts."""
    return Pending(_attempt(p), str(p.get("phase", "")), _signal(p["signal"]))


def finding_from_json(f: Mapping[str, Any]) -> Finding:
    """One of the report's `findings`."""
    parent = f.get("parent")
    return Finding(
        attempt=_attempt(f),
        verdict=f["verdict"],
        execution_phase=f["execution_phase"],
        signal=_signal(f["signal"]) if f["signal"] else None,
        succeeded_at=_opt_time(f["succeeded_at"]),
        outputs_written=f["outputs_written"],
        checkpoint=_checkpoint(f["checkpoint"]),
        relaunched_as=_execution(f["relaunched_as"]) if f.get("relaunched_as") else None,
        links=dict(f.get("links") or {}),
        evidence=tuple(f.get("notes", ())),
        parent=ParentNode(_execution(parent["execution"]), parent["node_id"]) if parent else None,
        cost=_cost(f["cost"]) if f.get("cost") else None,
        disruption=_disruption(f["disruption"]) if f.get("disruption") else None,
        cause=f.get("cause"),
        new=f.get("new"),
        recovered_as=tuple(_execution(r) for r in f.get("recovered_as") or ()),
    )
