"""A report states its scope and its evidence in every format, and a saved report renders as the
scan that wrote it did (issue 43 items 4, 5 and 8; docs/report.md `scope`, docs/commands.md
"merge"). Through the CLI, against the sandbox's reference incident with Kubernetes events read."""

from __future__ import annotations

import json

import jsonschema
import pytest
from support import paths
from support.cli import run
from support.scan import CONFIG, WINDOW, sandbox_fixtures

from forensics.report_json import report_from_json
from forensics.sandbox.incident import EVENT_ONLY, reference_scenario

pytestmark = pytest.mark.integration

box, env = sandbox_fixtures(reference_scenario, CONFIG + "[k8s_events]\nenabled = true\n")
SCHEMA = json.loads(paths.SCHEMA.read_text())
DEV = ["--domain", "development"]


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    return run([*args, "--no-progress"] if args[0] == "scan" else list(args), capsys)


def _saved(capsys, tmp_path, *scope: str) -> tuple[dict, str]:
    code, out, err = _cli(capsys, "scan", *WINDOW, *scope, "-o", "json")
    assert code == 1, err
    path = tmp_path / f"report{len(scope)}.json"
    path.write_text(out)
    return json.loads(out), str(path)


# -- item 4: a report knows its scope ----------------------------------------------------------


def test_a_scoped_report_records_and_shows_its_scope_in_every_format(capsys, tmp_path):
    doc, _ = _saved(capsys, tmp_path, *DEV)
    jsonschema.validate(doc, SCHEMA)
    assert doc["scope"] == {"projects": [], "domains": ["development"]}
    whole, _ = _saved(capsys, tmp_path)
    assert whole["scope"] == {"projects": [], "domains": []}
    scope = "Scope: all projects; domain development (nothing else was scanned)"
    _, table, _ = _cli(capsys, "scan", *WINDOW, *DEV, "-o", "table")
    assert table.splitlines()[1] == scope
    # never an unqualified all-clear for what it did not scan
    assert "coverage complete (all projects; domain development only)" in table
    _, md, _ = _cli(capsys, "scan", *WINDOW, *DEV, "-o", "markdown")
    assert f"- {scope}" in md.splitlines()[:6]
    _, page, _ = _cli(capsys, "scan", *WINDOW, *DEV, "-o", "html")
    assert f'<p class="warn scope">{scope}</p>' in page
    # an unscoped scan reads as it always did: no scope line
    _, table, _ = _cli(capsys, "scan", *WINDOW, "-o", "table")
    assert "Scope:" not in table and table.count("coverage complete\n") == 1


def test_a_report_with_nothing_in_its_scope_says_where_it_looked(capsys):
    # development's one incident is on 09-06: from 09-07 on, that domain is quiet
    quiet = ["scan", "--since", "2026-09-07", "--until", "2026-09-11", *DEV]
    code, table, err = _cli(capsys, *quiet, "-o", "table")
    assert code == 0, err
    assert "No affected or suspected attempts in all projects; domain development." in table
    _, md, _ = _cli(capsys, *quiet, "-o", "markdown")
    assert "coverage complete (all projects; domain development only)" in md


def test_a_saved_report_without_a_scope_says_so_and_merges_only_with_its_kind(capsys, tmp_path):
    doc, path = _saved(capsys, tmp_path)
    del doc["scope"]  # as reports were saved before the scope was recorded
    (tmp_path / "old.json").write_text(json.dumps(doc))
    code, table, _ = _cli(capsys, "merge", str(tmp_path / "old.json"), "-o", "table")
    assert code == 1 and "Scope: not recorded" in table
    assert "coverage complete (scope not recorded)" in table
    code, out, err = _cli(capsys, "merge", str(tmp_path / "old.json"), path)
    assert code == 2 and out == ""
    assert "report 2 covers all projects; all domains but report 1 covers an unrecorded" in err


# -- item 5: a saved or merged report renders ----------------------------------------------------


