"""The gRPC channel to Flyte Admin: flytekit's, opened with flytekit's own public helpers as
its raw client opens it (its address, TLS, proxy and OAuth2 interceptors), with keepalive
options a real Admin accepts (flytekit's own pings get a GOAWAY `too_many_pings` from
flyteadmin's default policy; why and measured: docs/upstream.md, "Flyte Admin's gRPC
keepalive"), and without the outermost exception wrapper, whose work the transport does itself
(docs/upstream.md, "flytekit's exception wrapper"). Part of the Admin transport.

The reads go over the plain channel beneath flytekit's layers, with the metadata those layers
would add (its `accept` header, the token of the OAuth2 interceptor's own authenticator) and
its refresh on UNAUTHENTICATED or UNKNOWN: each layer is grpc interceptor machinery on every
one of a scan's ~20,000 calls (docs/upstream.md, "flytekit's channel, layer by layer"). Behind a
`proxy_command`, and for the relaunch writes, every call goes through flytekit's channel.

The RPCs are called on flyteidl's AdminServiceStub under the names RawSynchronousFlyteClient
gives them, each with a deadline (`AdminCalls`), or, for a client the caller built
(`AdminClient.over`), on that client (`FlytekitCalls`).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import grpc
from flyteidl.service.admin_pb2_grpc import AdminServiceStub
from flytekit.clients.auth_helper import (
    RemoteClientConfigStore,
    bootstrap_creds_from_server,
    get_authenticator,
    get_channel,
    upgrade_channel_to_proxy_authenticated,
)
from flytekit.clients.grpc_utils.auth_interceptor import AuthUnaryInterceptor
from flytekit.clients.grpc_utils.deadline_interceptor import scoped_grpc_deadline
from flytekit.clients.raw import RawSynchronousFlyteClient
from flytekit.configuration import PlatformConfig

from forensics.secrets import userinfo_secrets

KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 6 * 60 * 1000),
    ("grpc.keepalive_timeout_ms", 20 * 1000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 2),
)
# raw.py's message limits, matched to flyteadmin's (flyteadmin/pkg/common/constants.go)
MESSAGE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_metadata_size", 32 * 1024),
    ("grpc.max_receive_message_length", 20 * 1024 * 1024),
)

# RawSynchronousFlyteClient's method -> AdminService's RPC, for the calls the tool makes
_RPCS = {
    "create_execution": "CreateExecution",
    "relaunch_execution": "RelaunchExecution",
    "get_execution": "GetExecution",
    "get_execution_data": "GetExecutionData",
    "list_executions_paginated": "ListExecutions",
    "get_node_execution": "GetNodeExecution",
    "get_node_execution_data": "GetNodeExecutionData",
    "list_node_executions_paginated": "ListNodeExecutions",
    "list_task_executions_paginated": "ListTaskExecutions",
    "get_task": "GetTask",
    "get_workflow": "GetWorkflow",
    "get_launch_plan": "GetLaunchPlan",
    "list_launch_plans_paginated": "ListLaunchPlans",
    "list_projects": "ListProjects",
}


# A console's address given as Admin's: gRPC's targets name a resolver (dns:, unix:, ipv4:), never
# a web scheme (docs/upstream.md, "A web URL as Admin's endpoint")
WEB_SCHEME = re.compile(r"(?i)^https?://")
# What flytekit's DefaultMetadataInterceptor puts first on every call
ACCEPT = ("accept", "application/grpc")
# The statuses on which flytekit's OAuth2 interceptor refreshes its credentials and asks again
REFRESH_ON = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNKNOWN})
# Writes go through flytekit's channel only: its layers, as flytekit runs them
_WRITES = frozenset({"create_execution", "relaunch_execution"})


class AdminChannel:
    """Admin's channel as flytekit composes it (`composed`), the OAuth2 interceptor in it
    (`auth`, whose authenticator the plain calls share), and the channel beneath flytekit's
    layers (`plain`; None behind a `proxy_command`, whose interceptor is flytekit's alone).

    Opened as raw.py:64-69 opens it, KEEPALIVE_OPTIONS first, without `wrap_exceptions_channel`:
    its exceptions only rename the gRPC status the transport reads, its immediate retries
    (`rpc_retries`, NOT_FOUND and ALREADY_EXISTS included) are the transport's to decide, and its
    scoped deadline is the `timeout` `AdminCalls` gives each call. A user:password in the
    endpoint is refused: gRPC resolves it as part of the host name ("Misformatted domain
    name"), and Flyte's credentials are flytekit's FLYTE_CREDENTIALS_*; so is an http(s):// URL,
    for the same reason."""

    def __init__(self, platform: PlatformConfig) -> None:
        if userinfo_secrets(platform.endpoint):
            raise ValueError(
                "its address carries user:password, which gRPC cannot use: give Flyte's "
                "credentials as flytekit takes them (FLYTE_CREDENTIALS_*)"
            )
        if WEB_SCHEME.match(platform.endpoint):
            # gRPC has no such scheme: it would look the whole text up as a host name
            raise ValueError(
                "its address is a web URL: Flyte Admin's endpoint is host:port (or "
                "dns:///host:port, as flytectl writes admin.endpoint), without http(s)://"
            )
        options = [*KEEPALIVE_OPTIONS, *MESSAGE_OPTIONS]
        credentials = None if platform.insecure else channel_credentials(platform)
        base = get_channel(
            platform,
            options=options,
            **({} if credentials is None else {"credentials": credentials}),
        )
        base = upgrade_channel_to_proxy_authenticated(platform, base)
        # upgrade_channel_to_authenticated, with the interceptor kept
        self.auth = AuthUnaryInterceptor(
            lambda: get_authenticator(platform, RemoteClientConfigStore(base))
        )
        self.composed = grpc.intercept_channel(base, self.auth)
        self.plain: grpc.Channel | None = None
        if not platform.proxy_command:
            self.plain = (
                grpc.insecure_channel(platform.endpoint, options=options)
                if credentials is None
                else grpc.secure_channel(platform.endpoint, credentials, options=options)
            )

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """What flytekit's layers add to a call: `accept`, then the authenticator's header if
        it has credentials (none until Admin first refuses a call)."""
        header = self.auth.authenticator.fetch_grpc_call_auth_metadata()
        return (ACCEPT, header) if header else (ACCEPT,)

    def close(self) -> None:
        self.composed.close()
        if self.plain is not None:
            self.plain.close()


def channel_credentials(platform: PlatformConfig) -> grpc.ChannelCredentials:
    """TLS credentials as flytekit's `get_channel` chooses them: the server's own certificate
    (`insecure_skip_verify`), a CA file, or the system's roots."""
    if platform.insecure_skip_verify:
        return bootstrap_creds_from_server(platform.endpoint)
    if platform.ca_cert_file_path:
        with open(platform.ca_cert_file_path, "rb") as f:
            return grpc.ssl_channel_credentials(f.read())
    return grpc.ssl_channel_credentials()


class _Plain:
    """One RPC on the plain channel, as flytekit's OAuth2 interceptor makes it: the layers'
    metadata; on UNAUTHENTICATED or UNKNOWN the credentials refreshed and the call made once
    more, whatever it answers then."""

    def __init__(self, method: Any, channel: AdminChannel, timeout: float) -> None:
        self._method = method
        self._channel = channel
        self._timeout = timeout

    def __call__(self, request: Any) -> Any:
        try:
            return self._method(request, timeout=self._timeout, metadata=self._channel.metadata())
        except grpc.RpcError as e:
            code = getattr(e, "code", None)
            if not callable(code) or code() not in REFRESH_ON:
                raise
        self._channel.auth.authenticator.refresh_credentials()
        return self._method(request, timeout=self._timeout, metadata=self._channel.metadata())


class AdminCalls:
    """Admin's RPCs on a channel, by RawSynchronousFlyteClient's names: `get_execution(req)`,
    each call with a deadline `timeout` seconds away."""

    def __init__(self, channel: AdminChannel, timeout: float) -> None:
        composed = AdminServiceStub(channel.composed)
        plain = None if channel.plain is None else AdminServiceStub(channel.plain)
        self._calls: dict[str, Any] = {}
        for name, rpc in _RPCS.items():
            if plain is None or name in _WRITES:
                self._calls[name] = partial(getattr(composed, rpc), timeout=timeout)
            else:
                self._calls[name] = _Plain(getattr(plain, rpc), channel, timeout)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._calls[name]
        except KeyError:
            raise AttributeError(name) from None


class FlytekitCalls:
    """The same calls through a flytekit client the caller built (its channel, its options),
    each inside flytekit's `scoped_grpc_deadline(timeout)`, which that client's channel applies."""

    def __init__(self, client: RawSynchronousFlyteClient, timeout: float) -> None:
        self._client = client
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        if name not in _RPCS:
            raise AttributeError(name)
        method = getattr(RawSynchronousFlyteClient, name)

        def call(request: Any) -> Any:
            with scoped_grpc_deadline(self._timeout):
                return method(self._client, request)

        return call
