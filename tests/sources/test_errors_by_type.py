"""Each client's real failure modes, met on loopback, mapped by type to one FailureKind, and the
likely-cause line the CLI prints for the gap they leave.

The failures are real: a closed port, a port that accepts and never answers, a port whose
accept queue is full (a connect that times out), an unresolvable host, and small HTTP servers
answering 401, 429, 500, a Loki 504 at its query_timeout, a 200 that is not JSON; the sandbox
Admin's injected statuses; moto's S3 behind the sandbox's faults.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import boto3
import grpc
import pytest
from botocore.config import Config
from flytekit.configuration import PlatformConfig
from support.answering import answering
from support.cli import run, use_sandbox
from support.scan import CONFIG

from forensics.cli.common import report_failures
from forensics.config import LokiSettings
from forensics.errors import FailureKind, SourceError
from forensics.model import UTC, ExecutionRef, Gap, ShardRead, Window
from forensics.retry import RetryPolicy
from forensics.sandbox.admin_server import AdminFaults, AdminServer
from forensics.sandbox.loki_server import FaultRule, LokiFaults
from forensics.sandbox.scenario import Scenario
from forensics.scan.source_gaps import shard_gaps
from forensics.sources.admin import AdminClient
from forensics.sources.loki import LokiClient
from forensics.sources.storage import ObjectStore

START = datetime(2026, 9, 10, 12, tzinfo=UTC)
LENGTH = timedelta(minutes=2)
WINDOW = Window(START, START + LENGTH)
QUICK = RetryPolicy(retries=1, backoff_factor=0, total_time=10)

CAUSES = {
    FailureKind.UNREACHABLE: "likely cause: nothing answers at",
    FailureKind.NAME_UNRESOLVED: "likely cause: the host name does not resolve:",
    FailureKind.TIMED_OUT: "likely cause: no answer in time (unreachable or overloaded) from",
    FailureKind.AUTH_REFUSED: "likely cause: the credentials were refused by",
    FailureKind.THROTTLED: "likely cause: the server is throttling:",
    FailureKind.NOT_FOUND: "likely cause: the path or bucket does not exist at",
    FailureKind.SERVER_FAILED: "likely cause: the server failed or is unreachable:",
    FailureKind.QUERY_TOO_HEAVY: "likely cause: the query was too heavy for Loki's query_timeout",
    FailureKind.BAD_ANSWER: "likely cause: the answer was not one the tool can read",
}


def cause_line(gaps: list[Gap], address: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The stderr line `report_failures` prints for one source's gaps."""
    capsys.readouterr()
    settings = SimpleNamespace(origins={g.source: "from the test" for g in gaps})
    report_failures(gaps, settings, dict.fromkeys((g.source for g in gaps), address))  # type: ignore[arg-type]
    (line,) = capsys.readouterr().err.splitlines()
    return line


