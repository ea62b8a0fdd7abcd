"""What the command line does to the process: the imports kept out of the collector's passes,
and the batch scheduling policy its threads inherit."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

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


_BATCH_PROBE = """
import os, sys, threading
from forensics.cli.process import batch_scheduling
# The policy this command starts under (a child inherits its parent's: this test process is a
# batch job once an in-process command ran), SCHED_OTHER or, as `chrt --idle 0` sets, SCHED_IDLE.
os.sched_setscheduler(0, int(sys.argv[1]), os.sched_param(0))
before = os.sched_getscheduler(0)
ok = batch_scheduling()
seen = []
t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(threading.get_native_id())))
t.start(); t.join()
print(before, ok, os.sched_getscheduler(0), seen[0])
"""


def _probe(policy: int) -> tuple[int, bool, int, int]:
    """In a child started under `policy` (the policy stays with the process that set it):
    its policy before, what batch_scheduling answered, its policy after, a later thread's."""
    before, ok, after, thread = subprocess.run(
        [sys.executable, "-c", _BATCH_PROBE, str(policy)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(before), ok == "True", int(after), int(thread)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH on this system")
def test_batch_scheduling_reaches_the_threads_started_after_it():
    before, ok, after, thread = _probe(os.SCHED_OTHER)
    assert (before, ok) == (os.SCHED_OTHER, True)
    assert after == thread == os.SCHED_BATCH


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this system")
def test_a_policy_the_caller_chose_is_kept():
    before, ok, after, thread = _probe(os.SCHED_IDLE)
    assert before == after == thread == os.SCHED_IDLE
    assert not ok
