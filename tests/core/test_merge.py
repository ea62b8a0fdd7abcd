"""`merge`: the reports of scans over slices of a window make the report of one scan of it
(docs/commands.md, "merge"), through the real CLI against the synthetic month."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import pairwise

import jsonschema
import pytest
from support import paths
from support.cli import run, use_sandbox
from support.synthetic import synthetic_month

from forensics.merge import UNCOVERED, merge_reports
from forensics.model import rfc3339
from forensics.report_json import report_from_json
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

MONTH = synthetic_month(attempts=300, signalled=60, affected=15, noise_lines=5_000, projects=2)
START = MONTH.window.start
SCHEMA = json.loads(paths.SCHEMA.read_text())


@pytest.fixture(scope="module")
def box():
    with sandbox(MONTH.scenario) as b:
        b.loki.add_lines(MONTH.noise())
        yield b


@pytest.fixture(autouse=True)
def env(box, tmp_path, monkeypatch):
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _scan(capsys, start: datetime, end: datetime) -> dict:
    code, out, err = run(
        ["scan", "--since", rfc3339(start), "--until", rfc3339(end), "-o", "json", "--no-progress"],
        capsys,
    )
    assert code in (0, 1), err
    return json.loads(out)


def _slices(days: list[int]) -> list[tuple[datetime, datetime]]:
    edges = [START + timedelta(days=d) for d in days]
    return list(pairwise(edges))


def test_the_merged_report_of_slices_equals_one_scan_of_the_window(capsys, tmp_path):
    whole = _scan(capsys, START, START + timedelta(days=30))
    jsonschema.validate(whole, SCHEMA)
    assert report_from_json(whole).as_dict() == whole  # the month's report is the typed one
    paths = []
    for i, (s, e) in enumerate(_slices([0, 7, 13, 30])):
        path = tmp_path / f"slice{i}.json"
        path.write_text(json.dumps(_scan(capsys, s, e)))
        paths.append(str(path))
    code, out, err = run(["merge", *reversed(paths)], capsys)  # any order
    merged = json.loads(out)
    assert code == 1, err  # findings, as the scan of the whole window
    jsonschema.validate(merged, SCHEMA)
    assert merged == whole
    assert len(merged["findings"]) == len(MONTH.expected)
    # and it prints as that scan does, in every format; its page is the month's incident page
    for fmt in ("table", "markdown", "csv"):
        _, live, _ = run(["scan", "--since", rfc3339(START), "--until",
                          rfc3339(START + timedelta(days=30)), "-o", fmt, "--no-progress"],
                         capsys)  # fmt: skip
        code, printed, err = run(["merge", *paths, "-o", fmt], capsys)
        assert (code, printed) == (1, live), (fmt, err)
    code, page, _ = run(["merge", *paths, "-o", "html"], capsys)
    assert code == 1 and page.count('<article class="finding') == len(MONTH.expected)


def test_an_attempt_two_slices_report_is_one_finding_the_signalled_one():
    sig = {
        "name": "SIGTERM",
        "number": 15,
        "at": "2026-08-07T23:59:58Z",
        "namespace": "ns",
        "pod": "p",
    }
    base = {
        "execution": {"project": "p", "domain": "d", "name": "a1"},
        "node_id": "n0",
        "attempt": 0,
        "execution_phase": "SUCCEEDED",
        "succeeded_at": "2026-08-08T00:00:05Z",
        "outputs_written": False,
        "checkpoint": {
            "uri": None,
            "state": "unknown",
            "objects": 0,
            "latest": None,
            "reason": None,
        },
        "links": {},
    }
    unsignalled = {
        **base,
        "verdict": "suspected",
        "signal": None,
        "relaunched_as": {"project": "p", "domain": "d", "name": "r1"},
    }
    signalled = {**base, "verdict": "affected", "signal": sig, "relaunched_as": None}

    def report(start, end, finding):
        return {
            "schema_version": 1,
            "tool": "elastic-audit 1",
            "complete": True,
            "gaps": [],
            "window": {"start": start, "end": end},
            "summary": {
                "attempts_examined": 3,
                "affected": int(finding["signal"] is not None),
                "suspected": int(finding["signal"] is None),
                "not_affected": 2,
                "pending": 0,
                "cleared": {"outputs-written": 2},
                "unparsed_lines": 0,
                "unparsed_example": None,
            },
            "findings": [finding],
            "pending": [],
            "unresolved": [],
        }

    merged = merge_reports(
        [
            report("2026-08-08T00:00:00Z", "2026-08-09T00:00:00Z", unsignalled),
            report("2026-08-07T00:00:00Z", "2026-08-08T00:00:00Z", signalled),
        ]
    )
    jsonschema.validate(merged, SCHEMA)
    assert [f["verdict"] for f in merged["findings"]] == ["affected"]
    # The relaunch one slice found stays with the finding the other slice's verdict gives.
    assert merged["findings"][0]["relaunched_as"] == unsignalled["relaunched_as"]
    s = merged["summary"]
    assert (s["attempts_examined"], s["affected"], s["suspected"]) == (5, 1, 0)
    assert merged["window"] == {"start": "2026-08-07T00:00:00Z", "end": "2026-08-09T00:00:00Z"}


def test_a_stretch_no_report_covers_is_a_gap_and_exits_3(capsys, tmp_path):
    paths = []
    for i, (s, e) in enumerate([_slices([0, 3])[0], _slices([5, 8])[0]]):
        path = tmp_path / f"s{i}.json"
        path.write_text(json.dumps(_scan(capsys, s, e)))
        paths.append(str(path))
    code, out, _ = run(["merge", *paths], capsys)
    merged = json.loads(out)
    assert code == 3 and merged["complete"] is False
    hole = [g for g in merged["gaps"] if g["error"] == UNCOVERED]
    assert {g["source"] for g in hole} == {"loki", "admin", "s3"}
    assert {(g["start"], g["end"]) for g in hole} == {
        (rfc3339(START + timedelta(days=3)), rfc3339(START + timedelta(days=5)))
    }


def test_a_file_that_is_no_report_is_one_line_and_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 7}')
    code, out, err = run(["merge", str(bad)], capsys)
    assert code == 2 and out == ""
    assert (
        err.strip().startswith("elastic-audit: error: merge: report 1") and "\n" not in err.strip()
    )
    (tmp_path / "nojson").write_text("nope")
    code, _, err = run(["merge", str(tmp_path / "nojson")], capsys)
    assert code == 2 and "not JSON" in err and "Traceback" not in err


def test_reports_of_different_scopes_are_refused_not_merged(capsys, tmp_path):
    # An all-projects slice and a one-project slice: merged, the other project's findings of
    # the second stretch would be silently missing under `complete: true`.
    (a, b), (c, d) = _slices([0, 3, 6])
    whole = _scan(capsys, a, b)
    project = whole["findings"][0]["execution"]["project"]
    code, out, err = run(
        ["scan", "--since", rfc3339(c), "--until", rfc3339(d), "-p", project, "-o", "json",
         "--no-progress"], capsys)  # fmt: skip
    assert code in (0, 1), err
    assert json.loads(out)["scope"] == {"projects": [project], "domains": []}
    (tmp_path / "all.json").write_text(json.dumps(whole))
    (tmp_path / "one.json").write_text(out)
    code, out, err = run(["merge", str(tmp_path / "all.json"), str(tmp_path / "one.json")], capsys)
    assert code == 2 and out == ""
    assert err.strip() == (
        f"elastic-audit: error: merge: report 2 covers project {project}; all domains but "
        "report 1 covers all projects; all domains: merge only reports of one scope, or of "
        "scopes that split one scope into disjoint projects or domains"
    )
    # the same scope merges, and the merged report states it
    code, out, _ = run(["merge", str(tmp_path / "all.json"), str(tmp_path / "all.json")], capsys)
    assert json.loads(out)["scope"] == whole["scope"] == {"projects": [], "domains": []}


def test_slices_per_project_merge_into_the_scope_they_split_and_gap_what_one_misses(
    capsys, tmp_path
):
    # As the backfill cuts them: each project scanned over each stretch. One stretch of one
    # project missing is a gap that names the project, not a silently shorter report.
    whole = _scan(capsys, START, START + timedelta(days=6))
    teams = sorted({f["execution"]["project"] for f in whole["findings"]})
    assert len(teams) == 2
    files = []
    for team in teams:
        for i, (s, e) in enumerate(_slices([0, 3, 6])):
            if team == teams[1] and i == 1:
                continue  # this project's second stretch was never scanned
            code, out, err = run(
                ["scan", "--since", rfc3339(s), "--until", rfc3339(e), "-p", team, "-o", "json",
                 "--no-progress"], capsys)  # fmt: skip
            assert code in (0, 1), err
            files.append(tmp_path / f"{team}-{i}.json")
            files[-1].write_text(out)
    code, out, _ = run(["merge", *map(str, files)], capsys)
    merged = json.loads(out)
    jsonschema.validate(merged, SCHEMA)
    assert code == 3 and merged["scope"] == {"projects": teams, "domains": []}
    hole = {(g["start"], g["end"], g["error"]) for g in merged["gaps"]}
    assert hole == {
        (rfc3339(START + timedelta(days=3)), rfc3339(START + timedelta(days=6)),
         f"{UNCOVERED} of project {teams[1]}; all domains")
    }  # fmt: skip
    # with that stretch scanned too, the parts make the scope's report, complete
    code, out, err = run(
        ["scan", "--since", rfc3339(START + timedelta(days=3)), "--until",
         rfc3339(START + timedelta(days=6)), "-p", teams[1], "-o", "json", "--no-progress"],
        capsys)  # fmt: skip
    (tmp_path / "last.json").write_text(out)
    code, out, _ = run(["merge", *map(str, files), str(tmp_path / "last.json")], capsys)
    assert json.loads(out)["complete"] is True and json.loads(out)["scope"]["projects"] == teams