# -- loopback listeners -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bind_with_401(sock: socket.socket) -> int:
    """Bind on a loopback port whose number contains `401` (4010 first), as `loki.internal:4010`."""
    for port in (4010, 14010, 24010, 34010, *range(40100, 40200)):
        try:
            sock.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    pytest.fail("no loopback port containing 401 is free")


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A port (containing 401) that accepts connections and never answers."""
    with socket.socket() as s:
        port = _bind_with_401(s)
        s.listen(16)
        yield port


@contextlib.contextmanager
def full_listener() -> Iterator[int]:
    """A port (containing 401) whose accept queue is full: a new connect times out (the kernel
    drops its SYN), as a host behind a firewall that drops packets."""
    with socket.socket() as s, contextlib.ExitStack() as held:
        port = _bind_with_401(s)
        s.listen(0)
        for _ in range(8):  # fill the queue until a connect no longer completes
            c = held.enter_context(socket.socket())
            c.settimeout(0.3)
            try:
                c.connect(("127.0.0.1", port))
            except OSError:
                break
        else:
            pytest.skip("this kernel completes every connect: no connect timeout on loopback")
        yield port


# -- Loki -------------------------------------------------------------------------------------


def loki_gaps(url: str, timeout: float = 1.0) -> list[Gap]:
    """The gaps one scan of a two-minute window leaves (the scan's own conversion)."""
    with LokiClient(LokiSettings(url=url, timeout=timeout), retry=QUICK) as c:
        items = c.read_shards('{namespace="x"}', WINDOW, shard=LENGTH, max_query_length=LENGTH)
        return [g for item in items if isinstance(item, ShardRead) for g in shard_gaps(item)]


@pytest.mark.integration
def test_loki_closed_port_is_unreachable(capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    gaps = loki_gaps(url)
    assert [g.failure for g in gaps] == [FailureKind.UNREACHABLE]
    assert f"{CAUSES[FailureKind.UNREACHABLE]} {url}," in cause_line(gaps, url, capsys)


@pytest.mark.integration
def test_loki_read_timeout_on_a_port_with_401_is_a_timeout_not_refused_credentials(capsys):
    with silent_listener() as port:
        url = f"http://127.0.0.1:{port}"
        gaps = loki_gaps(url)
    assert gaps and {g.failure for g in gaps} == {FailureKind.TIMED_OUT}
    line = cause_line(gaps, url, capsys)
    assert CAUSES[FailureKind.TIMED_OUT] in line and "credentials" not in line


@pytest.mark.integration
def test_loki_connect_timeout_naming_port_401x_is_a_timeout(capsys):
    with full_listener() as port:
        url = f"http://127.0.0.1:{port}"
        gaps = loki_gaps(url, timeout=0.5)
    assert gaps and {g.failure for g in gaps} == {FailureKind.TIMED_OUT}
    assert f":{port}" in gaps[0].error  # the text names the port that holds `401`
    line = cause_line(gaps, url, capsys)
    assert CAUSES[FailureKind.TIMED_OUT] in line and "credentials" not in line


@pytest.mark.integration
def test_loki_own_did_not_answer_text_has_a_cause(capsys):
    """Not query_range: the client's "did not answer within 1s" (no words of any old cause)."""
    with silent_listener() as port:
        url = f"http://127.0.0.1:{port}"
        with LokiClient(LokiSettings(url=url, timeout=1.0), retry=QUICK) as c:
            with pytest.raises(SourceError) as raised:
                c.label_names(WINDOW)
    e = raised.value
    assert "did not answer within 1s" in e.cause and e.kind is FailureKind.TIMED_OUT
    gap = Gap("loki", None, None, e.cause, failure=e.kind)
    assert CAUSES[FailureKind.TIMED_OUT] in cause_line([gap], url, capsys)


def test_loki_unresolvable_host(capsys):
    url = "http://elastic-audit-test.invalid:3100"
    gaps = loki_gaps(url)
    assert [g.failure for g in gaps] == [FailureKind.NAME_UNRESOLVED]
    assert CAUSES[FailureKind.NAME_UNRESOLVED] in cause_line(gaps, url, capsys)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (429, b"too many outstanding requests", FailureKind.THROTTLED),
        (500, b"rpc error: code = Internal", FailureKind.SERVER_FAILED),
        (
            504,
            b"request timed out, decrease the duration of the request or add more label matchers",
            FailureKind.QUERY_TOO_HEAVY,
        ),
    ],  # An HTML page everywhere is no Loki at all: tests/scan/test_scan_loki_not_loki.py
)
def test_loki_answers_map_by_status(status, body, kind, capsys):
    with answering(status, body) as url:
        gaps = loki_gaps(url)
    assert gaps and {g.failure for g in gaps} == {kind}
    assert CAUSES[kind] in cause_line(gaps, url, capsys)


@pytest.mark.integration
@pytest.mark.parametrize("status", [401, 403])
def test_loki_refused_credentials_are_auth_refused(status):
    with answering(status, b"no org id") as url:
        with LokiClient(LokiSettings(url=url, timeout=1.0), retry=QUICK) as c:
            with pytest.raises(SourceError) as raised:
                c.label_names(WINDOW)
    assert raised.value.kind is FailureKind.AUTH_REFUSED


# -- Flyte Admin ------------------------------------------------------------------------------


def admin_error(endpoint: str, **options: float) -> SourceError:
    client = AdminClient(PlatformConfig(endpoint=endpoint, insecure=True), retries=0, **options)
    try:
        with pytest.raises(SourceError) as raised:
            client.get_execution(ExecutionRef("p", "d", "x"))
    finally:
        client.close()
    return raised.value


def admin_line(e: SourceError, address: str, capsys: pytest.CaptureFixture[str]) -> str:
    return cause_line([Gap("admin", None, None, e.cause, failure=e.kind)], address, capsys)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (grpc.StatusCode.PERMISSION_DENIED, FailureKind.AUTH_REFUSED),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, FailureKind.THROTTLED),
        (grpc.StatusCode.UNAVAILABLE, FailureKind.SERVER_FAILED),
        (grpc.StatusCode.DEADLINE_EXCEEDED, FailureKind.TIMED_OUT),
        (grpc.StatusCode.INTERNAL, FailureKind.SERVER_FAILED),
    ],
)
def test_admin_statuses_map_by_code(code, kind, capsys):
    # (UNAUTHENTICATED is not among them: flytekit answers it by asking Admin for its OAuth
    # metadata, which the sandbox does not serve, so it surfaces as UNIMPLEMENTED.)
    server = AdminServer(Scenario(), AdminFaults(failures={"GetExecution": [code]}))
    endpoint = server.start()
    try:
        e = admin_error(endpoint)
    finally:
        server.stop()
    assert e.kind is kind
    assert CAUSES[kind] in admin_line(e, endpoint, capsys)


