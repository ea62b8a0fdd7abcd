"""Loki's tenant limits met at run time, through the real CLI (docs/upstream.md#shapes-met-in-the-field).

A tenant whose `max_entries_limit_per_query` is lower than the page the scan asks for answers a
400 (in either of Loki's wordings): the lower limit is adopted and the scan goes on. Query
timeouts on a dense shard split it (down to a 1-minute floor) before any part becomes a gap.

A module of its own: the sandbox's S3 (moto) is process-global, so only one sandbox runs at a time.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from support.cli import run, use_sandbox
from support.expected import EXPECTED_CLEARED, EXPECTED_FINDINGS
from support.scan import CONFIG, QUICK, WINDOW, key, sub_millisecond_burst

from forensics.model import UTC, to_ns
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.scenario import SandboxLogLine
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration


def scan(scenario, loki_options, tmp_path, monkeypatch, capsys, config=QUICK, org="team-ml"):
    with sandbox(scenario, loki_options=loki_options) as box:
        use_sandbox(box, monkeypatch)
        monkeypatch.setenv("LOKI_ORG_ID", org)
        cfg = tmp_path / "elastic-audit.toml"
        cfg.write_text(config)
        code, out, err = run(
            ["scan", *WINDOW, "-o", "json", "--no-progress", "--config", str(cfg)], capsys
        )
        sent = [r for r in box.loki.requests if r.path.endswith("/query_range")]
    return code, (json.loads(out) if out.strip() else None), err, sent


def verdicts(report: dict) -> dict:
    return {key(f): f["verdict"] for f in report["findings"]}


@pytest.mark.parametrize("wording", ["frontend", "querier"])
def test_a_tenant_with_a_lower_entry_limit_is_scanned_completely(
    wording, tmp_path, monkeypatch, capsys, caplog
):
    limits = {"tenant_max_entries": {"team-ml": 1000}, "entry_limit_wording": wording}
    code, report, err, sent = scan(reference_scenario(), limits, tmp_path, monkeypatch, capsys)
    assert code == 1, err  # before: exit 2, "Loki rejected the query", no report
    assert report["complete"] and verdicts(report) == EXPECTED_FINDINGS
    assert report["summary"]["cleared"] == EXPECTED_CLEARED
    assert {r.params["limit"] for r in sent if r.status == 200} == {"1000"}
    assert all(r.params["limit"] == "5000" for r in sent if r.status == 400)
    (said,) = [r.getMessage() for r in caplog.records if "entries per query" in r.getMessage()]
    assert "1000 entries per query" in said and "max_entries = 1000" in said


def test_max_entries_in_the_config_avoids_the_refused_request(tmp_path, monkeypatch, capsys):
    limits = {"tenant_max_entries": {"team-ml": 1000}}
    config = QUICK.replace("[loki]\n", "[loki]\nmax_entries = 1000\n")
    code, report, _, sent = scan(
        reference_scenario(), limits, tmp_path, monkeypatch, capsys, config
    )
    assert code == 1 and report["complete"] and verdicts(report) == EXPECTED_FINDINGS
    assert {(r.status, r.params["limit"]) for r in sent} == {(200, "1000")}


def test_dense_shards_that_time_out_are_split_and_read_completely(tmp_path, monkeypatch, capsys):
    # Every day holds ~30 lines of the selected streams: a whole-day shard is more than this Loki
    # scans within its query timeout, half a day is not.
    timeouts = {"query_timeout_lines": 20}
    code, report, err, sent = scan(reference_scenario(), timeouts, tmp_path, monkeypatch, capsys)
    assert code == 1, err  # before: every day a gap, exit 3
    assert report["complete"] and report["gaps"] == []
    assert verdicts(report) == EXPECTED_FINDINGS
    assert report["summary"]["cleared"] == EXPECTED_CLEARED
    assert any(r.status == 504 for r in sent)
    spans = {int(r.params["end"]) - int(r.params["start"]) for r in sent if r.status == 200}
    assert max(spans) < 24 * 3600 * 10**9  # what was read, was read in pieces


def test_a_stretch_too_dense_even_at_the_floor_is_a_gap_of_at_most_a_minute(
    tmp_path, monkeypatch, capsys
):
    scenario = reference_scenario()
    dense_at = datetime(2026, 9, 8, 12, 0, 0, tzinfo=UTC)
    pod = {"namespace": "gs1-production", "pod": "tokenizer-0", "container": "tokenizer"}
    scenario.log_lines += [
        SandboxLogLine(to_ns(dense_at) + i * 1000, pod, f"tokenized batch {i}") for i in range(200)
    ]
    code, report, _, _ = scan(scenario, {"query_timeout_lines": 100}, tmp_path, monkeypatch, capsys)
    assert code == 3 and not report["complete"]
    (gap,) = report["gaps"]
    start = datetime.fromisoformat(gap["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(gap["end"].replace("Z", "+00:00"))
    assert gap["source"] == "loki" and start <= dense_at < end
    assert end - start <= timedelta(minutes=1)
    assert "request timed out" in gap["error"]
    # Everything else was read: no signal lies in that minute, so every finding stands.
    assert verdicts(report) == EXPECTED_FINDINGS


def test_a_tenant_max_query_length_is_learned_from_the_400(tmp_path, monkeypatch, capsys, caplog):
    limits = {"max_query_length": timedelta(hours=12)}
    code, report, err, sent = scan(reference_scenario(), limits, tmp_path, monkeypatch, capsys)
    assert code == 1, err  # before: exit 2, "the query time range exceeds the limit", no report
    assert report["complete"] and verdicts(report) == EXPECTED_FINDINGS
    assert report["summary"]["cleared"] == EXPECTED_CLEARED
    refused = [r for r in sent if r.status == 400]
    assert 1 <= len(refused) <= 8  # learned once per shard in flight, then never asked again
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "max_query_length" in said and 'max_query_length = "11h59m30s"' in said


def test_a_shard_exactly_at_the_limit_keeps_a_margin_for_the_sharding_lookup(
    tmp_path, monkeypatch, capsys
):
    limits = {"max_query_length": timedelta(hours=24), "sharding_lookback": True}
    code, report, err, sent = scan(reference_scenario(), limits, tmp_path, monkeypatch, capsys)
    assert code == 1, err  # before: exit 2, "query length: 1d0h0m30s, limit: 1d"
    assert report["complete"] and verdicts(report) == EXPECTED_FINDINGS
    assert any(r.status == 400 for r in sent)
    day = 24 * 3600 * 10**9
    assert all(int(r.params["end"]) - int(r.params["start"]) < day for r in sent if r.status == 200)


def test_a_tenant_byte_limit_splits_the_piece_instead_of_exit_2(tmp_path, monkeypatch, capsys):
    # A day of the selected streams holds ~3 KiB; half a day fits in 2000 bytes.
    limits = {"max_query_bytes_read": 2000}
    code, report, err, sent = scan(reference_scenario(), limits, tmp_path, monkeypatch, capsys)
    assert code == 1, err  # before: exit 2, "the query would read too many bytes", no report
    assert report["complete"] and verdicts(report) == EXPECTED_FINDINGS
    assert any(r.status == 400 for r in sent)


def test_bytes_too_many_even_at_the_floor_are_a_gap_of_that_piece_only(
    tmp_path, monkeypatch, capsys
):
    scenario = reference_scenario()
    dense_at = datetime(2026, 9, 8, 12, 0, 0, tzinfo=UTC)
    pod = {"namespace": "gs1-production", "pod": "tokenizer-0", "container": "tokenizer"}
    scenario.log_lines += [
        SandboxLogLine(to_ns(dense_at) + i * 1000, pod, "x" * 100 + f" batch {i}")
        for i in range(200)
    ]
    code, report, err, _ = scan(
        scenario, {"max_query_bytes_read": 8000}, tmp_path, monkeypatch, capsys
    )
    assert code == 3, err  # before: exit 2 and no report; everything read was thrown away
    (gap,) = report["gaps"]
    start, end = (datetime.fromisoformat(gap[k].replace("Z", "+00:00")) for k in ("start", "end"))
    assert start <= dense_at < end and end - start <= timedelta(minutes=1)
    assert "too many bytes" in gap["error"]
    assert verdicts(report) == EXPECTED_FINDINGS


def test_a_full_tenant_queue_at_one_size_is_read_in_smaller_pieces(tmp_path, monkeypatch, capsys):
    # The frontend splits a query per hour; the tenant's queue holds 6: a day is refused with 429
    # at every try, 6 hours are not.
    limits = {
        "split_queries_by_interval": timedelta(hours=1),
        "max_outstanding_requests_per_tenant": 6,
    }
    code, report, err, sent = scan(reference_scenario(), limits, tmp_path, monkeypatch, capsys)
    assert code == 1, err  # before: every day a gap after its retries, exit 3
    assert report["complete"] and verdicts(report) == EXPECTED_FINDINGS
    assert any(r.status == 429 for r in sent)


def test_several_tenants_without_multi_tenant_queries_is_exit_2_at_once(
    tmp_path, monkeypatch, capsys
):
    limits = {"multi_tenant_queries_enabled": False}
    code, report, err, sent = scan(
        reference_scenario(),
        limits,
        tmp_path,
        monkeypatch,
        capsys,
        config=CONFIG,
        org="team-ml|team-cv",
    )
    # Before: retried as transient for minutes, exit 3, "server failed or is unreachable".
    assert code == 2 and report is None, err
    assert "LOKI_ORG_ID" in err and "[loki] org_id" in err
    assert "multi_tenant_queries_enabled" in err and "Traceback" not in err
    assert len([r for r in sent if r.status == 500]) <= 8  # no retries


def test_a_quick_504_is_explained_as_loki_s_query_timeout_not_unreachable(
    tmp_path, monkeypatch, capsys
):
    scenario = reference_scenario()
    dense_at = datetime(2026, 9, 8, 12, 0, 0, tzinfo=UTC)
    pod = {"namespace": "gs1-production", "pod": "tokenizer-0", "container": "tokenizer"}
    scenario.log_lines += [
        SandboxLogLine(to_ns(dense_at) + i * 1000, pod, f"tokenized batch {i}") for i in range(200)
    ]
    code, _, err, _ = scan(scenario, {"query_timeout_lines": 100}, tmp_path, monkeypatch, capsys)
    assert code == 3
    # Before: "likely cause: no answer in time (unreachable or overloaded)", for a 504 in ms.
    assert "query_timeout" in err and "unreachable" not in err


def test_a_burst_at_one_sub_millisecond_instant_is_paged_without_a_sub_millisecond_series(
    tmp_path, monkeypatch, capsys
):
    # More matching lines than a page holds (max_entries = 100) share one nanosecond that is not
    # millisecond-aligned, across three pods: read stream by stream.
    scenario, config = sub_millisecond_burst()
    code, report, err, _ = scan(scenario, {}, tmp_path, monkeypatch, capsys, config)
    assert code == 1, err  # before: /series over [T, T+1ns) is a 500 every time: a gap, exit 3
    assert report["complete"], report["gaps"]
    assert verdicts(report) == EXPECTED_FINDINGS
