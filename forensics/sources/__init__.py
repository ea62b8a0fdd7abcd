"""The evidence sources — Loki, Flyte Admin, S3 — built once from the settings, closed together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from forensics.config import Settings

if TYPE_CHECKING:
    from forensics.sources.interfaces import AdminReader, LokiReader, ObjectReader


@dataclass
class Sources:
    """The three clients every evidence-reading command uses (scan, show, relaunch, watch).

    Each is configured by its own tool's conventions (docs/configuration.md): Loki like logcli,
    Admin like pyflyte, S3 like boto3; `settings.workers` bounds each one's concurrency. Use it
    as a context manager: the Loki session and the Admin channel are closed on the way out.

    The fields are typed by what the library calls on them (`sources.interfaces`): any objects
    that answer those calls will do, e.g. an `AdminClient.over(client)` around an existing
    flytekit client, or the unit tests' in-process fakes.
    """

    settings: Settings
    loki: LokiReader
    admin: AdminReader
    store: ObjectReader

    @classmethod
    def from_settings(cls, settings: Settings) -> Sources:
        """The production clients for `settings`."""
        from forensics.sources.admin import AdminClient
        from forensics.sources.loki import LokiClient
        from forensics.sources.storage import ObjectStore

        loki = LokiClient(settings.loki, workers=settings.workers)
        admin = AdminClient.from_settings(settings.flyte)
        store = ObjectStore.default(workers=settings.workers)
        return cls(settings, loki, admin, store)

    def close(self) -> None:
        """Close the clients that hold connections (idempotent)."""
        try:
            self.loki.close()
        finally:
            self.admin.close()

    def __enter__(self) -> Sources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
