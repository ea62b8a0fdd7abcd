"""Fault matrix for `scan`: under every injected fault the scan either reports exactly what the
fault-free run reports, or says `complete: false` with gaps covering what it lost, and exits 3.

Every test drives the real CLI entry point against the sandbox (real Loki-API HTTP server, Flyte
Admin gRPC server, moto S3) with the sandbox's own fault injection. Retries are made fast through
the documented config keys ([loki]/[flyte] retries, retry_backoff, timeout) and boto3's standard
AWS_MAX_ATTEMPTS, never by patching the clients.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta

import grpc
import pytest
from support.cli import exit_code, run, use_sandbox
from support.expected import EXPECTED_FINDINGS
from support.scan import WINDOW, key

from forensics.model import UTC, Window, to_ns
from forensics.sandbox.admin_server import AdminFaults
from forensics.sandbox.incident import (
    MODELS_BUCKET,
    REFERENCE,
    REFERENCE_CHECKPOINT,
    WINDOW_END,
    WINDOW_START,
    reference_scenario,
)
from forensics.sandbox.loki_server import FaultRule
from forensics.sandbox.s3_server import S3Faults, S3Rule
from forensics.sandbox.scenario import (
    SandboxExecution,
    SandboxLogLine,
    SandboxObject,
    Scenario,
)
from forensics.sandbox.stack import sandbox

Status = grpc.StatusCode

# The reference config with quick retries: a permanent fault costs milliseconds, not minutes.
FAST_CONFIG = """
[flyte]
console_url = "https://flyte.example.com/console"
retries = 2
retry_backoff = 0.01
[loki]
grafana_explore_url = "https://grafana.example.com"
retries = 3
retry_backoff = 0.01
timeout = 1.5
[checkpoints]
input = "checkpoint_dir"
"""
BULK_BUCKET = "exa-bulk"
BULK_PREFIX = f"s3://{BULK_BUCKET}/gs1/{REFERENCE[2]}/"
BULK_OBJECTS = 20_000
BULK_NEWEST = datetime(2026, 9, 10, 19, 40, tzinfo=UTC)
FILLER_PROJECT = "gs2"  # >100 executions: ListExecutions needs a second page there
FILLERS = 130
GHOST = "g0h0o0s0t0e0x0e0c0u0"  # a pod's execution that Admin answers NOT_FOUND for
DAY = timedelta(days=1)
SHARD_0910 = Window(datetime(2026, 9, 10, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))


def _scenario() -> Scenario:
    """The reference incident, plus a project with more executions than one Admin page, a
    checkpoint prefix of 20,000 objects in a bucket of its own (used only by one test), and a
    death signal from a pod whose execution Admin does not know (archived or deleted)."""
    sc = reference_scenario()
    ghost_at = datetime(2026, 9, 8, 12, 0, tzinfo=UTC)
    agent = "torch/distributed/elastic/agent/server/api.py:753"
    sc.log_lines.append(
        SandboxLogLine(
            to_ns(ghost_at),
            {"namespace": "gs1-production", "pod": f"{GHOST}-n0-0", "container": GHOST},
            f"W0908 12:00:00.000000 107 {agent}] Received 15 death signal, shutting down workers",
        )
    )
    for i in range(FILLERS):
        created = WINDOW_START + timedelta(hours=1, minutes=i)
        sc.executions.append(
            SandboxExecution(
                FILLER_PROJECT,
                "production",
                f"q{i:019d}",
                "SUCCEEDED",
                created,
                created + timedelta(minutes=30),
            )
        )
    sc.buckets.add(BULK_BUCKET)
    bulk_key = BULK_PREFIX.removeprefix(f"s3://{BULK_BUCKET}/")
    sc.objects += [
        SandboxObject(
            BULK_BUCKET,
            f"{bulk_key}step-{i:06d}/shard.pt",
            b"",
            BULK_NEWEST - timedelta(seconds=(i * 7919) % BULK_OBJECTS),
        )
        for i in range(BULK_OBJECTS)
    ]
    return sc


@pytest.fixture(scope="module")
def box():
    with sandbox(_scenario()) as b:
        yield b


def _reset(b) -> None:
    b.loki.faults.latency = 0.0
    b.loki.faults.rules.clear()
    b.loki.requests.clear()
    b.admin.faults = AdminFaults()
    b.s3.faults = S3Faults()


@pytest.fixture
def env(box, tmp_path, monkeypatch):
    _reset(box)
    use_sandbox(box, monkeypatch)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")  # boto3's standard setting: 2 retries
    cfg = tmp_path / "elastic-audit.toml"
    cfg.write_text(FAST_CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield box
    _reset(box)


def scan(capsys, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress", *extra], capsys)
    assert "Traceback" not in err, err
    return code, json.loads(out), err


@pytest.fixture(scope="module")
def baseline(box, tmp_path_factory):
    """The fault-free run, through the same config: what every recovered run must equal."""
    import os

    _reset(box)
    home = tmp_path_factory.mktemp("baseline")
    (home / "elastic-audit.toml").write_text(FAST_CONFIG)
    report = home / "report.json"
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update(box.env)
        os.chdir(home)
        code = exit_code(["scan", *WINDOW, "-o", "json", "--no-progress", "--report", str(report)])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    assert code == 1
    doc = json.loads(report.read_text())
    assert doc["complete"] is True
    assert {key(f): f["verdict"] for f in doc["findings"]} == EXPECTED_FINDINGS
    return doc


def _at(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _covered(finding: dict, gaps: list[dict]) -> bool:
    """A gap explains a lost or weakened finding when it spans its signal or its success."""
    times = [_at(finding["succeeded_at"])]
    if finding["signal"]:
        times.append(_at(finding["signal"]["at"]))
    for g in gaps:
        start, end = _at(g["start"]), _at(g["end"])
        if any(t is not None and start <= t <= end for t in times):
            return True
    return False


def assert_same_as_baseline(code: int, report: dict, baseline: dict) -> None:
    assert report["complete"] is True, report["gaps"]
    assert report["gaps"] == []
    assert code == 1
    assert report["findings"] == baseline["findings"]
    assert report["summary"] == baseline["summary"]


def assert_incomplete_without_a_hole(code: int, report: dict, baseline: dict) -> None:
    """Exit 3, gaps listed, no confident claim invented, and every finding that is missing or
    weaker than in the fault-free run lies inside a gap."""
    assert code == 3
    assert report["complete"] is False and report["gaps"]
    got = {key(f): f for f in report["findings"]}
    want = {key(f): f for f in baseline["findings"]}
    for k in set(got) - set(want):
        # Only doubt may be added, and only where a source failed: a cleared attempt whose
        # outputs.pb could not be checked is `suspected`, never `affected`.
        assert got[k]["verdict"] == "suspected" and _covered(got[k], report["gaps"]), got[k]
    for k, f in want.items():
        if k in got and got[k]["verdict"] == f["verdict"]:
            continue
        assert _covered(f, report["gaps"]), (k, report["gaps"])


def loki_faults_fired(box) -> list[str]:
    return [r.fault for r in box.loki.requests if r.fault]


# -- Loki ------------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_429_storm_with_retry_after_is_waited_out_and_changes_nothing(env, capsys, baseline):
    env.loki.faults.rules.append(FaultRule(429, count=6, retry_after="1"))
    code, report, _ = scan(capsys)
    assert loki_faults_fired(env) == ["429"] * 6
    assert_same_as_baseline(code, report, baseline)


@pytest.mark.integration
def test_a_429_storm_without_retry_after_backs_off_and_changes_nothing(env, capsys, baseline):
    env.loki.faults.rules.append(FaultRule(429, count=8))
    code, report, _ = scan(capsys)
    assert loki_faults_fired(env) == ["429"] * 8
    assert_same_as_baseline(code, report, baseline)


@pytest.mark.integration
@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_transient_loki_5xx_is_retried_and_changes_nothing(env, capsys, baseline, status):
    env.loki.faults.rules.append(FaultRule(status, count=3))
    code, report, _ = scan(capsys)
    assert loki_faults_fired(env) == [str(status)] * 3
    assert_same_as_baseline(code, report, baseline)


@pytest.mark.integration
@pytest.mark.parametrize(
    "kind,count",
    [("timeout", 2), ("reset", 3), ("truncated", 2), ("nonjson", 2)],
    ids=["read-timeout", "connection-reset", "truncated-200", "non-json-200"],
)
def test_transient_loki_transport_faults_are_retried_and_change_nothing(
    env, capsys, baseline, kind, count
):
    rule = FaultRule(kind, count=count, sleep=4 if kind == "timeout" else 0)
    env.loki.faults.rules.append(rule)
    code, report, _ = scan(capsys)
    assert rule.fired == count  # (a stalled request is only logged once its stall ends)
    assert_same_as_baseline(code, report, baseline)


@pytest.mark.integration
@pytest.mark.parametrize(
    "status,says",
    [
        (503, "HTTP 503 from Loki after 4 attempts"),
        (429, "HTTP 429 from Loki after 4 attempts"),
        ("reset", "connection to Loki"),
        ("timeout", "did not answer within 1.5s"),
        ("truncated", "truncated body"),
        ("nonjson", "body is not JSON"),
    ],
)
def test_a_permanently_failing_shard_is_one_gap_at_its_boundaries_and_the_rest_is_reported(
    env, capsys, baseline, status, says
):
    env.loki.faults.rules.append(
        FaultRule(status, count="always", window=SHARD_0910, sleep=4 if status == "timeout" else 0)
    )
    code, report, _ = scan(capsys)
    (gap,) = report["gaps"]
    assert (gap["source"], gap["start"], gap["end"]) == (
        "loki",
        "2026-09-10T00:00:00Z",
        "2026-09-11T00:00:00Z",
    )
    assert says in gap["error"]
    assert_incomplete_without_a_hole(code, report, baseline)
    got = {key(f): f for f in report["findings"]}
    for f in baseline["findings"]:
        signal_at = _at(f["signal"]["at"]) if f["signal"] else None
        if signal_at is None or signal_at not in SHARD_0910:
            assert got[key(f)] == f  # everything outside the broken shard, byte for byte
    # The reference incident's signal is in the lost shard; Admin alone still flags it.
    ref = got[(*REFERENCE, "n0", 0)]
    assert ref["verdict"] == "suspected" and ref["signal"] is None


@pytest.mark.integration
def test_every_shard_failing_is_exit_3_with_gaps_covering_the_whole_window(env, capsys, baseline):
    env.loki.faults.rules.append(FaultRule(502, count="always"))
    code, report, _ = scan(capsys)
    spans = sorted((g["start"], g["end"]) for g in report["gaps"] if g["source"] == "loki")
    days = [WINDOW_START + i * DAY for i in range(8)]
    assert spans == [
        (d.strftime("%Y-%m-%dT%H:%M:%SZ"), (d + DAY).strftime("%Y-%m-%dT%H:%M:%SZ"))
        for d in days[:-1]
    ]
    assert_incomplete_without_a_hole(code, report, baseline)
    assert report["summary"]["affected"] == 0  # no signal evidence at all: suspected only


# -- Flyte Admin -----------------------------------------------------------------------------


ADMIN_READS = ("GetExecution", "ListExecutions", "ListNodeExecutions", "ListTaskExecutions")


@pytest.mark.integration
@pytest.mark.parametrize("code", [Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED])
def test_admin_unavailable_or_deadline_exceeded_once_per_call_is_retried(
    env, capsys, baseline, code
):
    for method in (*ADMIN_READS, "GetTask", "ListProjects", "GetExecutionData"):
        env.admin.faults.fail_next(method, times=2, code=code)
    rc, report, _ = scan(capsys)
    called = env.admin.call_counts()
    for method, left in env.admin.faults.failures.items():
        assert not left or not called[method], method  # a method the scan used ate its faults
    assert sum(2 - len(left) for left in env.admin.faults.failures.values()) >= 8
    assert_same_as_baseline(rc, report, baseline)


def assert_no_hole(code: int, report: dict, baseline: dict) -> None:
    if report["complete"]:
        assert_same_as_baseline(code, report, baseline)
    else:
        assert_incomplete_without_a_hole(code, report, baseline)


@pytest.mark.integration
@pytest.mark.parametrize("method", ADMIN_READS)
@pytest.mark.parametrize("code", [Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED])
def test_admin_down_for_one_rpc_is_exit_3_and_every_loss_is_inside_a_gap(
    env, capsys, baseline, method, code
):
    env.admin.faults.fail_next(method, times=10_000, code=code)
    rc, report, _ = scan(capsys)
    if not env.admin.call_counts()[method]:
        # (a scan that does not need this RPC is not hurt by its outage)
        assert_same_as_baseline(rc, report, baseline)
        return
    assert_incomplete_without_a_hole(rc, report, baseline)
    assert all(g["source"] == "admin" and code.name in g["error"] for g in report["gaps"])


@pytest.mark.integration
def test_a_real_admin_deadline_is_exit_3_with_gaps(env, capsys, baseline, tmp_path):
    (tmp_path / "elastic-audit.toml").write_text(
        FAST_CONFIG.replace("retries = 2\n", "retries = 1\ntimeout = 0.3\n", 1)
    )
    env.admin.faults.latency_by_method["ListTaskExecutions"] = 1.0
    rc, report, _ = scan(capsys)
    assert_incomplete_without_a_hole(rc, report, baseline)
    assert any("DEADLINE_EXCEEDED" in g["error"] for g in report["gaps"])


@pytest.mark.integration
def test_admin_not_found_for_a_candidate_is_never_a_hole(env, capsys, baseline):
    # The ghost pod's execution is unknown to Admin in every run: a task pod's name no attempt
    # owns is shown as unresolved (docs/verdicts.md), never a finding nor cleared; on top, one lookup of a
    # real candidate is answered NOT_FOUND (a racing delete).
    for method in ("GetExecution", "ListNodeExecutions", "ListTaskExecutions"):
        env.admin.faults.fail_next(method, times=1, code=Status.NOT_FOUND)
    rc, report, _ = scan(capsys)
    assert_no_hole(rc, report, baseline)
    assert GHOST not in json.dumps(report["findings"])
    assert baseline["summary"]["cleared"]["signal-not-a-flyte-task-pod"] == 1  # the notebook
    assert [u["pod"] for u in report["unresolved"]] == [f"{GHOST}-n0-0"]


@pytest.mark.integration
@pytest.mark.parametrize(
    "fault,says",
    [
        ("early", "a full page came without a next-page token"),
        ("repeat", "repeated"),
        ("bogus", "INVALID_ARGUMENT"),
    ],
)
def test_a_broken_page_token_is_a_gap_never_a_short_listing(env, capsys, baseline, fault, says):
    env.admin.faults.page_token = fault
    rc, report, _ = scan(capsys)
    (gap,) = report["gaps"]
    assert gap["source"] == "admin" and gap["error"].startswith(f"{FILLER_PROJECT}/production")
    assert says in gap["error"]
    assert (_at(gap["start"]), _at(gap["end"])) == (WINDOW_START, WINDOW_END)
    assert_incomplete_without_a_hole(rc, report, baseline)
    assert report["findings"] == baseline["findings"]  # the broken listing held no finding


# -- S3 --------------------------------------------------------------------------------------


@pytest.mark.integration
def test_s3_slowdown_is_retried_and_changes_nothing(env, capsys, baseline):
    env.s3.faults.slow_down += [
        # The first two requests for outputs.pb, listing pages or HEADs (`callplan.walk`).
        S3Rule(bucket="flyte-metadata", times=2),
        S3Rule(bucket=MODELS_BUCKET, method="GET", times=2),
    ]
    before = len(env.s3.requests)
    rc, report, _ = scan(capsys)
    assert [r.status for r in env.s3.requests[before:]].count(503) == 4
    assert_same_as_baseline(rc, report, baseline)


@pytest.mark.integration
def test_s3_slowdown_that_never_ends_on_outputs_is_exit_3_with_gaps(env, capsys, baseline):
    # Listing pages and the HEADs that replace them alike.
    env.s3.faults.slow_down.append(S3Rule(bucket="flyte-metadata"))
    rc, report, _ = scan(capsys)
    assert_incomplete_without_a_hole(rc, report, baseline)
    assert {g["source"] for g in report["gaps"]} == {"s3"}
    assert all("throttled (503" in g["error"] for g in report["gaps"])
    assert all(not f["outputs_written"] for f in report["findings"])


@pytest.mark.integration
def test_access_denied_on_the_checkpoint_bucket_is_unknown_with_the_reason_never_empty(
    env, capsys, baseline
):
    env.s3.faults.access_denied.append(S3Rule(bucket=MODELS_BUCKET, method="GET"))
    rc, report, _ = scan(capsys)
    by_name = {f["execution"]["name"]: f for f in report["findings"]}
    ck = by_name[REFERENCE[2]]["checkpoint"]
    assert ck["uri"] == REFERENCE_CHECKPOINT
    assert ck["state"] == "unknown" and ck["objects"] == 0 and ck["latest"] is None
    assert "forbidden" in ck["reason"] and "AccessDenied" in ck["reason"]
    # Verdicts need outputs.pb (another bucket), not the checkpoint: they stand.
    assert {key(f): f["verdict"] for f in report["findings"]} == EXPECTED_FINDINGS
    assert rc == 1 and report["complete"] is True


@pytest.mark.integration
def test_access_denied_on_outputs_is_exit_3_never_affected_on_a_guess(env, capsys, baseline):
    # The role may neither list the metadata bucket nor read its objects: the listing's refusal
    # answers nothing, and the HEADs that replace it are refused too.
    env.s3.faults.access_denied.append(S3Rule(bucket="flyte-metadata"))
    rc, report, _ = scan(capsys)
    assert_incomplete_without_a_hole(rc, report, baseline)
    assert report["summary"]["affected"] == 0
    assert all("forbidden" in g["error"] for g in report["gaps"])


@pytest.mark.integration
def test_a_checkpoint_bucket_that_does_not_exist_is_unknown_no_such_bucket(env, capsys, baseline):
    rc, report, _ = scan(capsys, "--checkpoint-template", "s3://gone-bucket/{project}/{name}/")
    assert rc == 1 and report["complete"] is True
    for f in report["findings"]:
        ck = f["checkpoint"]
        if ck["source"] == "template":
            assert (ck["state"], ck["reason"]) == ("unknown", "no such bucket")


@pytest.mark.integration
def test_a_checkpoint_prefix_with_twenty_thousand_objects_is_counted_exactly(
    env, capsys, baseline, tmp_path
):
    (tmp_path / "elastic-audit.toml").write_text(
        FAST_CONFIG.replace(
            'input = "checkpoint_dir"', f'template = "s3://{BULK_BUCKET}/{{project}}/{{name}}/"'
        )
    )
    rc, report, _ = scan(capsys)
    by_name = {f["execution"]["name"]: f for f in report["findings"]}
    ck = by_name[REFERENCE[2]]["checkpoint"]
    assert (ck["uri"], ck["state"], ck["objects"]) == (BULK_PREFIX, "present", BULK_OBJECTS)
    assert _at(ck["latest"]) == BULK_NEWEST
    assert rc == 1 and {key(f): f["verdict"] for f in report["findings"]} == EXPECTED_FINDINGS


# -- Ctrl-C ----------------------------------------------------------------------------------


def _interrupt_when(proc: subprocess.Popen, ready, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the scan never got under way"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)


@pytest.mark.e2e
@pytest.mark.parametrize("phase", ["loki", "admin"])
def test_ctrl_c_mid_scan_exits_130_and_leaves_no_report_file(env, tmp_path, phase):
    out = tmp_path / "reports"
    out.mkdir()
    report = out / "incident.json"
    if phase == "loki":
        # Every query_range stalls far longer than the client's timeout: the scan sits in its
        # Loki phase, retrying, when the signal comes.
        stall = FaultRule("timeout", count="always", sleep=20)
        env.loki.faults.rules.append(stall)

        def ready() -> bool:
            return stall.fired > 0
    else:
        env.admin.faults.latency_by_method["ListTaskExecutions"] = 1.0
        before = len(env.admin.calls_of("ListTaskExecutions"))

        def ready() -> bool:
            return len(env.admin.calls_of("ListTaskExecutions")) > before

    cmd = [sys.executable, "-m", "forensics", "scan", *WINDOW, "-o", "json", "--report"]
    proc = subprocess.Popen(
        [*cmd, str(report), "--no-progress"],
        env=env.child_environ() | {"AWS_MAX_ATTEMPTS": "3"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _interrupt_when(proc, ready)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert stdout == ""
    assert list(out.iterdir()) == []  # no report, no temporary file


@pytest.mark.e2e
def test_ctrl_c_while_admin_is_slow_stops_without_working_through_the_queue(env, tmp_path):
    # One worker, one second per ListTaskExecutions: after Ctrl-C at most the call in flight
    # and the rest of its candidate (two nodes at most) may follow, not the whole queue.
    env.admin.faults.latency_by_method["ListTaskExecutions"] = 1.0
    before = len(env.admin.calls_of("ListTaskExecutions"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "forensics", "scan", *WINDOW, "--workers", "1", "--no-progress"],
        env=env.child_environ() | {"AWS_MAX_ATTEMPTS": "3"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _interrupt_when(proc, lambda: len(env.admin.calls_of("ListTaskExecutions")) > before)
        at_signal = len(env.admin.calls_of("ListTaskExecutions"))
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert len(env.admin.calls_of("ListTaskExecutions")) - at_signal <= 2
