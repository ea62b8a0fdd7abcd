"""`relaunch --only-lost`'s options that contradict each other: exit 2 before anything is read."""

from __future__ import annotations

import pytest
from support.cli import run

EX = "gs1:production:azvg5f9v9974m78fvlf7"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--to-version", "v2"], "--only-lost cannot be combined with --to-version"),
        (["--parent"], "--only-lost cannot be combined with --parent"),
        (["--no-overwrite-cache"], "--only-lost cannot be combined with --overwrite-cache"),
    ],
)
def test_only_lost_refuses_options_it_cannot_honour(capsys, extra, said):
    code, _, err = run(["relaunch", EX, "--only-lost", "--dry-run", *extra], capsys)
    assert code == 2 and said in err


def test_both_cache_flags_contradict(capsys):
    code, _, err = run(
        ["relaunch", EX, "--overwrite-cache", "--no-overwrite-cache", "--dry-run"], capsys
    )
    assert code == 2 and "contradict each other" in err
