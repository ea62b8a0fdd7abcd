"""The gRPC channel to Flyte Admin: flytekit's client with keepalive options a real Admin accepts.

flytekit's `RawSynchronousFlyteClient.__init__` (flytekit/clients/raw.py, lines 55-62 in
flytekit 1.16.31 as installed; flyteorg/flytekit commit 3157ce5e9, #3433, first released in
v1.16.21) builds its channel with `grpc.keepalive_time_ms` 30000, `grpc.keepalive_timeout_ms`
10000, `grpc.keepalive_permit_without_calls` 1 and `grpc.http2.max_pings_without_data` 0, then
appends the caller's `options` after its own. flyteadmin v1.16.8 builds its server with no
keepalive enforcement policy (flyteorg/flyte flyteadmin/pkg/server/service.go:140-151:
interceptors, message sizes, max streams, TLS creds only), so grpc-go v1.80.0's default applies:
`MinTime` 5 minutes and `PermitWithoutStream` false (keepalive/keepalive.go:94,98;
internal/transport/defaults.go:40; http2_server.go:242-243), and a ping sooner than that, or any
ping while no call is open, is a strike; the third strike is a GOAWAY `too_many_pings`
(http2_server.go:864, 868-914). A 30 s ping over a long scan's quiet stretches (Loki reads, S3
checks) gets the connection closed, the calls on it retried, and gRPC's C-core logging the
GOAWAY on stderr.

The options below override flytekit's (a later channel argument replaces an earlier one of the
same key: grpc/grpc src/core/lib/channel/channel_args.cc `ChannelArgs::FromC` sets each in
order): a ping no sooner than 6 minutes (grpc-go's 5 and a margin for timer skew), only while a
call is open, at most two without data between them (C-core's default). Each Admin call also
carries its own deadline, which is what notices a dead connection during a call.
"""

from __future__ import annotations

from flytekit.clients.friendly import SynchronousFlyteClient
from flytekit.configuration import PlatformConfig

KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 6 * 60 * 1000),
    ("grpc.keepalive_timeout_ms", 20 * 1000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 2),
)


def connect(platform: PlatformConfig) -> SynchronousFlyteClient:
    """flytekit's client for `platform`, its channel with KEEPALIVE_OPTIONS (flytekit's public
    `options` keyword, passed on to `grpc.insecure_channel` / `grpc.secure_channel`)."""
    return SynchronousFlyteClient(platform, options=list(KEEPALIVE_OPTIONS))
