"""Guard mode as processes (docs/deployment.md): two concurrent runs on one S3 state, Ctrl-C and SIGTERM
mid-run, metrics (textfile, Pushgateway, watch's /metrics) read with the Prometheus client's
own parser. The CLI runs as a child process against the sandbox (in this process)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import boto3
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from support.cli import run
from support.guard import HTTPRecorder, add_incident
from support.scan import CONFIG, WINDOW, point_at

from forensics.guard.state import GuardState, S3StateStore, StateConflict
from forensics.model import UTC
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox

FIRST = WINDOW  # the first run of a state scans the incident's week


@pytest.fixture
def box():
    with sandbox(reference_scenario()) as b:
        yield b


@pytest.fixture
def env(box, tmp_path, monkeypatch):
    point_at(box, tmp_path, monkeypatch, CONFIG)
    return tmp_path


def cli(box, cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "forensics", *args],
        cwd=cwd,
        env=box.child_environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def metrics(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample, by name and labels, as the Prometheus client's parser reads the text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.mark.e2e
def test_two_concurrent_runs_on_one_s3_state_notify_once(env, box, hook):
    boto3.client("s3", endpoint_url=box.env["AWS_ENDPOINT_URL_S3"]).create_bucket(Bucket="ops")
    state = "s3://ops/guard/state.json"
    # Each run reads the state, then lists projects first: held 5 s there, both are mid-scan
    # together, both having read "no state".
    box.admin.faults.latency_by_method["ListProjects"] = 5.0
    args = ["scan", *FIRST, "--no-progress", "-o", "json", "--state", state, "--notify", hook.url]
    procs = [cli(box, env, *args) for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(r[0] for r in results)
    assert codes == [1, 2], [r[2] for r in results]
    loser = next(r for r in results if r[0] == 2)
    assert f"state {state} was written by another run" in loser[2]
    assert "the other run holds the state" in loser[2]
    assert len(hook.posts()) == 1
    stored = boto3.client("s3", endpoint_url=box.env["AWS_ENDPOINT_URL_S3"]).get_object(
        Bucket="ops", Key="guard/state.json"
    )
    doc = json.loads(stored["Body"].read())
    assert all(v["notified"] and "claimed_by" not in v for v in doc["items"].values())


@pytest.mark.integration
def test_s3_state_writes_are_conditional_on_the_etag_read(env, box):
    boto3.client("s3", endpoint_url=box.env["AWS_ENDPOINT_URL_S3"]).create_bucket(Bucket="ops")
    store = S3StateStore("s3://ops/state.json")
    assert store.read() == (None, None)
    t1 = store.write(GuardState(runs=1), None)  # If-None-Match: *
    with pytest.raises(StateConflict):
        store.write(GuardState(runs=9), None)  # another first write loses
    state, token = store.read()
    assert state.runs == 1 and token == t1
    store.write(GuardState(runs=2), t1)  # If-Match: the ETag read
    with pytest.raises(StateConflict):
        store.write(GuardState(runs=3), t1)  # stale ETag
    assert store.read()[0].runs == 2


@pytest.mark.e2e
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_mid_run_leave_the_state_as_it_was(env, box, hook, capsys, sig, code):
    state = env / "state.json"
    rc, _, err = run(["scan", *FIRST, "--no-progress", "-o", "json", "--state", str(state)], capsys)
    assert rc == 1, err
    before = state.read_bytes()
    add_incident(box, "guardsig00000000001", datetime(2026, 9, 11, 5, 0, tzinfo=UTC))
    box.admin.faults.latency = 1.0
    calls = len(box.admin.calls)
    p = cli(
        box,
        env,
        *["scan", "--until", "2026-09-12", "--no-progress", "--state", str(state)],
        *["--notify", hook.url],
    )
    deadline = time.monotonic() + 60
    while len(box.admin.calls) == calls and time.monotonic() < deadline:
        time.sleep(0.05)  # the scan has started talking to Admin
    assert p.poll() is None
    p.send_signal(sig)
    rc = p.wait(timeout=60)
    err = p.communicate()[1]
    assert rc == code, err
    assert "Traceback" not in err
    if sig == signal.SIGTERM:
        assert "terminated; the state is as it was before this run" in err
    assert state.read_bytes() == before
    assert hook.posts() == []


@pytest.mark.e2e
def test_sigterm_during_delivery_lets_the_state_write_finish(env, box, hook):
    state = env / "state.json"
    hook.delay = 2.0
    p = cli(box, env, "scan", *FIRST, "--no-progress", "--state", str(state), "--notify", hook.url)
    deadline = time.monotonic() + 120
    while not hook.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)  # while the webhook is answering
    rc = p.wait(timeout=60)
    err = p.communicate()[1]
    assert rc == 143, err
    assert "terminated after finishing the state write" in err
    assert len(hook.posts()) == 1
    doc = json.loads(state.read_text())  # delivered, recorded, then exited
    assert len(doc["items"]) == 6
    assert all(v["notified"] and "claimed_by" not in v for v in doc["items"].values())


@pytest.mark.integration
def test_metrics_file_and_pushgateway_carry_the_metrics_of_spec_9(env, box, capsys):
    gateway = HTTPRecorder()
    try:
        prom = env / "elastic-audit.prom"
        args = ["--state", "state.json", "--metrics-file", str(prom), "--pushgateway", gateway.base]
        rc, _, err = run(["scan", *FIRST, "--no-progress", "-o", "json", *args], capsys)
        assert rc == 1, err
        m = metrics(prom.read_text())
        assert m[("elastic_audit_findings", (("verdict", "affected"),))] == 5
        assert m[("elastic_audit_findings", (("verdict", "suspected"),))] == 1
        assert m[("elastic_audit_new_findings_total", (("verdict", "affected"),))] == 5
        assert m[("elastic_audit_pending", ())] == 0
        assert m[("elastic_audit_gaps", ())] == 0
        assert m[("elastic_audit_scan_complete", ())] == 1
        assert (
            abs(m[("elastic_audit_last_complete_scan_timestamp_seconds", ())] - time.time()) < 120
        )
        assert m[("elastic_audit_scan_duration_seconds", ())] > 0
        assert m[("elastic_audit_source_errors_total", (("source", "admin"),))] == 0
        (method, path, body) = gateway.requests[-1]
        assert (method, path) == ("PUT", "/metrics/job/elastic-audit")
        assert metrics(body.decode()) == m

        # Run 2: one more affected; the counter goes on from the state, the gauge is the window's.
        add_incident(box, "guardmet00000000001", datetime(2026, 9, 11, 5, 0, tzinfo=UTC))
        rc, _, err = run(
            ["scan", "--until", "2026-09-12", "--no-progress", "-o", "json", *args], capsys
        )
        assert rc == 1, err
        m = metrics(prom.read_text())
        assert m[("elastic_audit_new_findings_total", (("verdict", "affected"),))] == 6
        assert m[("elastic_audit_findings", (("verdict", "affected"),))] == 1
    finally:
        gateway.close()


@pytest.mark.e2e
def test_watch_serves_metrics_and_exits_0_on_sigterm(env, box, capsys):
    state = env / "state.json"
    # watch's first window runs to now: it must find what a plain scan of that window finds.
    _, out, _ = run(["scan", "--since", "2026-09-04", "--no-progress", "-o", "json"], capsys)
    affected = sum(f["verdict"] == "affected" for f in json.loads(out)["findings"])
    assert affected >= 5
    p = cli(
        box,
        env,
        *["watch", "--every", "1h", "--metrics-port", "0", "--state", str(state)],
        *["--since", "2026-09-04", "--metrics-file", str(env / "watch.prom")],
    )
    try:
        line = p.stderr.readline()
        assert "serving /metrics on port" in line, line
        port = int(line.rsplit(" ", 1)[1])
        deadline = time.monotonic() + 240
        m: dict = {}
        while time.monotonic() < deadline:
            m = metrics(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
            if ("elastic_audit_scan_complete", ()) in m:
                break
            time.sleep(0.2)
        assert m[("elastic_audit_scan_complete", ())] == 1
        assert m[("elastic_audit_findings", (("verdict", "affected"),))] == affected
        assert json.loads(state.read_text())["runs"] == 1
        assert metrics((env / "watch.prom").read_text()) == m  # the same values in the file
        p.send_signal(signal.SIGTERM)  # asleep until the next run
        rc = p.wait(timeout=60)
        out, err = p.communicate()
        assert rc == 0, err
        assert "run 1: 2026-09-04T00:00:00Z" in out and f"{affected} affected" in out
    finally:
        if p.poll() is None:
            p.kill()
