"""An AdminClient around a flytekit client the caller built (against the loopback sandbox
Admin: the real client, the real wire)."""

from __future__ import annotations

import pytest
from flytekit.clients.friendly import SynchronousFlyteClient
from flytekit.configuration import PlatformConfig

from forensics.errors import SourceError
from forensics.model import ExecutionRef
from forensics.sandbox.admin_server import AdminFaults, AdminServer
from forensics.sandbox.incident import reference_scenario
from forensics.sources.admin import AdminClient

pytestmark = pytest.mark.integration

INCIDENT = ExecutionRef("gs1", "production", "azvg5f9v9974m78fvlf7")


def test_an_injected_client_is_used_and_left_open():
    server = AdminServer(reference_scenario())
    try:
        flyte = SynchronousFlyteClient(PlatformConfig(endpoint=server.start(), insecure=True))
        admin = AdminClient.over(flyte, retries=0)
        assert admin.get_execution(INCIDENT).ref == INCIDENT
        assert admin.calls == {"GetExecution": 1}
        admin.close()  # the caller's channel: still open
        assert "gs1" in AdminClient.over(flyte).project_domains()
        assert server.call_counts()["GetExecution"] == 1
        flyte._channel.close()
    finally:
        server.stop()


def test_an_injected_client_is_shown_by_its_public_url_alone():
    flyte = SynchronousFlyteClient(PlatformConfig(endpoint="dns:///admin:81", insecure=True))
    try:
        admin = AdminClient.over(flyte)
        assert admin.endpoint == "dns:///admin:81"
        assert (
            repr(admin)
            == "AdminClient(endpoint='dns:///admin:81', over a caller's flytekit client)"
        )
    finally:
        flyte._channel.close()


def test_an_injected_clients_calls_carry_the_deadline():
    # flytekit's own channel applies the deadline `scoped_grpc_deadline` sets (FlytekitCalls).
    server = AdminServer(reference_scenario(), AdminFaults(latency_by_method={"GetExecution": 0.5}))
    try:
        flyte = SynchronousFlyteClient(PlatformConfig(endpoint=server.start(), insecure=True))
        admin = AdminClient.over(flyte, timeout=0.1, retries=0)
        with pytest.raises(SourceError) as info:
            admin.get_execution(INCIDENT)
        assert "DEADLINE_EXCEEDED" in info.value.cause
    finally:
        server.stop()
