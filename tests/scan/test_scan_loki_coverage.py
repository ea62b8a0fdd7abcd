"""Log coverage is measured, not assumed (docs/upstream.md, "Log coverage").

Loki answers an empty 200 for the part of a window that `max_query_lookback` (or retention) no
longer serves, exactly as for a period in which no pod was signalled. Each shard whose signal
query found nothing is probed once with the task selector alone (`index/stats`); where Flyte
Admin shows attempts ran but Loki holds no task log, the scan is incomplete (a `logs_absent` gap,
exit 3) and the findings there say their evidence is Admin and S3 only. A label name that matches
no stream at all is named as the likely configuration mistake.

A module of its own: the sandbox's S3 (moto) is process-global, so only one sandbox runs at a time.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from support.cli import run, use_sandbox
from support.expected import EXPECTED_FINDINGS
from support.scan import QUICK, WINDOW, key

from forensics.model import UTC
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox
from forensics.scan.coverage import NOTE

pytestmark = pytest.mark.integration

SERVED_FROM = datetime(2026, 9, 8, tzinfo=UTC)  # what max_query_lookback still serves


def scan(loki_options, tmp_path, monkeypatch, capsys, config=QUICK):
    with sandbox(reference_scenario(), loki_options=loki_options) as box:
        use_sandbox(box, monkeypatch)
        cfg = tmp_path / "elastic-audit.toml"
        cfg.write_text(config)
        code, out, err = run(
            ["scan", *WINDOW, "-o", "json", "--no-progress", "--config", str(cfg)], capsys
        )
        sent = box.loki.requests.snapshot()
    return code, (json.loads(out) if out.strip() else None), err, sent


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_window_past_max_query_lookback_is_a_logs_absent_gap(tmp_path, monkeypatch, capsys):
    lookback = {"max_query_lookback": datetime.now(UTC) - SERVED_FROM}
    code, report, err, sent = scan(lookback, tmp_path, monkeypatch, capsys)
    # Before: complete, exit 1, the older findings silently downgraded to `suspected`.
    assert code == 3, err
    assert report["complete"] is False
    absent = [g for g in report["gaps"] if g["kind"] == "logs_absent"]
    assert absent and all(g["source"] == "loki" for g in absent)
    assert _t(absent[0]["start"]) == _t("2026-09-04T00:00:00Z")
    assert max(_t(g["end"]) for g in absent) <= SERVED_FROM + timedelta(days=1)
    assert "logs absent" in absent[0]["error"] and "Admin and S3 only" in absent[0]["error"]
    # Findings whose attempt ran where the logs are gone say so; the others do not.
    for f in report["findings"]:
        ran_before = _t(f["succeeded_at"] or f["signal"]["at"]) < SERVED_FROM
        assert (NOTE in f["notes"]) == ran_before, (key(f), f["notes"])
    assert any(NOTE in f["notes"] for f in report["findings"])
    # One probe per shard whose signal query found nothing, nothing else.
    probes = [r for r in sent if r.path.endswith("/index/stats")]
    assert 1 <= len(probes) <= 7


def test_the_whole_window_covered_costs_at_most_one_probe_per_shard(tmp_path, monkeypatch, capsys):
    code, report, err, sent = scan({}, tmp_path, monkeypatch, capsys)
    assert code == 1, err
    assert report["complete"] and report["gaps"] == []
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED_FINDINGS
    assert not any(NOTE in f["notes"] for f in report["findings"])
    assert len([r for r in sent if r.path.endswith("/index/stats")]) <= 7


def test_a_label_name_no_stream_has_is_named_not_an_all_clear(tmp_path, monkeypatch, capsys):
    wrong = QUICK.replace("[loki]\n", '[loki]\nnamespace_label = "k8s_namespace_name"\n')
    code, report, err, _ = scan({}, tmp_path, monkeypatch, capsys, wrong)
    # Before: 0 affected, every finding `suspected`, complete, exit 1, no hint.
    assert code == 3, err
    assert report["complete"] is False
    (gap,) = report["gaps"]
    assert gap["kind"] == "logs_absent"
    assert (_t(gap["start"]), _t(gap["end"])) == (
        _t("2026-09-04T00:00:00Z"),
        _t("2026-09-11T00:00:00Z"),
    )
    for text in (gap["error"], err):
        assert "namespace_label" in text and "k8s_namespace_name" in text
        assert "streams labelled" in text and "namespace" in text
    assert all(NOTE in f["notes"] for f in report["findings"])


def test_index_stats_that_miss_ingester_lines_are_confirmed_by_a_read(
    tmp_path, monkeypatch, capsys
):
    # A real Loki's index/stats leave out lines still in its ingesters once they are older than
    # query_ingesters_within, though query_range returns them: "none" is confirmed by one read.
    code, report, err, sent = scan(
        {"index_stats_from_store_only": True}, tmp_path, monkeypatch, capsys
    )
    assert code == 1, err
    assert report["complete"] and report["gaps"] == []
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED_FINDINGS
    probes = [r for r in sent if r.path.endswith("/index/stats")]
    confirms = [r for r in sent if r.params.get("limit") == "1"]
    assert len(confirms) == len(probes) >= 1


def test_the_stderr_line_of_a_logs_absent_gap_says_what_it_is(tmp_path, monkeypatch, capsys):
    lookback = {"max_query_lookback": datetime.now(UTC) - SERVED_FROM}
    code, _, err, _ = scan(lookback, tmp_path, monkeypatch, capsys)
    assert code == 3
    line = next(x for x in err.splitlines() if x.startswith("elastic-audit: Loki"))
    assert "holds no task log" in line and "it failed at" not in line


def test_show_over_logs_loki_no_longer_serves_is_incomplete(tmp_path, monkeypatch, capsys):
    lookback = {"max_query_lookback": datetime.now(UTC) - datetime(2026, 9, 11, tzinfo=UTC)}
    with sandbox(reference_scenario(), loki_options=lookback) as box:
        use_sandbox(box, monkeypatch)
        (tmp_path / "elastic-audit.toml").write_text(QUICK)
        monkeypatch.chdir(tmp_path)
        code, out, err = run(["show", "gs1:production:azvg5f9v9974m78fvlf7", "-o", "json"], capsys)
    tl = json.loads(out)
    # Before: `suspected`, no pod line, complete, exit 0.
    assert code == 3, err
    assert tl["complete"] is False
    assert [g["kind"] for g in tl["gaps"]] == ["logs_absent"]


def test_a_loki_without_index_stats_is_probed_with_one_read(tmp_path, monkeypatch, capsys):
    lookback = {"index_stats_enabled": False, "max_query_lookback": datetime.now(UTC) - SERVED_FROM}
    code, report, err, sent = scan(lookback, tmp_path, monkeypatch, capsys)
    assert code == 3, err
    assert [g["kind"] for g in report["gaps"]] == ["logs_absent"]
    stats = [r for r in sent if r.path.endswith("/index/stats")]
    assert 1 <= len(stats) <= 8 and {r.status for r in stats} == {404}  # only probes in flight
    assert any(r.params.get("limit") == "1" for r in sent)


def test_events_in_loki_never_stand_in_for_lost_task_logs(tmp_path, monkeypatch, capsys):
    # Alloy's events carry the event's `namespace` label too: where Loki lost a day of task logs
    # but kept the cluster's events, the default task selector must still see no task log there.
    from forensics.config import EVENT_SHIPPER_JOBS

    scenario = reference_scenario()
    lost = (_t("2026-09-04T00:00:00Z"), _t("2026-09-05T00:00:00Z"))
    events = EVENT_SHIPPER_JOBS.split("|")

    def kept(line) -> bool:
        at = datetime.fromtimestamp(line.ts_ns / 1e9, UTC)
        return line.labels.get("job") in events or not lost[0] <= at < lost[1]

    scenario.log_lines[:] = [line for line in scenario.log_lines if kept(line)]
    assert any(line.labels.get("job") in events for line in scenario.log_lines)
    with sandbox(scenario) as box:
        use_sandbox(box, monkeypatch)
        cfg = tmp_path / "elastic-audit.toml"
        cfg.write_text(QUICK)
        code, out, err = run(
            ["scan", *WINDOW, "-o", "json", "--no-progress", "--config", str(cfg)], capsys
        )
    report = json.loads(out)
    assert code == 3, err
    absent = [g for g in report["gaps"] if g["kind"] == "logs_absent"]
    assert [(g["start"], g["end"]) for g in absent] == [
        ("2026-09-04T00:00:00Z", "2026-09-05T00:00:00Z")
    ], report["gaps"]
