"""`relaunch`, `config` and `show` fit a narrow terminal as `scan` does: every line within the width
but for an identifier longer than the room (whole, alone at the end of its line), free text
wrapped at spaces into readable lines, never a word per line; a block per row where the table
cannot be read at that width. Through a pseudo-terminal of 60 and 80 columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.terminal import clean_env, rows_fit, run_in_pty, work_dir

pytestmark = pytest.mark.e2e

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
LONG = "gs1:production:nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return work_dir(tmp_path)


def _no_word_per_line(text: str) -> None:
    """Free text is read in lines of several words: no run of three one-word lines."""
    lone = 0
    for line in text.splitlines():
        lone = lone + 1 if len(line.split()) == 1 and line.startswith(" ") else 0
        assert lone < 3, text


@pytest.mark.parametrize("columns", [60, 80])
def test_relaunch_dry_run_table_fits_a_narrow_terminal(box, work, tmp_path, columns):
    env = box.child_environ(clean_env(tmp_path))
    out = run_in_pty(["relaunch", LONG, INCIDENT, "--dry-run", "-o", "table"], env, work, columns)
    rows_fit(out, columns)
    _no_word_per_line(out)
    assert LONG in out and INCIDENT in out  # identifiers whole, in the form relaunch takes
    assert out.count("dry-run") == 2


@pytest.mark.parametrize("columns", [60, 80])
def test_config_table_fits_a_narrow_terminal(box, work, tmp_path, columns):
    env = box.child_environ(clean_env(tmp_path))
    out = run_in_pty(["config", "-o", "table"], env, work, columns)
    rows_fit(out, columns)
    _no_word_per_line(out)
    assert "loki.url" in out and box.env["LOKI_ADDR"] in out
    assert "default (follows the label names)" in out  # a phrase, not a word per line


@pytest.mark.parametrize("columns", [60, 80])
def test_show_timeline_fits_a_narrow_terminal(box, work, tmp_path, columns):
    # At 60 columns the table left the event text 20: a pod's log line came out a word a line.
    env = box.child_environ(clean_env(tmp_path))
    out = run_in_pty(["show", INCIDENT, "-o", "table"], env, work, columns)
    rows_fit(out, columns)
    _no_word_per_line(out)
    assert ("time (UTC)" in out) is (columns == 80)  # 80 keeps the table; 60 a block an event
    assert "Received 15 death signal, shutting down workers" in out or columns == 80
    assert INCIDENT in out and "verdict: AFFECTED" in out.replace("\n", " ")


def test_a_wide_terminal_keeps_the_tables(box, work, tmp_path):
    env = box.child_environ(clean_env(tmp_path))
    out = run_in_pty(["relaunch", INCIDENT, "--dry-run", "-o", "table"], env, work, 200)
    assert out.splitlines()[0].split() == ["execution", "status", "relaunched", "as", "reason"]
    out = run_in_pty(["config", "-o", "table"], env, work, 200)
    assert out.splitlines()[0].split() == ["setting", "value", "from"]
