"""Domains from Admin (docs/configuration.md, docs/verdicts.md): a project whose domains are `dev`/`prod` is swept and its
namespaces resolved; a signalled pod that is evidently Flyte's but resolves to nothing is a
configuration problem the report shows (never "not a Flyte pod"); `--project`/`--domain` are
checked against Admin."""

from __future__ import annotations

import json
from datetime import datetime

import jsonschema
import pytest
from support import paths
from support.cli import run
from support.scan import WINDOW, key, sandbox_fixtures, scan_json

from forensics.model import UTC
from forensics.sandbox.incident import ScenarioBuilder, _try

pytestmark = pytest.mark.integration

SCHEMA = json.loads(paths.SCHEMA.read_text())
GS2_PROD = "g7devprod00000000000"
ORPHAN = "h8nosuchexecution000-n0-0"  # a task pod's name no attempt owns


def _t(day: int, hh: int, mm: int, ss: int) -> datetime:
    return datetime(2026, 9, day, hh, mm, ss, tzinfo=UTC)


# The scenario reads as a table: one execution per block.
# fmt: off
def _scenario():
    b = ScenarioBuilder()
    b.scenario.domains = ["dev", "prod"]
    prod = ("gs2", "prod")
    task = b.task(*prod, "train")
    b.one_node(*prod, GS2_PROD, "SUCCEEDED", _t(6, 9, 0, 0), _t(6, 10, 0, 5),
               _try(GS2_PROD, 0, "SUCCEEDED", _t(6, 9, 0, 5), _t(6, 10, 0, 2), task))
    b.signal_pod(_t(6, 10, 0, 0), "gs2-prod", f"{GS2_PROD}-n0-0", f"{GS2_PROD}-n0-0")
    b.signal_pod(_t(7, 10, 0, 0), "gs2-prod", ORPHAN, ORPHAN)
    # The namespace of a known project with a domain Admin does not list for it.
    b.signal_pod(_t(8, 10, 0, 0), "gs2-qa", "i9qa000000000000000-n0-0", "i9qa000000000000000-n0-0")
    return b.build()
# fmt: on


box, env = sandbox_fixtures(_scenario)


def test_domains_come_from_admin_and_unresolved_flyte_pods_are_a_configuration_problem(env, capsys):
    code, report, _ = scan_json(capsys)
    assert {key(f): f["verdict"] for f in report["findings"]} == {
        ("gs2", "prod", GS2_PROD, "n0", 0): "affected"
    }
    unresolved = {u["pod"]: u for u in report["unresolved"]}
    assert set(unresolved) == {ORPHAN, "i9qa000000000000000-n0-0"}
    assert "gs2" in unresolved[ORPHAN]["reason"] and "no attempt" in unresolved[ORPHAN]["reason"]
    qa = unresolved["i9qa000000000000000-n0-0"]["reason"]
    assert "gs2-qa" in qa and "dev, prod" in qa
    assert "signal-not-a-flyte-task-pod" not in report["summary"]["cleared"]
    # Not "nothing found": exit 1 as for findings; the window itself was fully read.
    assert code == 1 and report["complete"] is True and report["gaps"] == []
    code, out, _ = run(
        ["scan", "--since", "2026-09-07", "--until", "2026-09-08", "-o", "json", "--no-progress"],
        capsys,
    )
    alone = json.loads(out)
    assert alone["findings"] == [] and [u["pod"] for u in alone["unresolved"]] == [ORPHAN]
    assert code == 1  # the orphan alone is still not "nothing found"
    jsonschema.validate(report, SCHEMA)
    code, out, _ = run(["scan", *WINDOW, "--no-progress", "-o", "table"], capsys)
    assert code == 1 and "UNRESOLVED pod gs2-qa/" in out and "configuration problem" in out


def test_scope_is_checked_against_admin(env, capsys):
    code, report, _ = scan_json(capsys, "--project", "gs2", "--domain", "prod")
    assert [f["execution"]["name"] for f in report["findings"]] == [GS2_PROD]
    # gs2-qa is outside the scope; the orphan in gs2-prod is not.
    assert [u["pod"] for u in report["unresolved"]] == [ORPHAN] and code == 1
    code, out, err = run(["scan", *WINDOW, "--no-progress", "--project", "GS2"], capsys)
    assert code == 2 and out == "" and "GS2" in err and len(err.strip().splitlines()) == 1
    code, out, err = run(
        ["scan", *WINDOW, "--no-progress", "--project", "gs2", "--domain", "production"], capsys
    )
    assert code == 2 and "production" in err and "dev, prod" in err
    assert len(err.strip().splitlines()) == 1