@pytest.mark.integration
def test_admin_closed_port_is_unreachable(capsys):
    endpoint = f"127.0.0.1:{_free_port()}"
    e = admin_error(endpoint, timeout=5.0)
    assert e.kind is FailureKind.UNREACHABLE
    assert f"{CAUSES[FailureKind.UNREACHABLE]} {endpoint}," in admin_line(e, endpoint, capsys)


def test_admin_unresolvable_host(capsys):
    endpoint = "elastic-audit-test.invalid:30080"
    e = admin_error(endpoint, timeout=5.0)
    assert e.kind is FailureKind.NAME_UNRESOLVED
    assert CAUSES[FailureKind.NAME_UNRESOLVED] in admin_line(e, endpoint, capsys)


@pytest.mark.integration
def test_admin_silent_port_times_out(capsys):
    with silent_listener() as port:
        endpoint = f"127.0.0.1:{port}"
        e = admin_error(endpoint, timeout=1.0)
    assert e.kind is FailureKind.TIMED_OUT
    line = admin_line(e, endpoint, capsys)
    assert CAUSES[FailureKind.TIMED_OUT] in line and "credentials" not in line


# -- S3 ---------------------------------------------------------------------------------------


def s3_store(endpoint: str, read_timeout: float = 2.0) -> ObjectStore:
    return ObjectStore(
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="y",
            config=Config(
                connect_timeout=1, read_timeout=read_timeout, retries={"max_attempts": 1}
            ),
        )
    )


def s3_line(uri: str, check, address: str, capsys) -> str:  # type: ignore[no-untyped-def]
    return cause_line(
        [Gap("s3", None, None, f"{uri}: {check.reason}", failure=check.failure)], address, capsys
    )


@pytest.mark.integration
def test_s3_closed_port_is_unreachable(capsys):
    endpoint = f"http://127.0.0.1:{_free_port()}"
    check = s3_store(endpoint).check_object("s3://bucket/a/outputs.pb")
    assert check.state == "unknown" and check.failure is FailureKind.UNREACHABLE
    assert CAUSES[FailureKind.UNREACHABLE] in s3_line("s3://bucket/a", check, endpoint, capsys)


def test_s3_unresolvable_host(capsys):
    endpoint = "http://elastic-audit-test.invalid:9000"
    check = s3_store(endpoint).check_object("s3://bucket/a/outputs.pb")
    assert check.failure is FailureKind.NAME_UNRESOLVED
    assert CAUSES[FailureKind.NAME_UNRESOLVED] in s3_line("s3://b/a", check, endpoint, capsys)


@pytest.mark.integration
def test_s3_silent_port_times_out(capsys):
    with silent_listener() as port:
        endpoint = f"http://127.0.0.1:{port}"
        check = s3_store(endpoint, read_timeout=1).check_object("s3://bucket/a/outputs.pb")
    assert check.failure is FailureKind.TIMED_OUT
    line = s3_line("s3://b/a", check, endpoint, capsys)
    assert CAUSES[FailureKind.TIMED_OUT] in line and "credentials" not in line


@pytest.mark.integration
def test_s3_sandbox_faults_map_by_code(box, capsys):
    from forensics.sandbox.s3_server import S3Rule

    def under(rules: list[S3Rule], read):  # type: ignore[no-untyped-def]
        rules.append(S3Rule())
        try:
            return read()
        finally:
            rules.clear()

    store = s3_store(box.s3.url)
    assert store.list_prefix("s3://no-such-bucket/x").failure is FailureKind.NOT_FOUND
    denied = under(box.s3.faults.access_denied, lambda: store.check_object("s3://any/a/o.pb"))
    assert denied.failure is FailureKind.AUTH_REFUSED
    assert CAUSES[FailureKind.AUTH_REFUSED] in s3_line("s3://any/a", denied, box.s3.url, capsys)
    slow = under(box.s3.faults.slow_down, lambda: store.list_prefix("s3://any/a/"))
    assert slow.failure is FailureKind.THROTTLED


# -- show: one failure, one gap ---------------------------------------------------------------


@pytest.mark.integration
def test_show_reports_a_failing_loki_window_once(box, tmp_path, monkeypatch, capsys):
    """The signal, pod and propeller reads of one window fail alike: one gap, not three."""
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)
    box.loki.faults = LokiFaults(rules=[FaultRule(status=500, count="always")])
    try:
        fast = CONFIG.replace("[loki]\n", "[loki]\nretries = 1\nretry_backoff = 0.01\n")
        (Path.cwd() / "elastic-audit.toml").write_text(fast)
        code, out, err = run(["show", "gs1:production:azvg5f9v9974m78fvlf7", "-o", "json"], capsys)
    finally:
        box.loki.faults = LokiFaults()
    gaps = [g for g in json.loads(out)["gaps"] if g["source"] == "loki"]
    assert code == 3 and len(gaps) == 1, gaps
    assert "Loki failed (1 gap(s)" in err and CAUSES[FailureKind.SERVER_FAILED] in err
