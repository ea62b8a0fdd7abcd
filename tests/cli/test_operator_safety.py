"""What an operator at 3 a.m. must be able to trust, through the real CLI: relaunch checks its
audit log before it acts; watch never serves metrics it cannot back with scans; an ambiguous or
impossible window is refused; exit codes match docs/exit-codes.md; an incomplete scan says so
first; a checkpoint written after the signal is never announced as a safe resume; -vv never prints
an access key id; a suspected finding keeps the signal Loki saw.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import paths
from support.cli import CLI, run_process
from support.scan import WINDOW
from support.terminal import clean_env, one_error_line, work_dir

pytestmark = pytest.mark.e2e

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
RACED = "gs1:production:nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"
DOCS = paths.DOCS
MUTATING = ("RelaunchExecution", "RecoverExecution", "CreateExecution", "TerminateExecution")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


def cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 180):
    return run_process(*args, env=env, cwd=cwd, timeout=timeout)


# -- the audit log is checked before anything is sent ------------------------------------------


@pytest.mark.parametrize("mode", ["--yes", "--dry-run"])
@pytest.mark.parametrize("how", ["flag", "xdg"])
def test_relaunch_with_an_unwritable_audit_log_exits_2_before_anything_is_sent(
    box, work, tmp_path, mode, how
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    env = box.child_environ(clean_env(tmp_path))
    args = ["relaunch", INCIDENT, mode, "-o", "json"]
    if how == "flag":
        args += ["--audit-log", str(blocker / "audit.jsonl")]
    else:  # $XDG_STATE_HOME/elastic-audit cannot be created
        env["XDG_STATE_HOME"] = str(blocker / "state")
    before = dict(box.admin.call_counts())
    r = cli(*args, env=env, cwd=work)
    one_error_line(r, "audit log")
    assert "nothing relaunched" in r.stderr and r.stdout == ""
    # Admin was not asked anything, let alone to relaunch
    assert dict(box.admin.call_counts()) == before


def test_a_misspelt_execution_under_relaunch_is_a_usage_error_and_never_audited(
    box, work, tmp_path
):
    env = box.child_environ(clean_env(tmp_path))
    log = tmp_path / "audit.jsonl"
    r = cli(
        "relaunch", "gs1:production:azvg5f9v9974m78fvlf8", "--yes", "--audit-log", str(log),
        env=env, cwd=work,
    )  # fmt: skip
    one_error_line(r, "not found in Flyte Admin: gs1:production:azvg5f9v9974m78fvlf8")
    assert not log.exists() or log.read_text() == ""  # no `refused` record for a typo
    shown = cli("show", "gs1:production:azvg5f9v9974m78fvlf8", env=env, cwd=work)
    assert shown.returncode == r.returncode  # the same typo, the same code as `show`


# -- watch: every configuration error exits 2 before serving -----------------------------------


def test_watch_on_a_new_state_without_since_exits_2_before_serving_metrics(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    state = tmp_path / "state.json"
    r = cli(
        "watch", "--state", str(state), "--metrics-port", "0", "--every", "1m",
        env=env, cwd=work, timeout=60,
    )  # fmt: skip
    one_error_line(r, "--since is required for the first run")
    assert "serving /metrics" not in r.stderr and not state.exists()


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--since", "1M"], "ambiguous"),
        (["--since", "1d", "--every", "1M"], "ambiguous"),
        (["--since", "2999-01-01T00:00:00Z"], "must be before"),
    ],
)
def test_watch_refuses_a_bad_window_before_serving(box, work, tmp_path, args, fragment):
    env = box.child_environ(clean_env(tmp_path))
    r = cli(
        "watch", "--state", str(tmp_path / "s.json"), "--metrics-port", "0", *args,
        env=env, cwd=work, timeout=60,
    )  # fmt: skip
    one_error_line(r, fragment)
    assert "serving /metrics" not in r.stderr


def test_watch_exits_130_on_ctrl_c_as_docs_exit_codes_say(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    proc = subprocess.Popen(
        [*CLI, "watch", "--state", str(tmp_path / "s.json"), "--since", "2026-09-10",
         "--every", "1h", "--metrics-port", "0"],
        env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()  # the first run's line: a scan ran, the loop now sleeps
        # one time format in every message: RFC 3339 with Z
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ run 1: 2026-09-10T00:00:00Z – ", line)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill() if proc.poll() is None else None
    assert proc.returncode == 130, err
    watch_section = (DOCS / "exit-codes.md").read_text().split("## watch", 1)[1]
    assert "`130`" in watch_section


# -- an ambiguous or impossible window -----------------------------------------------------------


@pytest.mark.parametrize("since", ["1M", "2M", "1d1M", "3 M"])
def test_an_uppercase_M_duration_is_refused_as_ambiguous(work, tmp_path, since):
    r = cli("scan", "--since", since, env=clean_env(tmp_path), cwd=work)
    line = one_error_line(r, "ambiguous")
    assert "30d" in line and "min" in line


def test_lowercase_minutes_still_work(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    r = cli("scan", "--since", "90m", "--until", "2026-09-10T20:00:00Z", "-o", "json",
            env=env, cwd=work)  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["window"]["start"] == "2026-09-10T18:30:00Z"


def test_an_until_in_the_future_is_refused_and_no_future_state_is_written(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    future = (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    r = cli("scan", "--since", "1d", "--until", future, env=env, cwd=work)
    line = one_error_line(r, "is in the future")
    assert re.search(r"now \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)", line)  # one time format: RFC 3339 Z
    state = tmp_path / "state.json"
    r = cli("scan", "--state", str(state), "--since", "2026-09-04", "--until", future,
            env=env, cwd=work)  # fmt: skip
    one_error_line(r, "is in the future")
    assert not state.exists()
    # and once a state exists, a later run with a future --until is refused too
    ok = cli("scan", "--state", str(state), *WINDOW, "-o", "json", env=env, cwd=work)
    assert ok.returncode == 1, ok.stderr
    before = state.read_text()
    r = cli("scan", "--state", str(state), "--until", future, env=env, cwd=work)
    one_error_line(r, "is in the future")
    assert state.read_text() == before


def test_window_errors_write_times_as_rfc3339_with_z(work, tmp_path):
    r = cli("scan", "--since", "2026-09-11", "--until", "2026-09-10", env=clean_env(tmp_path),
            cwd=work)  # fmt: skip
    line = one_error_line(r, "must be before")
    assert "2026-09-11T00:00:00Z" in line and "+00:00" not in line


# -- exit codes ----------------------------------------------------------------------------------


def test_a_state_on_a_bucket_that_does_not_exist_is_configuration_exit_2(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    r = cli("scan", "--state", "s3://no-such-bukcet/guard/state.json", *WINDOW, env=env, cwd=work)
    one_error_line(r, "bucket 'no-such-bukcet' does not exist")


# -- an incomplete scan says so first ----------------------------------------------------------


def test_an_incomplete_scan_opens_with_what_could_not_be_read(box, work, tmp_path):
    # Admin at flytekit's default 127.0.0.1:30080, where nothing listens; Loki and S3 answer.
    env = clean_env(
        tmp_path,
        LOKI_ADDR=box.env["LOKI_ADDR"],
        AWS_ENDPOINT_URL_S3=box.env["AWS_ENDPOINT_URL_S3"],
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="y",
        AWS_REGION="us-east-1",
        FLYTE_PLATFORM_INSECURE="True",
    )
    r = cli("scan", *WINDOW, "-o", "table", env=env, cwd=work)
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Window ")
    assert lines[1].startswith("INCOMPLETE SCAN: Flyte Admin could not be read"), r.stdout
    assert "No affected or suspected attempts." not in r.stdout
    md = cli("scan", *WINDOW, "-o", "markdown", env=env, cwd=work)
    assert "- Coverage: **INCOMPLETE SCAN: Flyte Admin could not be read" in md.stdout


# -- a checkpoint written after the signal ----------------------------------------------------


def test_a_checkpoint_written_after_the_signal_is_never_announced_as_a_safe_resume(
    box, work, tmp_path
):
    env = box.child_environ(clean_env(tmp_path))
    r = cli("scan", *WINDOW, "-o", "table", env=env, cwd=work)
    row = next(line for line in r.stdout.splitlines() if RACED in line)
    # seconds, so the order against the signal (02:10:00) shows, and the fact said in words
    assert "newest 09-05 02:10:05" in row and "written AFTER the signal" in row
    d = cli("relaunch", RACED, "--dry-run", "-o", "table", "--audit-log", str(tmp_path / "a.jsonl"), env=env,
            cwd=work)  # fmt: skip
    assert d.returncode == 0, d.stderr
    assert "training resumes from it" not in d.stderr
    assert "written AFTER the signal: it may be partial" in d.stderr
    j = cli("relaunch", RACED, "--dry-run", "-o", "json", "--audit-log",
            str(tmp_path / "a.jsonl"), env=env, cwd=work)  # fmt: skip
    plan = json.loads(j.stdout)[0]["plan"]
    assert plan["checkpoint_written_after_signal"] is True


# -- -vv masks the SigV4 Authorization header whole ------------------------------------------


def test_vv_never_prints_the_access_key_id_or_the_signature(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    r = cli("show", INCIDENT, "-vv", "-o", "json", env=env, cwd=work)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Authorization" in r.stderr or "authorization" in r.stderr  # the header was logged
    assert box.env["AWS_ACCESS_KEY_ID"] not in r.stderr
    assert not re.search(r"Credential=(?!\*\*\*)", r.stderr)
    assert not re.search(r"Signature=(?!\*\*\*)", r.stderr)
    # botocore's own debug line of the signature it computed (auth.py `add_auth`)
    assert "Signature:" in r.stderr
    assert not re.search(r"Signature:\s*(?!\*\*\*)\S", r.stderr)


# -- a suspected finding keeps the evidence the tool had --------------------------------------


def test_a_suspected_finding_with_s3_down_keeps_the_signal_loki_saw(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path, AWS_MAX_ATTEMPTS="1"))
    env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"  # nothing listens there
    r = cli("scan", *WINDOW, "-o", "json", env=env, cwd=work)
    assert r.returncode == 3
    f = next(f for f in json.loads(r.stdout)["findings"] if f["execution"]["name"] in INCIDENT)
    assert f["verdict"] == "suspected" and f["outputs_written"] is None
    assert f["signal"]["name"] == "SIGTERM" and f["signal"]["at"] == "2026-09-10T19:45:22Z"
    t = cli("scan", *WINDOW, "-o", "table", env=env, cwd=work)
    row = next(line for line in t.stdout.splitlines() if INCIDENT in line)
    assert "SIGTERM" in row
    # docs/report.md says what the tool prints: null when outputs.pb could not be checked
    row = next(
        line for line in (DOCS / "report.md").read_text().splitlines()
        if line.startswith("| `outputs_written`")
    )  # fmt: skip
    assert "`null`" in row


def test_s3_unreachable_names_the_likely_cause(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path, AWS_MAX_ATTEMPTS="1"))
    env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"
    r = cli("show", INCIDENT, env=env, cwd=work)
    assert "likely cause: nothing answers at http://127.0.0.1:9" in r.stderr
