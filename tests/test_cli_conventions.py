"""What people bring from other CLIs, through the real CLI (a pty where a terminal matters): no
traceback for a folder that cannot be written, a retrying source that speaks on a terminal, every
stale variable named at once, docs that match the tool, a narrow layout for narrow terminals,
completion, --version, short flags, the effective configuration and where it came from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.cli import run_process
from support.terminal import QUICK_CONFIG, clean_env, one_error_line, run_in_pty, work_dir

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
LONG = "gs1:production:nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


def cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 180):
    return run_process(*args, env=env, cwd=cwd, timeout=timeout)


# -- no traceback, no silence -------------------------------------------------------------------


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_fix_build_into_a_folder_that_cannot_be_written_is_one_line_before_any_build(
    work, tmp_path, where
):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = blocker / "dist" if where == "under-a-file" else Path("/proc/elastic-audit-dist")
    r = cli("fix", "build", "1.13.15", "--out", str(out), env=clean_env(tmp_path), cwd=work)
    one_error_line(r, f"--out {out}")
    assert "pip" not in r.stderr  # refused before the (minutes-long) build


def test_every_stale_variable_is_named_in_one_error(work, tmp_path):
    gone = tmp_path / "elastic-audit-gone"
    env = clean_env(
        tmp_path,
        ELASTIC_AUDIT_CONFIG=str(gone / "elastic-audit.toml"),
        FLYTECTL_CONFIG=str(gone / "config.yaml"),
        ELASTIC_AUDIT_AUDIT_LOG=str(gone / "audit.jsonl"),
    )
    r = cli("show", INCIDENT, env=env, cwd=work)
    line = one_error_line(r, "3 variables name files that do not exist")
    assert all(v in line for v in ("ELASTIC_AUDIT_CONFIG=", "FLYTECTL_CONFIG=", "AUDIT_LOG="))
    assert "elastic_audit_deactivate" in line


def test_a_failing_source_says_it_is_retrying_on_a_terminal(work, tmp_path):
    (work / "elastic-audit.toml").write_text(
        QUICK_CONFIG.replace("retries = 0", "retries = 2").replace("timeout = 5", "timeout = 3")
    )
    env = clean_env(
        tmp_path,
        LOKI_ADDR="http://127.0.0.1:9",
        FLYTE_PLATFORM_URL="127.0.0.1:9",
        FLYTE_PLATFORM_INSECURE="True",
    )
    args = ["scan", "--since", "2026-09-10", "--until", "2026-09-11", "--no-progress"]
    out = run_in_pty(args, env, work, 100, both=True)
    assert "elastic-audit: Loki at http://127.0.0.1:9 refused, retrying (1/2)" in out
    assert "elastic-audit: Loki at http://127.0.0.1:9 refused, retrying (2/2)" in out
    assert "elastic-audit: Flyte Admin at 127.0.0.1:9 unavailable, retrying (1/2)" in out
    # piped (a log, a CI job): the one failure line per source, no line per retry
    piped = cli(*args, env=env, cwd=work)
    assert "retrying (" not in piped.stderr and "Loki failed" in piped.stderr


# -- docs that match the tool ---------------------------------------------------------------


def sh_block(page: Path, after: str) -> str:
    """The first ```sh block of `page` after the line containing `after`."""
    text = page.read_text()
    rest = text[text.index(after) :]
    return rest.split("```sh\n", 1)[1].split("```", 1)[0]


def shim(tmp_path: Path) -> Path:
    """A directory with an `elastic-audit` on it that runs this checkout's CLI."""
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "elastic-audit"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -m forensics "$@"\n')
    script.chmod(0o755)
    return bin_dir


def test_the_demo_recipe_in_docs_commands_runs_adds_an_incident_and_deactivates(tmp_path):
    import os
    import subprocess

    recipe = sh_block(DOCS / "commands.md", "`--keep-running` then keeps the sandbox up")
    assert "--add-incident" in recipe and "elastic_audit_deactivate" in recipe
    env = clean_env(tmp_path, AWS_ACCESS_KEY_ID="AKIAUSERSOWNKEY")
    env["PATH"] = f"{shim(tmp_path)}:{env['PATH']}"
    (tmp_path / "home").mkdir()
    script = recipe + 'echo "after: $AWS_ACCESS_KEY_ID ${LOKI_ADDR-unset}"\nwait\n'
    r = subprocess.run(
        ["sh", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=400,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    # the env file holds the environment and the report file the report: not one in the other
    assert json.loads((tmp_path / "demo-report.json").read_text())["summary"]["affected"] == 5
    assert "export LOKI_ADDR=" in (tmp_path / "sandbox.env").read_text()
    assert json.loads((tmp_path / "incident.json").read_text())["verdict"] == "affected"
    added = re.search(r"^gs1:production:(n[0-9a-f]{19})$", r.stdout, re.M)
    assert added, r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("affected"))
    assert added.group(0) in row  # the next scan caught it
    assert r.stdout.rstrip().endswith("after: AKIAUSERSOWNKEY unset")  # the user's own keys back
    assert "Traceback" not in r.stderr
    assert not os.path.exists(
        re.search(r"export ELASTIC_AUDIT_CONFIG=(\S+)", (tmp_path / "sandbox.env").read_text())[1]
    )  # the demo stopped and took its files
