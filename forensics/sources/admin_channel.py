"""The gRPC channel to Flyte Admin: flytekit's, opened with flytekit's own public helpers as
its raw client opens it (its address, TLS, proxy and OAuth2 interceptors), with keepalive
options a real Admin accepts (flytekit's own pings get a GOAWAY `too_many_pings` from
flyteadmin's default policy; why and measured: docs/upstream.md, "Flyte Admin's gRPC
keepalive"), and without the outermost exception wrapper, whose work the transport does itself
(docs/upstream.md, "flytekit's exception wrapper"). Part of the Admin transport.

The RPCs are called on flyteidl's AdminServiceStub under the names RawSynchronousFlyteClient
gives them, each with a deadline (`AdminCalls`), or, for a client the caller built
(`AdminClient.over`), on that client (`FlytekitCalls`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import grpc
from flyteidl.service.admin_pb2_grpc import AdminServiceStub
from flytekit.clients.auth_helper import (
    get_channel,
    upgrade_channel_to_authenticated,
    upgrade_channel_to_proxy_authenticated,
)
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


def open_channel(platform: PlatformConfig) -> grpc.Channel:
    """Admin's channel as flytekit opens it (raw.py:64-69), KEEPALIVE_OPTIONS first, without
    `wrap_exceptions_channel`: its exceptions only rename the gRPC status the transport reads,
    its immediate retries (`rpc_retries`, NOT_FOUND and ALREADY_EXISTS included) are the
    transport's to decide, and its scoped deadline is the `timeout` `AdminCalls` gives each
    call. A user:password in the endpoint is refused: gRPC resolves it as part of the host name
    ("Misformatted domain name"), and Flyte's credentials are flytekit's FLYTE_CREDENTIALS_*."""
    if userinfo_secrets(platform.endpoint):
        raise ValueError(
            "its address carries user:password, which gRPC cannot use: give Flyte's "
            "credentials as flytekit takes them (FLYTE_CREDENTIALS_*)"
        )
    channel = get_channel(platform, options=[*KEEPALIVE_OPTIONS, *MESSAGE_OPTIONS])
    channel = upgrade_channel_to_proxy_authenticated(platform, channel)
    return upgrade_channel_to_authenticated(platform, channel)


class AdminCalls:
    """Admin's RPCs on a channel, by RawSynchronousFlyteClient's names: `get_execution(req)`,
    each call with a deadline `timeout` seconds away."""

    def __init__(self, channel: grpc.Channel, timeout: float) -> None:
        stub = AdminServiceStub(channel)
        self._calls = {
            name: partial(getattr(stub, rpc), timeout=timeout) for name, rpc in _RPCS.items()
        }

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
