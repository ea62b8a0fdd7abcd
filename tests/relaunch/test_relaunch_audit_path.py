"""`relaunch --audit-log` into a folder that does not exist is refused like every other output
path (one line, exit 2, Admin not asked anything, nothing created): a typo must not start a
second audit trail. Only the default log's folder ($XDG_STATE_HOME/elastic-audit) is created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_process
from support.terminal import clean_env, one_error_line, work_dir

pytestmark = pytest.mark.e2e

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


@pytest.mark.parametrize("mode", ["--dry-run", "--yes"])
def test_an_audit_log_in_a_missing_folder_is_refused_before_admin_is_asked(
    box, work, tmp_path, mode
):
    env = box.child_environ(clean_env(tmp_path))
    typo = tmp_path / "audti" / "audit.jsonl"
    before = dict(box.admin.call_counts())
    r = run_process(
        "relaunch", INCIDENT, mode, "-o", "json", "--audit-log", str(typo), env=env, cwd=work
    )
    line = one_error_line(r, f"audit log {typo}: directory {typo.parent} does not exist")
    assert "nothing relaunched" in line and "--audit-log FILE" in line
    assert r.stdout == "" and not typo.parent.exists()
    assert dict(box.admin.call_counts()) == before


def test_the_default_audit_logs_folder_is_still_created(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    r = run_process("relaunch", INCIDENT, "--dry-run", "-o", "json", env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    log = tmp_path / "state" / "elastic-audit" / "audit.jsonl"
    assert json.loads(log.read_text().splitlines()[-1])["action"] == "dry-run"
