"""The 3 a.m. test: what a new user meets through the real CLI, mistakes included.

-v tells the tool's own story; a failing source says why and where its address came from; show
never exits 0 over a source it could not read; stdout holds only results; the demo's environment
is written to a file and its leftovers are errors naming the variable; one table renderer sized
to the terminal; help that reads like a CLI's. Every run is `python -m forensics` in a child
process (or a pseudo-terminal), so logging, flytekit's import and the terminal are as in use.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import CLI, run_process
from support.scan import WINDOW
from support.terminal import clean_env, rows_fit, run_in_pty, work_dir

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
LONG = "gs1:production:nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"


def cli(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess:
    return run_process(*args, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


# -- 1. -v tells the tool's own story, not botocore's -------------------------------------------


@pytest.mark.e2e
def test_verbose_tells_the_tools_decisions_and_keeps_library_debug_for_vv(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    v = cli("scan", *WINDOW, "-v", "-o", "json", "--no-progress", env=env, cwd=work)
    assert v.returncode == 1, v.stderr
    json.loads(v.stdout)
    err = v.stderr
    assert re.search(
        r"(?m)^elastic-audit: window 2026-09-04T00:00:00Z → 2026-09-11T00:00:00Z .* 7 Loki shard\(s\) of at most 24h",
        err,
    )
    assert "Loki shard 2026-09-10T00:00:00Z → 2026-09-11T00:00:00Z: read" in err
    # one decision per candidate, with its evidence: the reference incident and a cleared one
    assert re.search(
        r"gs1:production:azvg5f9v9974m78fvlf7 n0/0 \(SUCCEEDED, signal 2026-09-10T19:45:22Z, outputs.pb missing\): affected",
        err,
    )
    assert re.search(r"\): cleared: ", err)
    assert re.search(
        r"calls: Loki 7 shard\(s\), Flyte Admin \d+ \(.+\), S3 \d+ \(http://127\.0\.0\.1:\d+\)", err
    )
    # where the run's time went, one step after the other (the scale benchmark's --phases)
    assert re.search(
        r"(?m)^elastic-audit: timing: projects \d+\.\d s, sweep \d+\.\d s, "
        r"signals \d+\.\d s, outputs\.pb checks \d+\.\d s, signals joined \d+\.\d s, "
        r"unclaimed pods \d+\.\d s, outputs\.pb HEADs \d+\.\d s, verdicts \d+\.\d s, "
        r"relaunches and report \d+\.\d s; \d+\.\d s in all, \d+\.\d CPU-seconds "
        r"\(\d+\.\d before the scan began\)$",
        err,
    )
    # third-party debug stays out of -v (it was ~220 lines of botocore/urllib3 before)
    assert not re.search(r"(?m)^elastic-audit: debug: (botocore|urllib3|grpc)", err)
    vv = cli("scan", *WINDOW, "-vv", "-o", "json", "--no-progress", env=env, cwd=work)
    assert vv.returncode == 1 and json.loads(vv.stdout)
    assert re.search(r"(?m)^elastic-audit: debug: botocore", vv.stderr)  # asked for: it is there


# -- 2. no silent all-clear ---------------------------------------------------------------------


@pytest.mark.e2e
def test_a_failing_source_says_why_and_where_its_address_came_from(box, work, tmp_path):
    # LOKI_ADDR unset: the default localhost:3100; Admin at flytekit's default 127.0.0.1:30080
    # (the test needs nothing listening on those two ports); S3 from the sandbox.
    env = clean_env(
        tmp_path,
        AWS_ENDPOINT_URL_S3=box.env["AWS_ENDPOINT_URL_S3"],
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="y",
        AWS_REGION="us-east-1",
        FLYTE_PLATFORM_INSECURE="True",
    )
    r = cli(
        "scan", "--since", "2026-09-10", "--until", "2026-09-11", "-o", "json", env=env, cwd=work
    )
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["complete"] is False
    lines = [line for line in r.stderr.splitlines() if " failed (" in line]
    loki = next(line for line in lines if line.startswith("elastic-audit: Loki failed"))
    assert (
        "likely cause: nothing answers at http://localhost:3100, the default (LOKI_ADDR unset"
        in loki
    )
    admin = next(line for line in lines if line.startswith("elastic-audit: Flyte Admin failed"))
    assert (
        "127.0.0.1:30080" in admin
        and "flytekit's default (FLYTE_PLATFORM_URL and FLYTECTL_CONFIG unset" in admin
    )
    assert len(lines) == 2  # one line per failing source, S3 never reached

    env["LOKI_ADDR"] = "http://127.0.0.1:9"
    r = cli("scan", "--since", "2026-09-10", "--until", "2026-09-11", env=env, cwd=work)
    assert "nothing answers at http://127.0.0.1:9, from LOKI_ADDR" in r.stderr


@pytest.mark.e2e
def test_show_exits_3_when_s3_cannot_be_read(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path, AWS_MAX_ATTEMPTS="1"))
    env["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"  # nothing listens there
    r = cli("show", INCIDENT, "-o", "table", env=env, cwd=work)
    assert r.returncode == 3, r.stderr  # it was 0, as if S3 had answered
    assert "GAP s3" in r.stdout and "unknown, 0 object(s)" not in r.stdout
    line = next(
        line for line in r.stderr.splitlines() if line.startswith("elastic-audit: S3 failed")
    )
    assert "http://127.0.0.1:9, from AWS_ENDPOINT_URL_S3" in line


# -- 3. stdout carries only the result ----------------------------------------------------------


@pytest.mark.e2e
def test_flytekit_warnings_about_a_stale_flytectl_config_never_reach_stdout(box, work, tmp_path):
    # flytekit reads FLYTECTL_CONFIG when it is imported, whatever --flyte-config says, and
    # warned onto stdout that the file does not exist: `scan -o json | jq` then failed.
    env = box.child_environ(clean_env(tmp_path))
    env["FLYTECTL_CONFIG"] = str(tmp_path / "gone" / "config.yaml")
    flyte_config = box.env["FLYTECTL_CONFIG"]
    r = cli("scan", *WINDOW, "--flyte-config", flyte_config, "-o", "json", env=env, cwd=work)
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["summary"]["affected"] == 5  # stdout is the report and only it
    assert "does not exist" in r.stderr


# -- 7. the demo's environment --------------------------------------------------------------


@pytest.mark.e2e
def test_demo_env_file_sandbox_audit_log_and_stale_variables_named(tmp_path):
    env = clean_env(tmp_path)
    (tmp_path / "home").mkdir()
    env_file = tmp_path / "sandbox.env"
    proc = subprocess.Popen(
        [
            *CLI,
            "demo",
            "--keep-running",
            "--env-file",
            str(env_file),
            "-o",
            "json",
            "--no-progress",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not env_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        # `. ./sandbox.env` in a shell, then a relaunch: the sandbox's own audit log is used.
        script = (
            f". {env_file} && exec {sys.executable} -m forensics relaunch {INCIDENT} --yes -o json"
        )
        r = subprocess.run(
            ["sh", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)[0]["status"] == "relaunched"
        # The user's own AWS keys come back with `elastic_audit_deactivate`; what was not set
        # before is unset again. Sourcing twice keeps the user's values, not the sandbox's.
        undo = (
            f'. {env_file}; . {env_file}; echo "$AWS_ACCESS_KEY_ID"; elastic_audit_deactivate; '
            'echo "$AWS_ACCESS_KEY_ID ${LOKI_ADDR-unset} ${ELASTIC_AUDIT_CONFIG-unset}"'
        )
        mine = {**env, "AWS_ACCESS_KEY_ID": "AKIAUSERSOWNKEY"}
        u = subprocess.run(["sh", "-c", undo], env=mine, capture_output=True, text=True, timeout=60)
        assert u.stdout.splitlines() == ["sandbox-access-key", "AKIAUSERSOWNKEY unset unset"]
        said = proc.stderr.readline()
        while "Sandbox running" not in said:
            said = proc.stderr.readline()
        assert "elastic_audit_deactivate" in said and "AWS_ACCESS_KEY_ID" in said
        exported = dict(re.findall(r"^export (\w+)=(\S+)$", env_file.read_text(), re.M))
        sandbox_dir = Path(exported["FLYTECTL_CONFIG"]).parent
        assert Path(exported["ELASTIC_AUDIT_CONFIG"]).parent == sandbox_dir
        assert Path(exported["ELASTIC_AUDIT_AUDIT_LOG"]) == sandbox_dir / "audit.jsonl"
        assert len((sandbox_dir / "audit.jsonl").read_text().splitlines()) == 1
        assert not (tmp_path / "state").exists()  # the user's real audit log was not touched
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)  # stdout: the report alone, no NAME=value lines mixed in
    # the demo reads Kubernetes events too: the plain task proved by an event alone is the sixth
    assert report["summary"]["affected"] == 6
    assert not sandbox_dir.exists()

    # The demo has stopped; the variables it exported now point at deleted files: all of them
    # are named in one error, not one per run.
    stale = {**env, **exported}
    r = cli("scan", "--since", "1d", env=stale, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1
    for var in ("ELASTIC_AUDIT_CONFIG", "FLYTECTL_CONFIG", "ELASTIC_AUDIT_AUDIT_LOG"):
        assert f"{var}={exported[var]}" in r.stderr
    assert r.stderr.startswith("elastic-audit: error: 3 variables name files that do not exist")
    assert "unset ELASTIC_AUDIT_CONFIG FLYTECTL_CONFIG ELASTIC_AUDIT_AUDIT_LOG" in r.stderr
    del stale["ELASTIC_AUDIT_CONFIG"], stale["ELASTIC_AUDIT_AUDIT_LOG"]
    r = cli("show", INCIDENT, env=stale, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("elastic-audit: error: FLYTECTL_CONFIG=")
    assert len(r.stderr.splitlines()) == 1


# -- 4. one table renderer, sized to the terminal -----------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("columns", [150, 220])
def test_tables_fit_the_terminal_and_never_break_an_identifier(box, work, tmp_path, columns):
    env = box.child_environ(clean_env(tmp_path))
    out = run_in_pty(["scan", *WINDOW, "--no-progress"], env, work, columns)
    rows_fit(out, columns)
    assert LONG in out  # whole, in one cell, in the form show and relaunch accept
    assert "gs1:production:azvg5f9v9974m78fvlf7" in out and "gs1/production\n" not in out
    shown = run_in_pty(["show", LONG], env, work, columns)
    assert f"Execution {LONG}" in shown
    rows_fit(shown, columns)
    report = work / "report.json"
    cli("scan", *WINDOW, "--report", str(report), "-o", "json", env=env, cwd=work)
    dry = run_in_pty(
        ["relaunch", "--from-report", str(report), "--dry-run", "-o", "table"], env, work, columns
    )
    header = next(line for line in dry.splitlines() if line.startswith("execution"))
    assert "reason" in header  # was dropped at a fixed 100 columns
    assert LONG in dry and "already-relaunched" in dry  # was cut: `…-v1-re…`, `already-relau…`
    rows_fit(dry, columns)


@pytest.mark.e2e
def test_piped_table_has_one_line_per_row_and_show_accepts_the_slash_form(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    r = cli("scan", *WINDOW, "-o", "table", env=env, cwd=work)
    rows = [line for line in r.stdout.splitlines() if line.startswith(("affected", "suspected"))]
    assert len(rows) == 6 and any(LONG in row for row in rows)
    slash = cli("show", "gs1/production/azvg5f9v9974m78fvlf7", "-o", "json", env=env, cwd=work)
    assert slash.returncode == 0, slash.stderr
    assert json.loads(slash.stdout)["verdict"] == "affected"
    check = cli("fix", "check", "-o", "table", env=env, cwd=work)
    assert check.stdout and all(line == line.rstrip() for line in check.stdout.splitlines())


# -- 5. help that reads like a CLI's ------------------------------------------------------------


@pytest.mark.e2e
def test_help_names_values_shows_defaults_whole_and_only_each_commands_formats(tmp_path):
    env = clean_env(tmp_path, COLUMNS="80")
    helps = {
        c: cli(*c.split(), "--help", env=env, cwd=tmp_path).stdout
        for c in ("scan", "show", "relaunch", "pin-bump", "demo", "fix check", "fix apply")
    }
    everything = "\n".join(helps.values())
    assert not re.search(r"<(bool|str|int|list\[str\]|int range|path)>", everything)
    assert "…" not in everything.split("Examples:")[0]
    assert re.search(r"--since DURATION\|TIME\s", helps["scan"])
    assert re.search(r"--loki-url URL\s", helps["scan"]) and re.search(
        r"--report FILE\s", helps["scan"]
    )
    assert re.search(r"--exit-zero\s+Exit 0", helps["scan"])  # a flag: no placeholder
    assert "-o, --output table|wide|json|csv|markdown|html" in helps["scan"]
    assert "-o, --output table|json|html " in helps["show"]
    for c in ("relaunch", "fix check", "fix apply"):
        assert "-o, --output table|json " in helps[c], c
        assert "csv" not in helps[c] and "markdown" not in helps[c], c
    assert "-o, --output table|json|diff" in helps["pin-bump"]
    assert "[default: exa-labs/flytekit]" in " ".join(helps["pin-bump"].split())
    assert "ELASTIC_AUDIT_CONFIG" in helps["scan"]
    assert "Usage: elastic-audit pin-bump [OPTIONS] SHA\n" in helps["pin-bump"]


def test_an_option_that_takes_a_value_but_names_none_is_an_error_not_a_guessed_placeholder():
    # Placeholders were guessed from a table of parameter names (`--x` would have read `X`).
    import typer

    from forensics.cli.app import App

    def command(x: str = typer.Option(None, "--x", help="A value.")) -> None:
        """A command whose option names no value."""

    app = App(name="t")
    app.add("c", command, "")
    with pytest.raises(TypeError, match="option --x takes a value but names none"):
        app(["c", "--help"], standalone_mode=False)


@pytest.mark.e2e
@pytest.mark.parametrize("args", [[], ["fix"]])
def test_no_command_is_help_and_a_real_error_line(tmp_path, args):
    r = cli(*args, env=clean_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("elastic-audit: error: missing command (see 'elastic-audit")
    assert "error:  " not in r.stderr
