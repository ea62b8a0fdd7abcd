"""The gRPC channel to Flyte Admin: flytekit's, built with flytekit's own public helpers, with
keepalive options a real Admin accepts (docs/upstream.md "Flyte Admin's gRPC keepalive").

flytekit's `RawSynchronousFlyteClient.__init__` (flytekit/clients/raw.py lines 55-69, flytekit
1.16.31 as installed; flyteorg/flytekit commit 3157ce5e9, #3433, first in v1.16.21) opens its
channel with `grpc.keepalive_time_ms` 30000 and `grpc.keepalive_permit_without_calls` 1 *before*
a caller's `options`, and gRPC (grpcio 1.85.3, measured) keeps the first of two arguments of a
key: a caller cannot change them. flyteadmin v1.16.8 sets no keepalive enforcement policy
(flyteorg/flyte flyteadmin/pkg/server/service.go:140-151), so grpc-go v1.80.0's default holds
(keepalive/keepalive.go:94,98; internal/transport/defaults.go:40): a ping sooner than 5 minutes
after the last, or any ping with no call open, is a strike, the third a GOAWAY `too_many_pings`
(internal/transport/http2_server.go:864, 868-914).

So the channel is opened here as raw.py opens it, with the same public functions of
flytekit.clients.auth_helper (get_channel, then the proxy and auth upgrades, then
wrap_exceptions_channel: flytekit's exception mapping and `scoped_grpc_deadline`), but with
KEEPALIVE_OPTIONS first: a ping no sooner than 6 minutes (grpc-go's 5 and a margin for timer
skew), only while a call is open, at most two without data between them (C-core's default).
Each Admin call carries its own deadline, which is what notices a dead connection during a call.
The RPCs are called on flyteidl's AdminServiceStub, under the names RawSynchronousFlyteClient
gives them (`AdminCalls`), or, for a client the caller built (`AdminClient.over`), on that
client (`FlytekitCalls`).
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
    wrap_exceptions_channel,
)
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
    """Admin's channel as flytekit opens it (raw.py:64-69), KEEPALIVE_OPTIONS first. A
    user:password in the endpoint is refused: gRPC resolves it as part of the host name
    ("Misformatted domain name"), and Flyte's credentials are flytekit's FLYTE_CREDENTIALS_*."""
    if userinfo_secrets(platform.endpoint):
        raise ValueError(
            "its address carries user:password, which gRPC cannot use: give Flyte's "
            "credentials as flytekit takes them (FLYTE_CREDENTIALS_*)"
        )
    channel = get_channel(platform, options=[*KEEPALIVE_OPTIONS, *MESSAGE_OPTIONS])
    channel = upgrade_channel_to_proxy_authenticated(platform, channel)
    channel = upgrade_channel_to_authenticated(platform, channel)
    return wrap_exceptions_channel(platform, channel)


class AdminCalls:
    """Admin's RPCs on a channel, by RawSynchronousFlyteClient's names: `get_execution(req)`."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._stub = AdminServiceStub(channel)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, _RPCS[name])


class FlytekitCalls:
    """The same calls through a flytekit client the caller built (its channel, its options)."""

    def __init__(self, client: RawSynchronousFlyteClient) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        if name not in _RPCS:
            raise AttributeError(name)
        return partial(getattr(RawSynchronousFlyteClient, name), self._client)
