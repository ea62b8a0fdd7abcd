"""What a failure of an outside system means: `FailureKind`, and the operating system's errors
read by type. Kept apart from `errors.py` so the plain data (`model.Gap`) can carry a kind
without importing the error classes; `forensics.errors` exports it too."""

from __future__ import annotations

import socket
from enum import Enum


class FailureKind(Enum):
    """What a failure of an outside system means, whatever the library that met it said.

    Each client maps its library's exceptions and statuses to one of these at its edge, by type
    (forensics/sources/*, forensics/guard/notify.py, forensics/pinbump/github.py); a `Gap` and a
    `SourceError` carry it, and the CLI's likely-cause line is keyed on it.
    """

    UNREACHABLE = "unreachable"  # connection refused or reset: nothing answers at the address
    NAME_UNRESOLVED = "name-unresolved"  # the host name does not resolve
    TIMED_OUT = "timed-out"  # no answer in time (connect or read)
    AUTH_REFUSED = "auth-refused"  # 401/403, UNAUTHENTICATED/PERMISSION_DENIED, AccessDenied
    NO_CREDENTIALS = "no-credentials"  # no usable credentials were found to send
    THROTTLED = "throttled"  # 429, SlowDown, RESOURCE_EXHAUSTED
    NOT_FOUND = "not-found"  # 404, NoSuchBucket/NoSuchKey, NOT_FOUND
    REJECTED = "rejected"  # the request itself was refused (400, INVALID_ARGUMENT, a region)
    QUERY_TOO_HEAVY = "query-too-heavy"  # Loki answered that the query is too heavy (its 504)
    SERVER_FAILED = "server-failed"  # 5xx, INTERNAL, UNAVAILABLE
    BAD_ANSWER = "bad-answer"  # an answer that is cut off, not JSON, or not the expected shape
    LOGS_ABSENT = "logs-absent"  # Loki answers but holds no task log there
    LABEL_MISSING = "label-missing"  # the lines matched lack a configured label name
    FAILED = "failed"  # none of the above: the error's own text says what


def os_error(exc: BaseException) -> OSError | None:
    """The operating system's error behind a library's exception, found by type through causes,
    contexts, `args` and urllib3's `reason`; None when none lies behind it."""
    found = in_chain(exc, (socket.gaierror, TimeoutError, ConnectionError))
    return found if isinstance(found, OSError) else None


def in_chain(exc: BaseException, types: tuple[type[BaseException], ...]) -> BaseException | None:
    """The first exception of `types` behind `exc` (itself included), through causes, contexts,
    `args` and urllib3's `reason`; None when none lies behind it."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, types):
            return e
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None), *e.args]
    return None


def os_failure(exc: BaseException) -> FailureKind | None:
    """What the operating system's error behind `exc` means: an unresolvable name, a timeout,
    or a refused/reset connection; None when no such error lies behind it."""
    e = os_error(exc)
    if isinstance(e, socket.gaierror):
        return FailureKind.NAME_UNRESOLVED
    if isinstance(e, TimeoutError):
        return FailureKind.TIMED_OUT
    if isinstance(e, ConnectionError):  # refused, reset, aborted, broken pipe
        return FailureKind.UNREACHABLE
    return None


def http_status_kind(status: int) -> FailureKind:
    """What an HTTP error status means (every HTTP client of the tool reads them alike)."""
    if status in (401, 403):
        return FailureKind.AUTH_REFUSED
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 429:
        return FailureKind.THROTTLED
    if status >= 500:
        return FailureKind.SERVER_FAILED
    if 400 <= status < 500:
        return FailureKind.REJECTED
    return FailureKind.BAD_ANSWER
