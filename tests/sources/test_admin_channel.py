"""The Admin channel's plain calls carry what flytekit's own client sends (its `accept` header,
its OAuth2 token under the header Admin names) and refresh as flytekit's interceptor does: a
server that requires a token records both clients' calls, and their metadata must be the same,
call for call. flytekit's client is the oracle here, not a model of it."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from flyteidl.admin import execution_pb2
from flyteidl.core import identifier_pb2
from flyteidl.service import admin_pb2_grpc, auth_pb2, auth_pb2_grpc
from flytekit.clients.raw import RawSynchronousFlyteClient
from flytekit.configuration import PlatformConfig
from support.tls import self_signed

from forensics.sources.admin_channel import ACCEPT, AdminCalls, AdminChannel

pytestmark = pytest.mark.integration

HEADER = "flyte-authorization"  # Admin's own name for it: the authenticator must use it
TOKEN = "t0k3n-from-the-command"
ASKED = execution_pb2.WorkflowExecutionGetRequest(
    id=identifier_pb2.WorkflowExecutionIdentifier(project="p", domain="d", name="x")
)


class _Admin(admin_pb2_grpc.AdminServiceServicer, auth_pb2_grpc.AuthMetadataServiceServicer):
    """GetExecution for a caller with the token; every call's metadata recorded."""

    def __init__(self, refusal: grpc.StatusCode = grpc.StatusCode.UNAUTHENTICATED) -> None:
        self.seen: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        self.lock = threading.Lock()
        self.refusal = refusal  # what a call without the token gets

    def _record(self, rpc: str, context: grpc.ServicerContext) -> tuple[tuple[str, str], ...]:
        md = tuple((k, v) for k, v in context.invocation_metadata() if k != "user-agent")
        with self.lock:
            self.seen.append((rpc, md))
        return md

    def GetExecution(self, request, context):
        if (HEADER, f"Bearer {TOKEN}") not in self._record("GetExecution", context):
            context.abort(self.refusal, "no token")
        return execution_pb2.Execution(id=request.id)

    def GetPublicClientConfig(self, request, context):
        self._record("GetPublicClientConfig", context)
        return auth_pb2.PublicClientAuthConfigResponse(authorization_metadata_key=HEADER)

    def GetOAuth2Metadata(self, request, context):
        self._record("GetOAuth2Metadata", context)
        return auth_pb2.OAuth2MetadataResponse()


def _serve(servicer: _Admin, tls: tuple[bytes, bytes] | None) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    admin_pb2_grpc.add_AdminServiceServicer_to_server(servicer, server)
    auth_pb2_grpc.add_AuthMetadataServiceServicer_to_server(servicer, server)
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([tls]))
    server.start()
    return server, port


@pytest.fixture(params=[grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNKNOWN])
def admin(request) -> Iterator[tuple[_Admin, str]]:
    # flytekit's interceptor refreshes on either (auth_interceptor.py:73)
    servicer = _Admin(request.param)
    server, port = _serve(servicer, None)
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(None)


def _command(token: str) -> list[str]:
    # An external command prints the token: flytekit's CommandAuthenticator, no OAuth server.
    return [sys.executable, "-c", f"print({token!r})"]


def _platform(endpoint: str, **more: object) -> PlatformConfig:
    settings: dict[str, object] = {"insecure": True, **more}
    return PlatformConfig(
        endpoint=endpoint, auth_mode="ExternalCommand", command=_command(TOKEN), **settings
    )


def _same_calls(servicer: _Admin, platform: PlatformConfig, *, plain: bool) -> None:
    """flytekit's client, then the tool's calls, three GetExecutions each: the same metadata,
    call for call, and the token on the last."""
    flytekit = RawSynchronousFlyteClient(platform)
    for _ in range(3):
        flytekit.get_execution(ASKED)
    theirs, servicer.seen = servicer.seen, []

    channel = AdminChannel(platform)
    try:
        assert (channel.plain is not None) is plain
        calls = AdminCalls(channel, 5.0)
        for _ in range(3):
            calls.get_execution(ASKED)
    finally:
        channel.close()
    ours = servicer.seen
    assert ours == theirs
    assert (HEADER, f"Bearer {TOKEN}") in ours[-1][1]


def test_plain_calls_send_what_flytekits_client_sends(admin) -> None:
    servicer, endpoint = admin
    _same_calls(servicer, _platform(endpoint), plain=True)
    # Refused without a token, refreshed, asked again; then the token on every call.
    assert [rpc for rpc, _ in servicer.seen].count("GetExecution") == 4
    assert servicer.seen[-1][1] == (ACCEPT, (HEADER, f"Bearer {TOKEN}"))


def test_behind_a_proxy_command_every_call_is_flytekits(admin) -> None:
    servicer, endpoint = admin
    _same_calls(servicer, _platform(endpoint, proxy_command=_command("p")), plain=False)
    assert ("proxy-authorization", "Bearer p") in servicer.seen[-1][1]


@pytest.mark.parametrize("trust", ["ca_cert_file_path", "insecure_skip_verify"])
def test_over_tls_the_plain_channel_trusts_what_flytekit_trusts(tmp_path, trust) -> None:
    ca_file, key_file = self_signed(tmp_path, ["localhost"], ["127.0.0.1"])
    servicer = _Admin()
    server, port = _serve(servicer, (Path(key_file).read_bytes(), Path(ca_file).read_bytes()))
    settings = {"ca_cert_file_path": str(ca_file)} if trust == "ca_cert_file_path" else {}
    if trust == "insecure_skip_verify":
        settings["insecure_skip_verify"] = True
    try:
        _same_calls(
            servicer, _platform(f"localhost:{port}", insecure=False, **settings), plain=True
        )
    finally:
        server.stop(None)


def test_a_refusal_after_the_refresh_is_the_answer(admin) -> None:
    # flytekit asks once more after refreshing, whatever that answers: so do the plain calls.
    servicer, endpoint = admin
    platform = PlatformConfig(
        endpoint=endpoint, insecure=True, auth_mode="ExternalCommand", command=_command("wrong")
    )
    channel = AdminChannel(platform)
    try:
        with pytest.raises(grpc.RpcError) as info:
            AdminCalls(channel, 5.0).get_execution(ASKED)
    finally:
        channel.close()
    assert info.value.code() is servicer.refusal
    assert [rpc for rpc, _ in servicer.seen].count("GetExecution") == 2
