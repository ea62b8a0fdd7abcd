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
from support import paths
from support.cli import run_process
from support.scan import WINDOW
from support.terminal import QUICK_CONFIG, clean_env, one_error_line, rows_fit, run_in_pty, work_dir

ROOT = paths.ROOT
DOCS = ROOT / "docs"
INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
LONG = "gs1:production:nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


def cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 180):
    return run_process(*args, env=env, cwd=cwd, timeout=timeout)


# -- no traceback, no silence -------------------------------------------------------------------


@pytest.mark.e2e
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


@pytest.mark.e2e
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


@pytest.mark.e2e
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


@pytest.mark.e2e
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
    report = json.loads((tmp_path / "demo-report.json").read_text())
    assert any(
        f["execution"]["name"] == "azvg5f9v9974m78fvlf7" and f["verdict"] == "affected"
        for f in report["findings"]
    )
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


def _commands():
    """(path, click command) for every command of the tool, `fix` subcommands included."""
    import typer

    from forensics.cli import app

    def walk(c, path):
        if hasattr(c, "commands"):
            for name, sub in c.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, c

    return list(walk(typer.main.get_command(app), []))


def _section(page: str, command: str) -> str:
    m = re.search(rf"^## {re.escape(command)}\b.*?(?=^## |\Z)", page, re.M | re.S)
    assert m, f"docs/commands.md has no section for {command}"
    return m.group(0)


def test_every_flag_and_output_format_of_every_command_is_in_the_docs():
    commands = (DOCS / "commands.md").read_text()
    reference = commands + (DOCS / "configuration.md").read_text()
    reference += (DOCS / "deployment.md").read_text()
    missing = []
    for path, command in _commands():
        section = _section(commands, path[0])
        for p in command.params:
            for opt in p.opts + p.secondary_opts:
                if opt.startswith("--") and opt not in ("--help", "--output"):
                    if not re.search(re.escape(opt) + r"(?![\w-])", reference):
                        missing.append(f"{' '.join(path)} {opt}")
            if p.name == "output":
                synopsis = next(
                    (ln for ln in section.splitlines() if ln.startswith(f"elastic-audit {' '.join(path)} ")),
                    section,
                )  # fmt: skip
                text = synopsis if len(path) > 1 else section
                for choice in p.metavar.split("|"):
                    if not re.search(rf"-o [\w|]*\b{choice}\b", text):
                        missing.append(f"{' '.join(path)} -o {choice}")
    assert missing == []


