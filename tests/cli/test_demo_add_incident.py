"""demo --add-incident signals only the demo it can prove is running (issue 43, item 11)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import CLI, run_process

from forensics.cli.demo import PIDFILE

pytestmark = pytest.mark.e2e


@pytest.fixture
def sleeper():
    """An unrelated process: SIGUSR1's default action would kill it."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def _add_incident(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_process("demo", "--add-incident", env=env, timeout=60)


def test_a_pid_with_no_demo_directory_behind_it_is_never_signalled(sleeper, tmp_path: Path):
    env = {
        **os.environ,
        "ELASTIC_AUDIT_DEMO_PID": str(sleeper.pid),
        "ELASTIC_AUDIT_CONFIG": str(tmp_path / "elastic-audit.toml"),
    }
    r = _add_incident(env)
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"ELASTIC_AUDIT_DEMO_PID={sleeper.pid} is not a demo running in {tmp_path}" in r.stderr
    time.sleep(0.3)
    assert sleeper.poll() is None  # still alive: nothing was signalled
    assert list(tmp_path.iterdir()) == []  # and no request was left behind


def test_only_the_real_demo_gets_the_incident(sleeper, tmp_path: Path):
    env_file = tmp_path / "sandbox.env"
    demo = subprocess.Popen(
        [*CLI, "demo", "--keep-running", "--env-file", env_file, "-o", "json", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while not env_file.exists():
            assert demo.poll() is None and time.monotonic() < deadline, demo.stderr.read()
            time.sleep(0.2)
        exported = dict(re.findall(r"^export (\w+)=(\S+)$", env_file.read_text(), re.M))
        home = Path(exported["ELASTIC_AUDIT_CONFIG"]).parent
        assert (home / PIDFILE).read_text() == f"{demo.pid}\n"
        env = {**os.environ, **exported}

        # The variable edited (or left from another shell) to name an unrelated process.
        r = _add_incident({**env, "ELASTIC_AUDIT_DEMO_PID": str(sleeper.pid)})
        assert r.returncode == 2 and r.stdout == "", r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"is not a demo running in {home} (that demo is pid {demo.pid})" in r.stderr
        time.sleep(0.3)
        assert sleeper.poll() is None and demo.poll() is None

        # The real demo still gets its incident.
        r = _add_incident(env)
        assert r.returncode == 0, r.stderr
        execution = r.stdout.strip()
        assert re.fullmatch(r"gs1:production:n[0-9a-f]{19}", execution), r.stdout
        said = demo.stderr.readline()
        while "demo: added" not in said:
            assert said, "the demo stopped without adding the incident"
            said = demo.stderr.readline()
        assert execution in said
    finally:
        demo.send_signal(signal.SIGINT)
        demo.communicate(timeout=60)
    assert demo.returncode == 0
    # Once the demo has stopped its directory is gone, and a pid left in the variable is refused.
    r = _add_incident({**env, "ELASTIC_AUDIT_DEMO_PID": str(sleeper.pid)})
    assert r.returncode == 2 and "nothing signalled" in r.stderr
    assert sleeper.poll() is None


def test_a_pidfile_whose_demo_died_is_not_proof(sleeper, tmp_path: Path):
    # A demo killed with SIGKILL leaves its directory; the pid it wrote may now be anyone's.
    (tmp_path / PIDFILE).write_text(f"{sleeper.pid}\n")
    env = {
        **os.environ,
        "ELASTIC_AUDIT_DEMO_PID": str(sleeper.pid),
        "ELASTIC_AUDIT_CONFIG": str(tmp_path / "elastic-audit.toml"),
    }
    r = _add_incident(env)
    assert r.returncode == 2, r.stderr
    assert "has stopped" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    time.sleep(0.3)
    assert sleeper.poll() is None
