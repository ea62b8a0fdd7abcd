"""docs/library.md's example, run as its reader runs it: against `elastic-audit demo
--keep-running`, with the environment the demo writes; it must print what the page shows."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys

import pytest
from support.cli import CLI
from support.paths import DOCS

pytestmark = pytest.mark.e2e

DOC = DOCS / "library.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```$", DOC.read_text(), re.S | re.M)


def test_the_example_prints_what_the_page_shows(tmp_path):
    example, shown = blocks("python")[0], blocks("text")[0]
    (tmp_path / "example.py").write_text(example)
    proc = subprocess.Popen(
        [*CLI, "demo", "--keep-running", "--env-file", "sandbox.env", "--no-progress"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("Sandbox running"):
                break
        run = subprocess.run(
            ["bash", "-c", f". ./sandbox.env && {shlex.quote(sys.executable)} example.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == shown
