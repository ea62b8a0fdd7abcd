"""Flyte Admin's endpoint as people mistype it at 3 a.m.: a console URL (`https://…`) is refused
as configuration, in one line, before any call, rather than looked up as a host name."""

from __future__ import annotations

import pytest
from flytekit.configuration import PlatformConfig

from forensics.errors import ConfigError
from forensics.sources.admin import AdminClient


@pytest.mark.parametrize(
    "endpoint", ["https://flyte.example.com", "HTTP://localhost:30080", "https://flyte:443/console"]
)
def test_a_web_url_is_refused_as_configuration(endpoint: str) -> None:
    with pytest.raises(ConfigError) as info:
        AdminClient(PlatformConfig(endpoint=endpoint, insecure=True))
    message = str(info.value)
    assert "\n" not in message and "host:port" in message and "http(s)://" in message


@pytest.mark.parametrize("endpoint", ["flyte.example.com:443", "dns:///flyte.example.com:443"])
def test_grpc_targets_are_taken(endpoint: str) -> None:
    AdminClient(PlatformConfig(endpoint=endpoint, insecure=True)).close()
