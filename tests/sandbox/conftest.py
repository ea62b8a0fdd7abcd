"""Fixtures of the sandbox's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from flyteidl.service.admin_pb2_grpc import AdminServiceStub

from forensics.sandbox.admin_server import AdminFaults, AdminServer
from forensics.sandbox.scenario import Scenario


@pytest.fixture
def serve() -> Iterator:
    """Start servers for a test; `serve(scenario, faults)` -> (server, stub)."""
    started: list[tuple[AdminServer, grpc.Channel]] = []

    def start(scenario: Scenario, faults: AdminFaults | None = None):
        server = AdminServer(scenario, faults)
        channel = grpc.insecure_channel(server.start())
        started.append((server, channel))
        return server, AdminServiceStub(channel)

    yield start
    for server, channel in started:
        channel.close()
        server.stop()
