"""The enum numbers the filter language writes are flyteidl's own."""

from __future__ import annotations

from flyteidl.admin import execution_pb2

from forensics.sources.admin_filters import EXECUTION_MODES, EXECUTION_STATES, any_state, mode_is


def test_the_execution_modes_are_flyteidls():
    assert EXECUTION_MODES == dict(execution_pb2.ExecutionMetadata.ExecutionMode.items())
    assert mode_is("RELAUNCH") == "eq(mode,3)"


def test_the_execution_states_are_flyteidls():
    assert EXECUTION_STATES == dict(execution_pb2.ExecutionState.items())
    assert any_state() == "value_in(state,0;1)"
