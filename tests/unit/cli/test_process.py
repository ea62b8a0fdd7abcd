"""What the command line does to the process: the imports kept out of the collector's passes."""

from __future__ import annotations

import gc

from forensics.cli.process import freeze_imports


def _collected(obj: object) -> bool:
    """Whether the collector's passes see `obj` (a frozen object is in none of its generations)."""
    return any(o is obj for o in gc.get_objects())


def test_imports_are_frozen_once_per_process():
    made_before = []
    freeze_imports()
    assert gc.get_freeze_count() > 0
    if _collected(made_before):  # frozen earlier in this test process, by another command
        assert not _collected(freeze_imports)  # the imports were, though
    made_later = []  # a scan's objects: collected as usual, never frozen by a second call
    freeze_imports()
    assert _collected(made_later)
