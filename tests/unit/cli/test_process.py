"""What the command line does to the process: the imports kept out of the collector's passes."""

from __future__ import annotations

import gc

from forensics.cli.process import freeze_imports


def test_imports_are_frozen_once_per_process():
    freeze_imports()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    made_later = [[] for _ in range(1000)]  # a scan's objects: collected as usual, never frozen
    freeze_imports()
    assert gc.get_freeze_count() == frozen and gc.is_tracked(made_later[0])
