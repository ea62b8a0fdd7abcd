"""One CSV row per finding, for spreadsheets."""

from __future__ import annotations

import csv
import io

from forensics.model import Report, rfc3339

COLUMNS = [
    "verdict",
    "project",
    "domain",
    "execution",
    "node_id",
    "attempt",
    "execution_phase",
    "signal",
    "signal_at",
    "namespace",
    "pod",
    "succeeded_at",
    "outputs_written",
    "checkpoint_uri",
    "checkpoint_state",
    "checkpoint_objects",
    "checkpoint_latest",
    "checkpoint_reason",
    "relaunched_as",
    "flyte_link",
    "parent",
    # docs/report.md `cause`, `disruption`
    "cause",
    "disruption_source",
    "disruption_reason",
    "disruption_initiator",
    "disruption_at",
]


def render(report: Report) -> str:
    """One header row, then one row per finding."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for f in report.findings:
        ex = f.attempt.execution
        sig, d = f.signal, f.disruption
        w.writerow(
            [
                f.verdict,
                ex.project,
                ex.domain,
                ex.name,
                f.attempt.node_id,
                f.attempt.attempt,
                f.execution_phase,
                sig.signal if sig else "",
                rfc3339(sig.at) if sig else "",
                sig.namespace if sig else "",
                sig.pod if sig else "",
                rfc3339(f.succeeded_at) or "",
                "unknown" if f.outputs_written is None else str(f.outputs_written).lower(),
                f.checkpoint.uri or "",
                f.checkpoint.state,
                f.checkpoint.objects,
                rfc3339(f.checkpoint.latest) or "",
                f.checkpoint.reason or "",
                str(f.relaunched_as) if f.relaunched_as else "",
                f.links.get("flyte", ""),
                str(f.parent) if f.parent else "",
                f.cause or "",
                d.source if d else "",
                d.reason if d else "",
                (d.initiator or "") if d else "",
                rfc3339(d.at) if d else "",
            ]
        )
    return out.getvalue()
