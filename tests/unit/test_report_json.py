"""One report model: the typed `Report` and its JSON (docs/report.md) are one thing.

A synthetic report holding every field, verdict, gap kind and list of the schema validates
against tests/report.schema.json and comes back from `report_from_json` as it went out; the
report's one order (`Report.ordered`) is what `merge` prints. In-process, no sandbox.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import jsonschema
import pytest
from support import paths
from support.cli import run

from forensics.detect import Cleared
from forensics.merge import merge, merge_reports
from forensics.model import (
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
from forensics.report_json import report_from_json

SCHEMA = json.loads(paths.SCHEMA.read_text())
T0 = datetime(2026, 9, 5, tzinfo=UTC)
WINDOW = Window(T0, T0 + timedelta(days=1))


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _ref(name: str, node: str = "n0", attempt: int = 0) -> AttemptRef:
    return AttemptRef(ExecutionRef("gs1", "production", name), node, attempt)


def _signal(minutes: float, pod: str = "pod-a", at_source: str = "cri") -> SignalHit:
    return SignalHit(
        "SIGTERM", 15, _at(minutes), "gs1-production", pod, None, "", "", at_source=at_source
    )


DISRUPTION = Disruption(
    "k8s-events", "Preempted", "default-scheduler", _at(3), "gs1-production", "pod-b", "text"
)
COST = Cost(3600.0, 2, 8.0, 16.0, "nvidia-h100", 16.0, 32.0, 120.5, "template", ())
UNPRICED = Cost(None, None, None, None, None, None, None, None, None, ("no task template",))


def _finding(name: str, **kw) -> Finding:
    base = dict(
        attempt=_ref(name),
        verdict="affected",
        execution_phase="SUCCEEDED",
        signal=None,
        succeeded_at=_at(10),
        outputs_written=False,
        checkpoint=Checkpoint("s3://ck/a/", "empty", source="template"),
    )
    return Finding(**{**base, **kw})


FINDINGS = (
    _finding(
        "a1",
        signal=_signal(1),
        checkpoint=Checkpoint(
            "s3://ck/a1/", "present", 4, _at(0.5), None, "input:ckpt", written_after_signal=True
        ),
        relaunched_as=ExecutionRef("gs1", "production", "r1"),
        recovered_as=(ExecutionRef("gs1", "production", "rc1"),),
        links={"flyte": "https://flyte/console/a1", "loki": "https://grafana/explore"},
        evidence=("signal late", "outputs unknown"),
        cost=COST,
        cause="exit-0-after-signal",
    ),
    _finding(
        "a2",
        verdict="suspected",
        outputs_written=None,
        checkpoint=Checkpoint(None, "unknown", reason="AccessDenied"),
        parent=ParentNode(ExecutionRef("gs1", "production", "p1"), "n3"),
        cost=UNPRICED,
        disruption=DISRUPTION,
        new=True,
    ),
    _finding("a3", verdict="suspected", succeeded_at=None, new=False),  # ordered at the end
)

REPORT = Report(
    tool="elastic-audit 1.0.0",
    window=WINDOW,
    gaps=(
        Gap("loki", _at(60), _at(120), "HTTP 503", "failed"),
        Gap("loki", _at(0), _at(30), "no log of the task pods", "logs_absent"),
        Gap("admin", None, None, "UNAVAILABLE"),
        Gap("s3", _at(10), _at(10), "s3://b/a/outputs.pb: AccessDenied"),
        Gap("k8s-events", _at(1), None, "timeout"),
        Gap("prometheus", None, _at(5), "connection refused"),
    ),
    summary=Summary(
        attempts_examined=12,
        affected=1,
        suspected=1,
        not_affected=8,
        cleared={Cleared.OUTPUTS_WRITTEN.value: 6, Cleared.SUPERSEDED.value: 2},
        pending=1,
        unparsed_lines=3,
        unparsed_example=UnparsedLine(_at(2), (("app", "x"), ("pod", "p")), "SIGTERM?"),
        cost={
            "findings": 3,
            "gpu_hours": 16.0,
            "cpu_hours": 32.0,
            "gpu_hours_unknown": 2,
            "cpu_hours_unknown": 2,
            "by_project": {},
            "by_day": {},
        },
        by_disruption_reason={"Preempted": 1, "none": 2},
    ),
    findings=FINDINGS,
    pending=(Pending(_ref("p9", "n1", 2), "RUNNING", _signal(4, "pod-p", "loki")),),
    unresolved=(Unresolved(_signal(5, "pod-u", "glog"), "namespace template matches no domain"),),
    superseded=(Superseded(_ref("d1", "n0-0-dn1", 0), _ref("d1", "n0-0-dn1", 1)),),
    scope=Scope(("gs1",), ("production",)),
)


@pytest.mark.parametrize("scope", [REPORT.scope, Scope(), None], ids=["scoped", "all", "none"])
def test_every_field_round_trips_and_validates(scope):
    doc = replace(REPORT, scope=scope).as_dict()
    jsonschema.validate(doc, SCHEMA)
    again = json.loads(json.dumps(doc))  # as a file holds it
    assert report_from_json(again).as_dict() == doc


def test_the_synthetic_report_holds_every_kind_the_schema_names():
    doc = REPORT.as_dict()
    gaps = SCHEMA["properties"]["gaps"]["items"]["properties"]
    assert {g["kind"] for g in doc["gaps"]} == set(gaps["kind"]["enum"])
    assert {g["source"] for g in doc["gaps"]} == set(gaps["source"]["enum"])
    finding = SCHEMA["$defs"]["finding"]["properties"]
    assert {f["verdict"] for f in doc["findings"]} == set(finding["verdict"]["enum"])
    assert set(finding) == set().union(*doc["findings"])  # every key, `new` included


def test_new_is_in_the_json_only_when_a_guard_run_set_it():
    docs = [f.as_dict() for f in FINDINGS]
    assert "new" not in docs[0] and docs[1]["new"] is True and docs[2]["new"] is False
    assert list(docs[1])[-1] == "new"  # where the guard has always written it


@pytest.mark.parametrize(
    "doc, error",
    [
        ({**REPORT.as_dict(), "schema_version": 2}, ValueError),
        ({k: v for k, v in REPORT.as_dict().items() if k != "window"}, KeyError),
        ({**REPORT.as_dict(), "window": {"start": 5, "end": 6}}, TypeError),
        ({**REPORT.as_dict(), "findings": [[1]]}, TypeError),
    ],
    ids=["schema_version", "no window", "number as time", "list as finding"],
)
def test_a_document_that_is_no_report_raises_what_callers_turn_into_one_line(doc, error):
    with pytest.raises(error):
        report_from_json(doc)


def test_ordered_is_the_order_merge_prints():
    shuffled = replace(
        REPORT,
        gaps=REPORT.gaps[::-1],
        findings=REPORT.findings[::-1],
    )
    ordered = shuffled.ordered()
    assert [f.attempt.execution.name for f in ordered.findings] == ["a1", "a2", "a3"]
    assert [(g.source, g.kind) for g in ordered.gaps][:3] == [
        ("admin", "failed"),
        ("k8s-events", "failed"),
        ("loki", "logs_absent"),
    ]
    assert ordered.ordered() == ordered
    # one report alone merges into itself, in that order (summary recounted as merge does)
    merged = merge([shuffled])
    assert merged.findings == ordered.findings and merged.gaps == ordered.gaps
    assert merge_reports([shuffled.as_dict()]) == merged.as_dict()


def _without_checkpoint(doc: dict) -> dict:
    return {**doc, "findings": [{k: v for k, v in doc["findings"][0].items() if k != "checkpoint"}]}


@pytest.mark.parametrize(
    "broken, why",
    [
        (_without_checkpoint, "('checkpoint')"),
        (lambda d: {**d, "window": {"start": 5, "end": 6}}, "has no attribute"),
        (lambda d: {**d, "gaps": None}, "not iterable"),
    ],
    ids=["a finding without checkpoint", "a number as a time", "gaps null"],
)
def test_merge_refuses_a_document_the_typed_report_cannot_hold_in_one_line(
    capsys, tmp_path, monkeypatch, broken, why
):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken(REPORT.as_dict())))
    code, out, err = run(["merge", str(path)], capsys)
    assert (code, out) == (2, "")
    line = "elastic-audit: error: merge: a report lacks what docs/report.md requires ("
    assert err.startswith(line) and why in err and err.count("\n") == 1, err


def test_merge_prints_a_saved_report_as_it_was_saved(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    doc = REPORT.as_dict()
    (tmp_path / "saved.json").write_text(json.dumps(doc))
    code, out, _ = run(["merge", "saved.json", "--exit-zero"], capsys)
    assert code == 3  # incomplete: its gaps
    assert json.loads(out)["findings"] == doc["findings"] and json.loads(out)["gaps"] == [
        g.as_dict() for g in REPORT.ordered().gaps
    ]
