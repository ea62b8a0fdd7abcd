"""The sandbox stack: three servers on loopback, an environment that reaches them, a clean stop."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import datetime, timezone

import pytest
import requests
from flytekit.clients.friendly import SynchronousFlyteClient
from flytekit.configuration import Config, PlatformConfig
from flytekit.models.core.execution import WorkflowExecutionPhase
from flytekit.models.core.identifier import WorkflowExecutionIdentifier

from forensics.model import to_ns
from forensics.sandbox.s3_server import S3Faults, S3Rule
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxLogLine,
    SandboxNode,
    SandboxObject,
    SandboxTask,
    Scenario,
)
from forensics.sandbox.stack import Faults, sandbox
from forensics.sources.storage import ObjectStore

UTC = timezone.utc
SIGNAL = datetime(2026, 9, 10, 19, 45, 22, tzinfo=UTC)
SUCCESS = datetime(2026, 9, 10, 19, 45, 29, tzinfo=UTC)
NAME = "azvg5f9v9974m78fvlf7"
CHECKPOINT = "s3://exa-models/checkpoints/gs1-distill/bigmodel-c42-nem1b-a2-lr5em5-v1/"


def _scenario() -> Scenario:
    task = SandboxTask("gs1", "production", "train", "v1")
    attempt = SandboxAttempt(0, "SUCCEEDED", SIGNAL, SUCCESS, [f"{NAME}-n0-0"], task)
    ex = SandboxExecution("gs1", "production", NAME, "SUCCEEDED", SIGNAL, SUCCESS)
    ex.nodes.append(SandboxNode("n0", "SUCCEEDED", [attempt]))
    line = SandboxLogLine(
        to_ns(SIGNAL),
        {"namespace": "gs1-production", "pod": f"{NAME}-n0-0", "container": f"{NAME}-n0-0"},
        "Received 15 death signal, shutting down workers",
    )
    return Scenario(
        executions=[ex],
        log_lines=[line],
        objects=[SandboxObject("exa-models", "checkpoints/older-run/step-1.pt", b"w", SIGNAL)],
        buckets={"exa-models"},
        tasks=[task],
    )


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("http://").rstrip("/").rpartition(":")
    return host, int(port)


def _refused(address: str) -> bool:
    try:
        socket.create_connection(_host_port(address), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _addresses(box) -> list[str]:
    return [box.env["LOKI_ADDR"], box.env["FLYTE_PLATFORM_URL"], box.env["AWS_ENDPOINT_URL_S3"]]


@pytest.mark.integration
def test_environment_alone_points_every_client_at_the_sandbox(monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "production-readonly")  # must not leak into the sandbox
    with sandbox(_scenario()) as box, box.apply_env():
        assert all(host == "127.0.0.1" for host, _ in map(_host_port, _addresses(box)))

        store = ObjectStore.default()
        assert store.endpoint == box.s3.url
        assert store.list_prefix(CHECKPOINT).state == "empty"
        assert store.list_prefix("s3://exa-models/checkpoints/older-run").objects == 1

        ready = requests.get(f"{os.environ['LOKI_ADDR']}/ready", timeout=10)
        assert ready.status_code == 200

        platform = Config.auto().platform
        assert (platform.endpoint, platform.insecure) == (box.env["FLYTE_PLATFORM_URL"], True)
        execution = SynchronousFlyteClient(platform).get_execution(
            WorkflowExecutionIdentifier("gs1", "production", NAME)
        )
        assert execution.id.name == NAME
    assert os.environ["AWS_PROFILE"] == "production-readonly"


@pytest.mark.e2e
def test_flytectl_config_file_alone_reaches_the_sandbox_admin():
    with sandbox(_scenario()) as box, box.apply_env():
        env = box.child_environ()
        del env["FLYTE_PLATFORM_URL"], env["FLYTE_PLATFORM_INSECURE"]
        # A fresh process, as a user's shell would run the CLI: flytekit caches its config-file
        # search (get_config_file is lru_cached and first called when flytekit is imported), so
        # FLYTECTL_CONFIG set after the import is not seen in this process.
        probe = (
            "from flytekit.configuration import PlatformConfig as P; "
            "p = P.auto(); print(p.endpoint, p.insecure)"
        )
        shown = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        assert shown == [box.env["FLYTE_PLATFORM_URL"], "True"]
        platform = PlatformConfig.auto(os.environ["FLYTECTL_CONFIG"])
        execution = SynchronousFlyteClient(platform).get_execution(
            WorkflowExecutionIdentifier("gs1", "production", NAME)
        )
        assert execution.closure.phase == WorkflowExecutionPhase.SUCCEEDED


@pytest.mark.integration
def test_child_environment_hides_settings_that_point_elsewhere(monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "production-readonly")
    monkeypatch.setenv("LOKI_BEARER_TOKEN", "prod-token")
    monkeypatch.setenv("PATH", "/usr/bin")
    with sandbox(_scenario()) as box:
        env = box.child_environ()
    assert "AWS_PROFILE" not in env and "LOKI_BEARER_TOKEN" not in env
    assert env["PATH"] == "/usr/bin"
    assert env["AWS_ENDPOINT_URL_S3"] == box.env["AWS_ENDPOINT_URL_S3"]


@pytest.mark.integration
def test_apply_env_restores_the_environment(monkeypatch):
    monkeypatch.setenv("LOKI_ADDR", "https://loki.example.com")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    before = dict(os.environ)
    with sandbox(_scenario()) as box:
        with box.apply_env():
            assert os.environ["LOKI_ADDR"] == box.env["LOKI_ADDR"]
        assert dict(os.environ) == before


@pytest.mark.integration
def test_all_servers_are_stopped_after_the_block():
    with sandbox(_scenario()) as box:
        addresses = _addresses(box)
        assert not any(_refused(a) for a in addresses)
        config = box.env["FLYTECTL_CONFIG"]
    assert all(_refused(a) for a in addresses)
    assert not os.path.exists(config)


@pytest.mark.integration
def test_all_servers_are_stopped_when_interrupted():
    with pytest.raises(KeyboardInterrupt), sandbox(_scenario()) as box:
        addresses = _addresses(box)
        raise KeyboardInterrupt
    assert all(_refused(a) for a in addresses)
    with sandbox(_scenario()):  # and the ports and moto's state are free for the next one
        pass


@pytest.mark.integration
def test_faults_reach_the_s3_server():
    faults = Faults(s3=S3Faults(access_denied=[S3Rule(bucket="exa-models")]))
    with sandbox(_scenario(), faults) as box, box.apply_env():
        listing = ObjectStore.default().list_prefix(CHECKPOINT)
        assert (listing.state, listing.reason) == ("unknown", "forbidden (403 AccessDenied)")
