"""What the command line does to the process: no full garbage-collector pass during a command
(and one between watch's runs), and the batch scheduling policy its threads inherit."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from forensics.cli import watch
from forensics.config import Settings
from forensics.guard.run import GuardOptions, Terminated
from forensics.scan.scope import ScanScope

_COLLECTOR_PROBE = """
import gc, sys
from forensics.cli.process import no_full_collections
if sys.argv[1] == "off":
    no_full_collections()
passes = [0, 0, 0]
freed = [0]
def count(phase, info):
    if phase == "stop":
        passes[info["generation"]] += 1
        freed[0] += info["collected"]
gc.callbacks.append(count)
kept = []
for i in range(300_000):
    kept.append([i])  # what a scan keeps until its report
    if i % 100 == 0:
        loop = []
        loop.append(loop)  # and a little cyclic garbage
print(*passes, freed[0])
"""


def _passes(full: str) -> tuple[int, int, int, int]:
    """Per generation, the collector's passes while a child keeps 300,000 objects, and the
    objects they freed."""
    out = subprocess.run(
        [sys.executable, "-c", _COLLECTOR_PROBE, full], capture_output=True, text=True, check=True
    ).stdout.split()
    young, middle, old, freed = map(int, out)
    return young, middle, old, freed


@pytest.mark.e2e
def test_a_command_makes_no_full_pass_and_still_frees_its_cyclic_garbage():
    assert _passes("on")[2] > 0  # the default: the kept objects walked again and again
    young, middle, old, freed = _passes("off")
    assert old == 0
    assert young > 0 and middle > 0
    assert freed >= 2_900  # the 3,000 self-referencing lists, by the young passes


def test_watch_collects_in_full_between_its_runs(monkeypatch):
    events: list[str] = []

    def one_run(*args: object) -> GuardOptions:
        events.append("run")
        return args[3]  # the options, as a run returns them for the next

    def asleep(seconds: float) -> None:
        if events.count("run") == 2:
            raise Terminated  # SIGTERM while asleep after the second run
        events.append("sleep")

    def full_pass(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            events.append("full pass")

    monkeypatch.setattr(watch, "_run", one_run)
    monkeypatch.setattr(watch.time, "sleep", asleep)
    options = GuardOptions(state="state.json")
    gc.callbacks.append(full_pass)
    try:
        assert watch._loop(Settings(), ScanScope(), options, "1d", timedelta(hours=1), None) == 0
    finally:
        gc.callbacks.remove(full_pass)
    assert events == ["run", "sleep", "full pass", "run"]


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


@pytest.mark.e2e
@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH on this system")
def test_batch_scheduling_reaches_the_threads_started_after_it():
    before, ok, after, thread = _probe(os.SCHED_OTHER)
    assert (before, ok) == (os.SCHED_OTHER, True)
    assert after == thread == os.SCHED_BATCH


@pytest.mark.e2e
@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this system")
def test_a_policy_the_caller_chose_is_kept():
    before, ok, after, thread = _probe(os.SCHED_IDLE)
    assert before == after == thread == os.SCHED_IDLE
    assert not ok


_LEAVE_PROBE = """
import atexit, sys, threading, time
from forensics.cli.process import leave

class Torn:
    def __del__(self):
        sys.__stderr__.write("torn down\\n")

TORN = Torn()  # a module global: freed in the interpreter's teardown, if there is one
atexit.register(lambda: sys.__stderr__.write("exit handler\\n"))
sys.stdout.write("the report, not yet flushed")
if sys.argv[1] == "thread":  # not a daemon: Python waits for it, and so does the command
    threading.Thread(target=lambda: (time.sleep(0.3), sys.__stderr__.write("thread done\\n"))).start()
leave(int(sys.argv[2]))
"""


def _leave(case: str, code: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LEAVE_PROBE, case, str(code)], capture_output=True, text=True
    )


@pytest.mark.e2e
def test_a_command_ends_without_the_teardown_but_with_its_exit_handlers_and_output():
    p = _leave("alone", 3)
    assert p.returncode == 3
    assert p.stdout == "the report, not yet flushed"
    assert p.stderr == "exit handler\n"  # and no "torn down": the teardown was skipped


@pytest.mark.e2e
def test_a_thread_still_running_is_waited_for_as_python_would():
    p = _leave("thread", 0)
    assert p.returncode == 0
    assert p.stdout == "the report, not yet flushed"
    assert p.stderr.splitlines() == ["thread done", "exit handler", "torn down"]