@pytest.mark.e2e
def test_every_environment_variable_the_tool_reads_is_in_docs_configuration():
    import subprocess

    code = subprocess.run(
        ["grep", "-rhoE", r"(^|[^_A-Z])ELASTIC_AUDIT_[A-Z_]*[A-Z]", str(ROOT / "forensics")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    names = {m for m in re.findall(r"ELASTIC_AUDIT_[A-Z_]*[A-Z]", code)}
    page = (DOCS / "configuration.md").read_text()
    assert {"ELASTIC_AUDIT_AUDIT_LOG", "ELASTIC_AUDIT_CONFIG"} <= names
    assert sorted(n for n in names if f"`{n}`" not in page) == []


def test_the_docs_describe_the_fix_the_tool_writes():
    patch = (ROOT / "forensics" / "plugin_fix" / "data" / "kfpytorch-signal.patch").read_text()
    assert "raise SystemExit(128 + e.sigval)" in patch  # the default end of a signalled attempt
    for page in ("commands.md", "verdicts.md"):
        text = " ".join((DOCS / page).read_text().split())
        assert "`SystemExit(128 + signal)`" in text, page
        # FlyteRecoverableException only for multi-node tasks with error aggregation
        for m in re.finditer(r"FlyteRecoverableException", text):
            around = text[max(0, m.start() - 300) : m.end() + 300]
            assert "aggregation" in around, (page, around)


# -- narrow terminals ---------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("columns", [60, 80, 100])
def test_a_narrow_terminal_gets_a_block_per_finding_with_identifiers_whole(
    box, work, tmp_path, columns
):
    env = box.child_environ(clean_env(tmp_path))
    out = run_in_pty(["scan", *WINDOW, "--no-progress"], env, work, columns)
    rows_fit(out, columns)
    lines = out.splitlines()
    heads = [ln for ln in lines if ln.startswith(("affected  ", "suspected  "))]
    assert len(heads) == 6 and f"affected  {LONG}" in heads  # one block per finding
    assert "  checkpoint    EMPTY" in lines
    assert len(lines) < 50  # was five lines a finding, the table folded at every column
    # -o wide: today's table whatever the width (one row per finding, past the edge)
    wide = run_in_pty(["scan", *WINDOW, "--no-progress", "-o", "wide"], env, work, columns)
    assert re.search(r"(?m)^verdict +execution +node", wide)
    # piped: the table, one line per finding, as before (tests/golden/scan_table.txt)
    piped = cli("scan", *WINDOW, "-o", "table", env=env, cwd=work)
    assert re.search(r"(?m)^verdict +execution +node", piped.stdout)


# -- conventions people bring -------------------------------------------------------------------


@pytest.mark.e2e
def test_version_names_flytekit_the_plugin_torch_and_python(work, tmp_path):
    import platform
    from importlib.metadata import version

    r = cli("--version", env=clean_env(tmp_path), cwd=work)
    assert r.returncode == 0
    line = r.stdout.strip()
    assert line.startswith("elastic-audit ")
    assert f"flytekit {version('flytekit')}" in line and f"torch {version('torch')}" in line
    assert f"Python {platform.python_version()}" in line


@pytest.mark.e2e
def test_shell_completion_completes_commands_and_flags(work, tmp_path):
    env = clean_env(tmp_path, _ELASTIC_AUDIT_COMPLETE="complete_bash")
    env.update(COMP_WORDS="elastic-audit sc", COMP_CWORD="1")
    assert cli(env=env, cwd=work).stdout.split() == ["scan"]
    env.update(COMP_WORDS="elastic-audit relaunch --dry", COMP_CWORD="2")
    assert cli(env=env, cwd=work).stdout.split() == ["--dry-run"]
    # --show-completion prints the script for the shell it runs in (typer detects it from the
    # parent processes): run from bash, as a user types it
    import shlex
    import subprocess

    from support.cli import CLI

    # (a second command keeps bash from exec'ing python in its place: bash stays the parent)
    line = " ".join(shlex.quote(a) for a in CLI) + " --show-completion; exit $?"
    shown = subprocess.run(
        ["bash", "-c", line], env=clean_env(tmp_path), cwd=work, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert "_ELASTIC_AUDIT_COMPLETE=complete_bash" in shown.stdout, shown.stderr


@pytest.mark.e2e
def test_p_and_d_short_flags_as_flytectl_spells_them(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    r = cli("show", "azvg5f9v9974m78fvlf7", "-p", "gs1", "-d", "production", "-o", "json",
            env=env, cwd=work)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "affected"
    s = cli("scan", *WINDOW, "-p", "gs1", "-d", "development", "-o", "json", env=env, cwd=work)
    names = {f["execution"]["name"] for f in json.loads(s.stdout)["findings"]}
    assert names == {"c3p8r2w6y1t5u9e4o7i0"}


@pytest.mark.e2e
def test_config_prints_each_effective_value_and_its_origin_and_never_a_secret(box, work, tmp_path):
    (work / "elastic-audit.toml").write_text(
        QUICK_CONFIG + '[scan]\nworkers = 3\n'
    )  # fmt: skip
    env = box.child_environ(clean_env(tmp_path))
    env.update(
        LOKI_BEARER_TOKEN="loki-token-do-not-print",
        ELASTIC_AUDIT_NOTIFY="https://hooks.slack.com/services/T0/B0/xoxsecretpath",
    )
    r = cli("config", "--loki-url", "http://loki.example.com:3100", "-o", "json", env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["loki.url"] == {"value": "http://loki.example.com:3100", "from": "--loki-url"}
    assert doc["loki.bearer_token"] == {"value": "***", "from": "LOKI_BEARER_TOKEN"}
    assert doc["loki.retries"]["from"] == "[loki] retries in elastic-audit.toml"
    assert doc["loki.shard"] == {"value": "24h", "from": "default"}
    assert doc["workers"] == {"value": "3", "from": "[scan] workers in elastic-audit.toml"}
    assert doc["flyte.endpoint"]["value"] == box.env["FLYTE_PLATFORM_URL"]
    assert doc["flyte.endpoint"]["from"] == "FLYTE_PLATFORM_URL"
    assert doc["s3.endpoint"] == {
        "value": box.env["AWS_ENDPOINT_URL_S3"], "from": "AWS_ENDPOINT_URL_S3"
    }  # fmt: skip
    assert doc["s3.credentials"]["value"] == "access key ***, secret ***"
    for secret in ("loki-token-do-not-print", "xoxsecretpath", box.env["AWS_ACCESS_KEY_ID"],
                   box.env["AWS_SECRET_ACCESS_KEY"]):  # fmt: skip
        assert secret not in r.stdout + r.stderr
    table = cli("config", env=env, cwd=work).stdout  # piped: json by default, as every command
    assert json.loads(table)["checkpoints.input"]["value"] == "checkpoint_dir"


@pytest.mark.e2e
def test_relaunch_results_link_the_new_execution_and_the_plan_is_data(box, work, tmp_path):
    (work / "elastic-audit.toml").write_text(
        QUICK_CONFIG.replace("[flyte]\n", '[flyte]\nconsole_url = "https://flyte.example.com/console"\n')
    )  # fmt: skip
    env = box.child_environ(clean_env(tmp_path))
    already = "gs1:development:c3p8r2w6y1t5u9e4o7i0"  # relaunched before: nothing is sent
    r = cli("relaunch", already, "--yes", "-o", "json", "--audit-log", str(tmp_path / "a.jsonl"),
            env=env, cwd=work)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)[0]
    assert out["status"] == "already-relaunched"
    new = out["relaunched_as"]
    assert out["console_url"] == (
        "https://flyte.example.com/console/projects/gs1/domains/development/executions/"
        + new["name"]
    )
    plan = out["plan"]
    assert plan["existing_execution"] == new and plan["refusal"] is None
    d = cli("relaunch", INCIDENT, "--dry-run", "-o", "json", "--audit-log",
            str(tmp_path / "a.jsonl"), env=env, cwd=work)  # fmt: skip
    plan = json.loads(d.stdout)[0]["plan"]
    assert plan["bug_status"] in ("yes", "likely", "unknown")
    assert plan["overwrite_cache"] is False  # nothing cacheable at or after the lost node
    assert plan["checkpoint_state"] == "empty" and plan["checkpoint_objects"] == 0
    assert plan["checkpoint_uri"].startswith("s3://exa-models/checkpoints/")
    t = cli("relaunch", already, "--yes", "-o", "table", "--audit-log", str(tmp_path / "a.jsonl"),
            env=env, cwd=work)  # fmt: skip
    assert "console: https://flyte.example.com/console/projects/gs1/domains/development" in t.stdout
