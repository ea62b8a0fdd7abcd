"""A crash (an exception the tool did not expect) is exit 70 with its traceback, secrets masked:
never Python's own 1, which a scan uses for "findings", and never an all-clear from the demo."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from support.cli import run, run_process

SECRET = "s3cr3t-token-value-1234"

# Loaded at the start of every Python started with this directory on PYTHONPATH (the CLI and the
# demo's scan child): the scan's run raises, carrying a credential in its message.
CRASH = textwrap.dedent(
    f"""
    import forensics.scan.run as run

    def crash(self, *args, **kwargs):
        raise RuntimeError("boom with Authorization: Bearer {SECRET}")

    run.ScanRun.run = crash
    """
)


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(CRASH)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "LOKI_BEARER_TOKEN": SECRET}


@pytest.mark.e2e
def test_a_crash_in_the_demos_scan_is_not_an_all_clear(tmp_path: Path) -> None:
    p = run_process("demo", "-o", "json", env=_env(tmp_path))
    assert p.returncode == 70, p.stderr[-2000:]
    assert p.stdout == ""
    assert "Traceback" in p.stderr and "RuntimeError" in p.stderr
    assert "elastic-audit: internal error (RuntimeError)" in p.stderr
    assert SECRET not in p.stderr


def test_a_crash_is_exit_70_with_its_traceback_masked(monkeypatch, capsys) -> None:
    def crash(since, until):
        raise RuntimeError(f"boom with Authorization: Bearer {SECRET}")

    monkeypatch.setenv("LOKI_BEARER_TOKEN", SECRET)
    monkeypatch.setattr("forensics.cli.scan.parse_window", crash)
    code, out, err = run(["scan", "--since", "1h"], capsys)
    assert code == 70
    assert out == ""
    assert "Traceback" in err and "in crash" in err
    assert err.rstrip().splitlines()[-1] == (
        "elastic-audit: internal error (RuntimeError): a bug in elastic-audit; the traceback "
        "above belongs in its report. Nothing here is a result."
    )
    assert SECRET not in err
