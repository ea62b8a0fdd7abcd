"""The reference scenario agrees with the product where it names what the product would create."""

from __future__ import annotations

from forensics.model import ExecutionRef
from forensics.relaunch import relaunch_name
from forensics.sandbox.incident import CHAINED, CHAINED_RELAUNCH, reference_scenario


def test_the_chained_relaunch_carries_the_name_relaunch_gives_it():
    # The sandbox spells the name out so it need not import the relaunch package; a change to
    # relaunch_name would also break exactly-once against relaunches made before it.
    assert CHAINED_RELAUNCH == relaunch_name(ExecutionRef(*CHAINED))
    relaunches = {
        ex.name: ex.reference_execution
        for ex in reference_scenario().executions
        if ex.mode == "RELAUNCH"
    }
    assert relaunches[CHAINED_RELAUNCH] == CHAINED
