"""Flyte Admin through flytekit's gRPC client: executions, attempts, inputs, relaunch (plain data).

`AdminClient` is the reads (`admin_reads.py`) and the relaunch writes (`admin_relaunch.py`) over
one transport (`admin_transport.py`, the only module that imports flytekit, flyteidl or grpc;
imported when a client is made). Every answer is one of our records (`admin_types.py`). What each
question costs in Admin calls: docs/performance.md ("Admin calls per question").
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from forensics.sources.admin_reads import PLAN_RETRY_AFTER, AdminReads
from forensics.sources.admin_relaunch import AdminRelaunch
from forensics.sources.admin_types import SkippedNode, SweptAttempts

if TYPE_CHECKING:
    from flytekit.clients.friendly import SynchronousFlyteClient
    from flytekit.configuration import PlatformConfig

    from forensics.config import FlyteSettings

__all__ = [
    "PLAN_RETRY_AFTER",
    "AdminClient",
    "SkippedNode",
    "SweptAttempts",
    "load_platform_config",
]


def load_platform_config(config_file: str | None) -> PlatformConfig:
    """flytekit's own loading (as pyflyte): `config_file`, else its search; FLYTE_* env wins."""
    from forensics.sources.admin_transport import load_platform_config as load

    return load(config_file)


class AdminClient(AdminReads, AdminRelaunch):
    """Flyte Admin through flytekit's channel (admin_channel.py), answering in plain data.

    Failed calls are repeated only on UNAVAILABLE / RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED, with
    exponential backoff from `backoff`, at most `retries` times; each call carries a `timeout`
    deadline; `calls` counts the calls sent by RPC, retries included. Safe to share between
    threads.
    """

    def __init__(
        self,
        platform: PlatformConfig,
        *,
        client: SynchronousFlyteClient | None = None,
        **options: Any,
    ) -> None:
        """`options`: `timeout` (30 s), `retries` (3), `backoff` (0.5 s), `max_backoff` (8 s)."""
        from forensics.sources.admin_transport import AdminTransport

        self._transport = AdminTransport(platform, client=client, **options)
        self.endpoint = self._transport.endpoint  # user:password never shown
        self._init_reads()

    @property
    def calls(self) -> Counter[str]:
        """Admin calls sent so far, by RPC (retries included)."""
        return self._transport.calls

    @classmethod
    def from_settings(cls, settings: FlyteSettings, **options: Any) -> AdminClient:
        """Connect as pyflyte would: `settings.config_file`, else flytekit's search; FLYTE_* env.

        Deadline and retries come from `settings` ([flyte] timeout, retries, retry_backoff)
        unless `options` name them.
        """
        options.setdefault("timeout", settings.timeout)
        options.setdefault("retries", settings.retries)
        options.setdefault("backoff", settings.retry_backoff)
        return cls(load_platform_config(settings.config_file), **options)

    @classmethod
    def over(cls, client: SynchronousFlyteClient, **options: Any) -> AdminClient:
        """An AdminClient around an existing flytekit client (a `FlyteRemote`'s `.client`, or
        one built with its own channel options); `options` as for the constructor. The
        client's channel is the caller's: `close` leaves it open, and its own `rpc_retries`
        apply beneath this client's retries."""
        from forensics.sources.admin_transport import AdminTransport

        return cls(AdminTransport.platform_of(client), client=client, **options)

    def __repr__(self) -> str:  # PlatformConfig's own repr would print the client secret
        if self._transport.insecure is None:
            return f"AdminClient(endpoint={self.endpoint!r}, over a caller's flytekit client)"
        return f"AdminClient(endpoint={self.endpoint!r}, insecure={self._transport.insecure})"

    def close(self) -> None:
        """Close the gRPC channel (idempotent); a client given to `over` stays open."""
        self._transport.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
