"""Error types: each carries its meaning; the CLI turns them into one line and an exit code."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from forensics.failures import FailureKind as FailureKind  # what a SourceError means

if TYPE_CHECKING:
    from forensics.model import ExecutionRef


class ElasticAuditError(Exception):
    """Base of every error the tool reports to a user (never as a traceback)."""


class UsageError(ElasticAuditError):
    """The command line asks for something malformed or contradictory."""


class ConfigError(ElasticAuditError):
    """A configuration file, environment variable or setting is invalid."""


class OutputError(ElasticAuditError):
    """A file or stream the command writes its result to could not be written (`path`: what,
    `reason`: the system's word for why)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: not written ({reason})")


class SourceError(ElasticAuditError):
    """An outside system (Loki, Flyte Admin, S3, GitHub) failed to answer.

    `source` names the system, `window` (start, end) the part of the scan it costs when
    known, `target` the object or request concerned; `cause` is a short human reason; `kind`
    what the failure means (each class has its usual one; the raiser may say better).
    """

    default_kind = FailureKind.FAILED

    def __init__(
        self,
        source: str,
        cause: str,
        *,
        window: tuple[datetime, datetime] | None = None,
        target: str | None = None,
        retryable: bool = False,
        kind: FailureKind | None = None,
    ) -> None:
        self.source = source
        self.kind = kind or self.default_kind
        self.cause = cause
        self.window = window
        self.target = target
        self.retryable = retryable
        where = f" ({target})" if target else ""
        super().__init__(f"{source}{where}: {cause}")


class NotFoundError(SourceError):
    """The outside system answered that the object does not exist."""

    default_kind = FailureKind.NOT_FOUND


class AlreadyRelaunched(SourceError):
    """Admin already holds the relaunch of `original`, named as requested: `existing`.

    Raised instead of creating a second execution (exactly once: docs/commands.md, relaunch).
    `after_retry` says the first attempt's response was lost and the execution found is that
    attempt's own work.
    """

    def __init__(
        self, existing: ExecutionRef, *, original: ExecutionRef, after_retry: bool = False
    ) -> None:
        self.existing = existing
        self.original = original
        self.after_retry = after_retry
        super().__init__(
            "admin",
            f"already relaunched as {existing}",
            target=str(original),
            kind=FailureKind.REJECTED,
        )


class LokiQueryError(SourceError):
    """Loki rejected the query (HTTP 400): final, never retried; the text is Loki's own."""

    default_kind = FailureKind.REJECTED
