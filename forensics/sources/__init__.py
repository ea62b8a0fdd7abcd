"""The evidence sources — Loki, Flyte Admin, S3 — built once from the settings, closed together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forensics.config import Settings
from forensics.errors import UsageError

if TYPE_CHECKING:
    from forensics.sources.interfaces import AdminReader, LokiReader, ObjectReader


class SourcesClosed(UsageError):
    """A `Sources` was used after it was closed (after its `with` block): its clients no longer
    answer, and a scan over them would be a report of nothing but gaps."""

    def __init__(self) -> None:
        super().__init__(
            "these Sources are closed (used after their `with` block): open new ones with "
            "Sources.from_settings(settings), or do the work inside the block"
        )


class Sources:
    """The three clients every evidence-reading command uses (scan, show, relaunch, watch).

    Each is configured by its own tool's conventions (docs/configuration.md): Loki like logcli,
    Admin like pyflyte, S3 like boto3; `settings.workers` bounds each one's concurrency. Use it
    as a context manager: the Loki session and the Admin channel are closed on the way out, and
    from then on reading `loki`, `admin` or `store` (what every library call over these sources
    does first) raises SourcesClosed.

    The clients are typed by what the library calls on them (`sources.interfaces`): any objects
    that answer those calls will do, e.g. an `AdminClient.over(client)` around an existing
    flytekit client, or the unit tests' in-process fakes.
    """

    def __init__(
        self, settings: Settings, loki: LokiReader, admin: AdminReader, store: ObjectReader
    ) -> None:
        self.settings = settings
        self._clients = (loki, admin, store)
        self.closed = False

    @property
    def loki(self) -> LokiReader:
        self.check_open()
        return self._clients[0]

    @property
    def admin(self) -> AdminReader:
        self.check_open()
        return self._clients[1]

    @property
    def store(self) -> ObjectReader:
        self.check_open()
        return self._clients[2]

    def check_open(self) -> None:
        """SourcesClosed once `close` has run."""
        if self.closed:
            raise SourcesClosed

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
        loki, admin, _ = self._clients
        self.closed = True
        try:
            loki.close()
        finally:
            admin.close()

    def __enter__(self) -> Sources:
        self.check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
