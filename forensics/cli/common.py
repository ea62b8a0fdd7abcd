"""What several commands do alike: refuse bad names and paths early, write data, explain failures."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from forensics.config import Settings
from forensics.errors import FailureKind, OutputError
from forensics.formats.text import SOURCE_NAMES
from forensics.fsutil import is_special, replaced, write_atomic
from forensics.model import Gap


def check_scope_names(project: list[str], domain: list[str]) -> None:
    """Refuse (exit 2) a --project/--domain that is not a Flyte name, before any config loads."""
    from forensics.config import FLYTE_NAME
    from forensics.errors import UsageError

    for name, values in (("--project", project), ("--domain", domain)):
        for v in values:
            if not FLYTE_NAME.fullmatch(v):
                raise UsageError(
                    f"{name} {v!r}: Flyte {name[2:]} names are letters, digits, - and _"
                )


def check_domains(domain: list[str], settings: Settings) -> None:
    """Refuse (exit 2) a --domain that `[flyte] domains` does not list.

    Without `[flyte] domains` each project's domains come from Admin, which the scan checks
    --project and --domain against before it reads anything (exit 2 naming the unknown one).
    """
    from forensics.errors import ConfigError

    if not settings.flyte.domains_configured:
        return
    unknown = [d for d in domain if d not in settings.flyte.domains]
    if unknown:
        raise ConfigError(
            f"--domain {unknown[0]!r} is not one of the configured domains "
            f"({', '.join(settings.flyte.domains)}; set [flyte] domains in the config file)"
        )


def write_atomically(path: str, text: str) -> None:
    """Write `text` to `path` via a temp file in the same directory and a rename: all or nothing
    (`fsutil.write_atomic`); OutputError, saying why, when the system refuses."""
    try:
        write_atomic(path, text.encode("utf-8"))
    except OSError as e:
        raise OutputError(path, e.strerror or type(e).__name__) from None


def check_writable_file(path: str, flag: str) -> None:
    """Refuse (exit 2) a file path that write_atomically could not write: say so up front."""
    from forensics.errors import UsageError

    if not path.strip():
        raise UsageError(f"{flag}: empty file name")
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    if is_special(target):  # a device or a FIFO: written into, not replaced
        if not os.access(target, os.W_OK):
            raise UsageError(f"{flag} {path}: not writable")
        return
    target = replaced(target)  # a symbolic link: the file it points at is replaced
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"{flag} {path}: directory {directory} does not exist")
    if not _can_create_in(directory):
        raise UsageError(f"{flag} {path}: directory {directory} is not writable")


def _can_create_in(directory: Path) -> bool:
    """Whether a file can be created in `directory`, found by creating one (and removing it) as
    write_atomic will: permission bits say yes to root where a read-only or virtual file system
    (sysfs, a read-only mount) still refuses."""
    import tempfile

    if not os.access(directory, os.W_OK | os.X_OK):
        return False
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".elastic-audit-", suffix=".probe")
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def check_writable_dir(path: Path, flag: str) -> None:
    """Refuse (exit 2) a directory that cannot be created or written, before any long work: the
    nearest existing ancestor must be a directory a file can be created in (a read-only file
    system refuses even root). Nothing is created here."""
    import tempfile

    from forensics.errors import UsageError

    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write in {existing} ({e.strerror})") from None


def emit(text: str) -> None:
    """Data to stdout, exactly as rendered, nothing else; OutputError when stdout refuses it (a
    full disk), but not for a reader that stopped reading (a closed pipe: `end` handles it)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OutputError("standard output", e.strerror or type(e).__name__) from None


# -- one stderr line per failing source: what failed, the likely cause, where the address came from

_CAUSES = {
    FailureKind.LOGS_ABSENT: "Loki answers but holds no task log there (see the gap's text):",
    FailureKind.LABEL_MISSING: "a configured label name the matched streams lack (see the gap's "
    "text) at",
    FailureKind.QUERY_TOO_HEAVY: "the query was too heavy for Loki's query_timeout (it answered; "
    "a smaller [loki] shard or a narrower task_selector helps):",
    FailureKind.UNREACHABLE: "nothing answers at",
    FailureKind.AUTH_REFUSED: "the credentials were refused by",
    FailureKind.NO_CREDENTIALS: "no usable credentials were found for",
    FailureKind.NAME_UNRESOLVED: "the host name does not resolve:",
    FailureKind.TIMED_OUT: "no answer in time (unreachable or overloaded) from",
    FailureKind.NOT_FOUND: "the path or bucket does not exist at",
    FailureKind.THROTTLED: "the server is throttling:",
    FailureKind.SERVER_FAILED: "the server failed or is unreachable:",
    FailureKind.REJECTED: "the request was rejected (see the gap's text) by",
    FailureKind.BAD_ANSWER: "the answer was not one the tool can read (cut off, or not that "
    "service?) from",
}


def likely_cause(failure: FailureKind | None) -> str:
    """Why a source likely failed, from what its client mapped the failure to."""
    return _CAUSES.get(failure, "it failed at")  # type: ignore[arg-type]


def report_failures(gaps: Iterable[Gap], settings: Settings, endpoints: dict[str, str]) -> None:
    """For each source with a gap: one stderr line — count, first error, likely cause, and where
    the address came from (flag, environment, config file or default: docs/configuration.md)."""
    by_source: dict[str, list[Gap]] = {}
    for g in gaps:
        by_source.setdefault(g.source, []).append(g)
    for source, failed in by_source.items():
        first = failed[0]
        address = endpoints.get(source, "?")
        origin = settings.origins.get(source, "")
        name = SOURCE_NAMES.get(source, source)
        sys.stderr.write(
            f"elastic-audit: {name} failed ({len(failed)} gap(s); first: {first.error}): likely "
            f"cause: {likely_cause(first.failure)} {address}, {origin}\n"
        )
    sys.stderr.flush()


def source_endpoints(scanner: Any) -> dict[str, str]:
    """The address each of a scanner's sources talks to (never a credential)."""
    from forensics.secrets import safe_url

    settings = scanner.settings
    endpoints = {
        "loki": safe_url(settings.loki.url, keep_path=True),
        "k8s-events": safe_url(settings.k8s_events.url or settings.loki.url, keep_path=True),
        "admin": str(scanner.admin.endpoint),
        "s3": str(scanner.store.endpoint),
    }
    if settings.prometheus.url:
        endpoints["prometheus"] = safe_url(settings.prometheus.url, keep_path=True)
    return endpoints