def test_every_report_of_the_reference_incident_is_the_typed_report(capsys, tmp_path):
    for scope in ((), DEV, ("--project", "gs1")):
        doc, _ = _saved(capsys, tmp_path, *scope)
        jsonschema.validate(doc, SCHEMA)
        assert report_from_json(doc).as_dict() == doc, scope


def test_a_saved_report_renders_in_every_format_as_the_scan_printed_it(capsys, tmp_path):
    doc, path = _saved(capsys, tmp_path)
    assert report_from_json(doc).as_dict() == doc  # the typed report round-trips
    code, out, _ = _cli(capsys, "merge", path, "-o", "json")
    assert code == 1 and json.loads(out) == doc
    for fmt in ("table", "wide", "csv", "markdown"):
        _, live, _ = _cli(capsys, "scan", *WINDOW, "-o", fmt)
        code, saved, err = _cli(capsys, "merge", path, "-o", fmt)
        assert (code, saved) == (1, live), (fmt, err)


def test_a_merged_report_becomes_the_incident_page(capsys, tmp_path):
    doc, path = _saved(capsys, tmp_path)
    code, page, err = _cli(capsys, "merge", path, path, "-o", "html")
    assert code == 1, err
    assert page.startswith("<!doctype html>") and page.count('<article class="finding') == len(
        doc["findings"]
    )
    # what a saved report cannot hold is said, never drawn as zero or as "no execution"
    assert "made from a saved report" in page and "No affected execution" not in page
    assert 'data-series="signals"' not in page


# -- item 8: evidence is shown wherever a verdict is -------------------------------------------


def _event_only(doc: dict) -> dict:
    return next(f for f in doc["findings"] if f["execution"]["name"] == EVENT_ONLY[2])


def test_a_finding_proved_by_an_event_shows_it_in_markdown_and_on_the_page(capsys, tmp_path):
    doc, _ = _saved(capsys, tmp_path)
    d = _event_only(doc)["disruption"]
    assert _event_only(doc)["signal"] is None and d is not None
    _, md, _ = _cli(capsys, "scan", *WINDOW, "-o", "markdown")
    row = next(
        line for line in md.splitlines() if line.startswith("| affected") and EVENT_ONLY[2] in line
    )
    assert f"| {d['reason']} {d['at']} |" in row, row
    _, page, _ = _cli(capsys, "scan", *WINDOW, "-o", "html")
    lane = page[page.index(f'data-execution="{":".join(EVENT_ONLY)}"') :]
    lane = lane[: lane.index("</section>")]
    assert 'class="marker disruption"' in lane
    assert f"{d['reason']} event {d['at']} · false SUCCESS" in lane


def test_the_page_keeps_a_checkpoint_written_after_the_signal(capsys, tmp_path):
    doc, _ = _saved(capsys, tmp_path)
    raced = next(f for f in doc["findings"] if f["checkpoint"]["written_after_signal"])
    _, page, _ = _cli(capsys, "scan", *WINDOW, "-o", "html")
    card = page[page.index(raced["execution"]["name"]) :]
    card = card[: card.index("</article>")]
    assert "written AFTER the signal (may be partial)" in card


def test_a_cost_whose_every_input_is_unknown_reads_unknown_not_zero(capsys, tmp_path):
    doc, _ = _saved(capsys, tmp_path)
    for f in doc["findings"]:  # as when no task template is registered any more
        f["cost"] = {**f["cost"], "gpus_per_pod": None, "cpus_per_pod": None,
                     "gpu_hours": None, "cpu_hours": None}  # fmt: skip
    (tmp_path / "unpriced.json").write_text(json.dumps(doc))
    code, page, _ = _cli(capsys, "merge", str(tmp_path / "unpriced.json"), "-o", "html")
    assert code == 1
    assert '<b class="total-gpu">unknown</b>' in page and '<b class="total-cpu">unknown</b>' in page
    assert ">0.0<" not in page
