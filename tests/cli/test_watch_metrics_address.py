"""`watch --metrics-address HOST` serves /metrics on that interface only (all of them without
it, as before); an address it cannot serve on, or one without --metrics-port, is one error line
and exit 2 before anything is scanned. Through the CLI, against the sandbox."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import requests
from support.cli import run_process, start_process
from support.terminal import clean_env, one_error_line, work_dir

pytestmark = pytest.mark.e2e


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


def _watch(*extra: str) -> list[str]:
    return ["watch", "--every", "1h", "--since", "2026-09-04", *extra]


def test_metrics_are_served_on_the_address_given_only(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    args = _watch("--state", str(work / "state.json"), "--metrics-port", "0")
    p = start_process([*args, "--metrics-address", "127.0.0.2"], env=env, cwd=work)
    try:
        assert p.stderr is not None
        line = p.stderr.readline()
        assert line.startswith("elastic-audit: serving /metrics on 127.0.0.2 port "), line
        port = int(line.rsplit(" ", 1)[1])
        answer = requests.get(f"http://127.0.0.2:{port}/metrics", timeout=10)
        assert answer.status_code == 200  # (empty until the first run has ended)
        with pytest.raises(requests.ConnectionError):  # not on the other loopback address
            requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=120) == 0
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()


def test_an_address_it_cannot_serve_on_is_refused_before_the_scan(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    start = time.monotonic()
    state = work / "state.json"
    # TEST-NET-3 (RFC 5737): an address no interface of this machine holds
    args = _watch("--state", str(state), "--metrics-port", "0", "--metrics-address", "203.0.113.7")
    r = run_process(*args, env=env, cwd=work, timeout=120)
    one_error_line(r, "--metrics-address 203.0.113.7 --metrics-port 0: cannot serve /metrics (")
    assert [q for q in box.loki.requests.snapshot() if q.at >= start] == []
    assert not state.exists()


def test_an_address_without_a_port_is_a_usage_error(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    args = _watch("--state", str(work / "state.json"), "--metrics-address", "127.0.0.1")
    r = run_process(*args, env=env, cwd=work, timeout=120)
    one_error_line(r, "--metrics-address needs --metrics-port")
