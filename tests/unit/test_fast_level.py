"""The fast level's guard (support/levels.py): an unmarked test that starts a process or a
server fails, saying which marker it needs."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from support.levels import NotFastLevel, guard


def test_this_test_runs_guarded(request: pytest.FixtureRequest) -> None:
    assert guard.active == request.node.nodeid


def test_a_process_is_refused_naming_the_e2e_marker() -> None:
    with (
        guard.expecting_refusals() as refused,
        pytest.raises(NotFastLevel, match=r"pytest\.mark\.e2e"),
    ):
        subprocess.run(["true"], check=False)
    assert len(refused) == 1 and "started a process" in refused[0]


def test_a_fork_is_refused() -> None:
    with guard.expecting_refusals() as refused, pytest.raises(NotFastLevel):
        pid = os.fork()
        if pid == 0:  # only when the guard let the fork through: the child leaves at once
            os._exit(0)
        os.waitpid(pid, 0)
    assert refused


def test_a_listening_socket_is_refused_naming_the_integration_marker() -> None:
    with guard.expecting_refusals() as refused, socket.socket() as s:
        with pytest.raises(NotFastLevel, match=r"pytest\.mark\.integration"):
            s.bind(("127.0.0.1", 0))
    assert "bound a socket" in refused[0]


def test_a_grpc_server_is_refused() -> None:
    with guard.expecting_refusals() as refused, pytest.raises(NotFastLevel):
        grpc.server(ThreadPoolExecutor(1))
    assert "gRPC server" in refused[0]


def test_a_refusal_swallowed_by_the_code_under_test_is_still_kept() -> None:
    with guard.expecting_refusals() as refused:
        try:
            subprocess.run(["true"], check=False)
        except Exception:
            pass  # what a broad `except` in the code under test would do
    assert refused  # conftest fails the test on what `seen` holds


@pytest.mark.integration
def test_a_marked_test_runs_unguarded() -> None:
    assert guard.active is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))


def test_a_process_a_module_runs_as_it_is_imported_is_the_librarys_not_the_tests(tmp_path):
    (tmp_path / "probing_on_import.py").write_text(
        "import subprocess\nsubprocess.run(['true'], check=True)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with guard.expecting_refusals() as refused:
            importlib.import_module("probing_on_import")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("probing_on_import", None)
    assert refused == []
