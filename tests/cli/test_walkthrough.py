"""docs/walkthrough.md equals the tool: every command it shows, run in its order against a fresh
demo sandbox on a terminal of its width, prints what the page shows (tests/support/walkthrough.py;
normalised only for ports, temporary paths, durations and what the demo derives from now).

When the tool's output changes on purpose, regenerate the page's outputs with
`.venv/bin/python tests/support/walkthrough.py --update` and read the diff (tests/README.md).
"""

from __future__ import annotations

import pytest
from support import walkthrough

# Blocks the page marks as not run, and why: each needs what a test may not use.
NOT_RUN = {
    "it downloads the sdist from PyPI",
    "it downloads the sdist from PyPI and builds for about 40 s",
    "it reads the sdist downloaded from PyPI above",
}


@pytest.mark.e2e
def test_every_command_the_walkthrough_shows_prints_what_it_shows():
    page = walkthrough.PAGE.read_text()
    _, diff, skipped = walkthrough.run_page(page)
    assert not diff, (
        "docs/walkthrough.md differs from the run (regenerate: "
        ".venv/bin/python tests/support/walkthrough.py --update):\n" + "\n".join(diff)
    )
    assert {reason for _, reason in skipped} == NOT_RUN


def test_the_page_shows_a_command_in_every_section_it_runs():
    # the checker itself: it finds the blocks, reads the directives, and runs most of the page
    blocks = walkthrough.blocks(walkthrough.PAGE.read_text().split("\n"))
    commands = [c.line for b in blocks if b.not_run is None for c in b.commands]
    for command in ("scan", "show", "relaunch", "pin-bump", "fix show", "fix check", "demo"):
        assert any(c.startswith(f"elastic-audit {command}") for c in commands), command
    assert any(b.after_stop for b in blocks) and any(b.notify for b in blocks)
