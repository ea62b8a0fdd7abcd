"""RecoverExecution's copy of a silent success is recognised by `scan`, `show` and `relaunch`:
said to have copied the false success, never counted as the repair (docs/verdicts.md, "Never
recover"); a report without one reads exactly as before."""

from __future__ import annotations

import json
from dataclasses import replace

from support.fakes import execution, fake_sources, silent_green

from forensics.model import Checkpoint, ExecutionRef, Finding
from forensics.report_json import finding_from_json
from forensics.scan import sweep
from forensics.scan.lookups import Lookups
from forensics.timeline import build_timeline

COPY = "r3c0v3r3dxxxxxxxxxxx"


def world(*, recovered: bool = True):
    sources = fake_sources()
    bad = silent_green(sources).ref.execution
    original = sources.admin.get_execution(bad)
    copy = replace(execution(COPY, mode="RECOVERED", reference=bad), created_at=original.created_at)
    if recovered:
        sources.admin.add(copy)
    return sources, bad, copy.ref


def test_show_of_the_copy_says_it_laundered_the_false_success():
    sources, bad, copy = world()
    tl = build_timeline(sources, copy)
    texts = [e.text for e in tl.events]
    assert any(f"a RECOVERED copy of {bad}" in t and "copied the false success" in t for t in texts)


def test_show_of_the_original_names_its_recovered_copy():
    sources, bad, copy = world()
    tl = build_timeline(sources, bad)
    assert any(t.text.startswith(f"recovered as {copy}:") for t in tl.events)


def test_show_without_a_copy_says_nothing_of_recovery():
    sources, bad, _ = world(recovered=False)
    tl = build_timeline(sources, bad)
    assert not any("RECOVERED" in t.text or "recovered as" in t.text for t in tl.events)


def test_the_scan_names_the_copy_and_never_fills_relaunched_as_with_it(tmp_path):
    sources, bad, copy = world()
    lookups = Lookups(sources)
    found = sweep.relaunches_in(lookups, bad.project, bad.domain, sweep_since(sources, bad))
    f = finding(sources, bad)
    (out,) = sweep.with_relaunches([f], [found])
    assert out.relaunched_as is None and out.recovered_as == (copy,)
    doc = out.as_dict()
    assert doc["recovered_as"] == [copy.as_dict()]
    assert any("copied the false success" in n for n in doc["notes"])
    (clean,) = sweep.with_relaunches([f], [])
    assert "recovered_as" not in clean.as_dict() and clean.as_dict()["notes"] == []


def finding(sources, bad: ExecutionRef) -> Finding:
    """The affected finding of `bad`'s attempt, as the scan builds it before the listings."""
    return Finding(
        attempt=sources.admin._by_ref[bad].attempts[0].ref,
        verdict="affected",
        execution_phase="SUCCEEDED",
        signal=None,
        succeeded_at=None,
        outputs_written=False,
        checkpoint=Checkpoint("s3://ck/", "empty"),
    )


def sweep_since(sources, bad: ExecutionRef):
    return sources.admin.get_execution(bad).created_at


def test_report_json_reads_recovered_as_back():
    sources, bad, copy = world()
    f = replace(finding(sources, bad), recovered_as=(copy,))
    assert finding_from_json(json.loads(json.dumps(f.as_dict()))).recovered_as == (copy,)
