"""Guard state: what earlier runs scanned, which gaps are open, what was already notified.

One JSON document, at a local path or `s3://bucket/key`. Read once at the start of a run with a
version token (the local file's sha256, the S3 object's ETag) and written once at its end only if
nobody else wrote in between: on S3 with a conditional PutObject (If-Match on the ETag read, or
If-None-Match: * when there was no state), locally by comparing the file under an flock. The
loser of a race gets StateConflict, and never notifies.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from forensics.errors import ConfigError, ElasticAuditError, SourceError
from forensics.fsutil import write_atomic
from forensics.model import Finding, Gap, Pending, rfc3339
from forensics.params import Param, ParamConfigError
from forensics.report_json import finding_from_json, gap_from_json, pending_from_json
from forensics.timeutil import parse_time

# The parameters the state is given by, as errors name them.
STATE, RESET_STATE = Param("state"), Param("reset_state")
SCHEMA = "elastic-audit/guard-state"
SCHEMA_VERSION = 1
# Notified keys older than this are forgotten: a finding that old is outside any overlap.
RETENTION = timedelta(days=90)


class StateConflict(ElasticAuditError):
    """Another run wrote the state between this run's read and its write."""


@dataclass
class OpenGap:
    """A gap of the last run that a later window has not covered yet, and whether it was
    notified; in the state's JSON, the report's gap with `notified`."""

    gap: Gap
    notified: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {**self.gap.as_dict(), "notified": self.notified}


@dataclass
class GuardState:
    """The document: window progress, open gaps, what was seen and notified, counters.

    `items` maps a finding's or pending attempt's key (`finding:project:domain:name/node/attempt`,
    `pending:…`) to `{"kind", "verdict", "first_seen", "notified", "claimed_by", "claimed_at",
    "doc"}` (times RFC 3339, "" when not yet); `doc` is the Finding or Pending as last reported,
    kept only while not notified (the report's JSON in the file). `open_gaps` are the last
    run's gaps with a `notified` flag.
    """

    scanned_until: datetime | None = None
    scope: dict[str, list[str]] = field(default_factory=lambda: {"projects": [], "domains": []})
    open_gaps: list[OpenGap] = field(default_factory=list)
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    new_findings_total: dict[str, int] = field(default_factory=dict)
    source_errors_total: dict[str, int] = field(default_factory=dict)
    last_complete_scan: datetime | None = None
    runs: int = 0

    def to_json(self) -> bytes:
        doc = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "scanned_until": rfc3339(self.scanned_until),
            "scope": self.scope,
            "open_gaps": [g.as_dict() for g in self.open_gaps],
            "items": {k: _item_json(v) for k, v in sorted(self.items.items())},
            "new_findings_total": dict(sorted(self.new_findings_total.items())),
            "source_errors_total": dict(sorted(self.source_errors_total.items())),
            "last_complete_scan": rfc3339(self.last_complete_scan),
            "runs": self.runs,
        }
        return (json.dumps(doc, indent=2) + "\n").encode("utf-8")

    @staticmethod
    def from_json(data: bytes, where: str) -> GuardState:
        """Parse a state document; anything else (another schema, a typo) is exit 2 naming it."""

        def bad(why: str) -> ConfigError:
            return ParamConfigError(
                f"state {where}: {why}; refusing to overwrite it (", RESET_STATE, " starts over)"
            )

        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise bad(f"not a JSON document ({e.__class__.__name__})") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise bad("not an elastic-audit guard state (no matching `schema`)")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise bad(
                f"schema_version {doc.get('schema_version')!r}, this tool reads {SCHEMA_VERSION}"
            )
        try:
            gaps = [OpenGap(_gap(g), bool(g["notified"])) for g in doc["open_gaps"]]
            items = {}
            for k, v in doc["items"].items():
                # `doc`: the item as last reported, kept while it is not notified, so a failed
                # delivery is sent again even when the item has left the window.
                entry = {
                    str(a): (_item(v["kind"], b) if a == "doc" else str(b)) for a, b in v.items()
                }
                for name in ("kind", "verdict", "first_seen", "notified"):
                    entry[name]
                items[str(k)] = entry
            scope = {
                "projects": [str(p) for p in doc["scope"]["projects"]],
                "domains": [str(d) for d in doc["scope"]["domains"]],
            }
            return GuardState(
                scanned_until=parse_optional(doc["scanned_until"]),
                scope=scope,
                open_gaps=gaps,
                items=items,
                new_findings_total={str(k): int(v) for k, v in doc["new_findings_total"].items()},
                source_errors_total={str(k): int(v) for k, v in doc["source_errors_total"].items()},
                last_complete_scan=parse_optional(doc["last_complete_scan"]),
                runs=int(doc["runs"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError, ElasticAuditError) as e:
            raise bad(f"malformed ({e.__class__.__name__}: {e})") from None

    def prune(self, now: datetime, keep: set[str]) -> None:
        """Forget items first seen more than RETENTION ago (docs/deployment.md: pruned after 90 days),
        except those this run still reports."""
        horizon = now - RETENTION
        self.items = {
            k: v
            for k, v in self.items.items()
            if k in keep or (parse_optional(v["first_seen"]) or now) >= horizon
        }


def _gap(g: Any) -> Gap:
    """A stored open gap (saved before gap kinds: `failed`), its times checked (RFC 3339)."""
    for t in (g["start"], g["end"]):
        if t is not None:
            parse_time(str(t), name="state")
    return gap_from_json(g)


def _item(kind: Any, doc: Any) -> Finding | Pending:
    """A stored item's `doc`: the report's finding or pending attempt, typed."""
    if not isinstance(doc, dict):
        raise TypeError("an item's doc is not an object")
    return finding_from_json(doc) if kind == "finding" else pending_from_json(doc)


def _item_json(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.as_dict() if k == "doc" else v) for k, v in entry.items()}


def parse_optional(v: Any) -> datetime | None:
    """A stored RFC 3339 time or None (empty string: not yet)."""
    if v is None or v == "":
        return None
    return parse_time(str(v), name="state")


class StateStore:
    """Where the state lives; `read()` gives it with a version token, `write()` checks the token."""

    location: str

    def read_raw(self) -> tuple[bytes | None, str | None]:
        """The stored bytes (None: no state yet) and their version token."""
        raise NotImplementedError

    def read(self) -> tuple[GuardState | None, str | None]:
        data, token = self.read_raw()
        if data is None:
            return None, token
        return GuardState.from_json(data, self.location), token

    def write(self, state: GuardState, token: str | None) -> str:
        raise NotImplementedError


def open_store(location: str) -> StateStore:
    """A store for the guard's state: `s3://bucket/key`, else a local path."""
    if location.startswith("s3://"):
        return S3StateStore(location)
    if not location.strip():
        raise ParamConfigError(STATE, ": empty file name")
    return FileStateStore(location)


class FileStateStore(StateStore):
    """A local file, replaced atomically; the compare-and-write holds an flock on `FILE.lock`."""

    def __init__(self, path: str) -> None:
        self.location = path
        self.path = Path(path)
        directory = self.path.parent if str(self.path.parent) else Path(".")
        if self.path.is_dir():
            raise ParamConfigError(STATE, f" {path}: is a directory")
        if not directory.is_dir():
            raise ParamConfigError(STATE, f" {path}: directory {directory} does not exist")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ParamConfigError(STATE, f" {path}: directory {directory} is not writable")

    def _current(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ConfigError(f"state {self.location}: cannot read ({e.strerror})") from None

    def read_raw(self) -> tuple[bytes | None, str | None]:
        data = self._current()
        return data, (hashlib.sha256(data).hexdigest() if data is not None else None)

    def write(self, state: GuardState, token: str | None) -> str:
        data = state.to_json()
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # held only for the compare and the rename
            current = self._current()
            now = hashlib.sha256(current).hexdigest() if current is not None else None
            if now != token:
                raise StateConflict(
                    f"state {self.location} was written by another run since this one read it; "
                    "nothing notified, the other run holds the state"
                )
            write_atomic(self.path, data)
        return hashlib.sha256(data).hexdigest()


class S3StateStore(StateStore):
    """An S3 object, written with a conditional PutObject (If-Match / If-None-Match)."""

    def __init__(self, uri: str) -> None:
        from forensics.sources.s3_uri import UnreadableURI, split_s3_uri

        self.location = uri
        try:
            self.bucket, self.key = split_s3_uri(uri, need_key=True)
        except UnreadableURI as e:
            raise ParamConfigError(STATE, f": {e}") from None
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from forensics.sources.storage import _make_client

            self._client = _make_client(workers=1)
        return self._client

    def _fail(self, verb: str, err: Exception) -> SourceError | ConfigError:
        from forensics.sources.storage import describe_error

        code = getattr(err, "response", {}).get("Error", {}).get("Code")
        if code == "NoSuchBucket":
            # A typo in the bucket name does not heal by retrying: configuration (exit 2).
            return ParamConfigError(
                STATE,
                f" {self.location}: bucket {self.bucket!r} does not exist "
                f"(cannot {verb} the state)",
            )
        return SourceError(
            "s3", f"cannot {verb} the state: {describe_error(err)}", target=self.location
        )

    def read_raw(self) -> tuple[bytes | None, str | None]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
            data = got["Body"].read()
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None, None
            raise self._fail("read", e) from None
        except BotoCoreError as e:
            raise self._fail("read", e) from None
        return data, str(got["ETag"])

    def write(self, state: GuardState, token: str | None) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        # If-Match on the ETag read, or If-None-Match: * for the first write (S3 conditional
        # writes): a 412 (or 409 ConditionalRequestConflict while another conditional write
        # to the key is in flight, or 404 when the object was deleted) means another run won.
        condition = {"IfMatch": token} if token is not None else {"IfNoneMatch": "*"}
        try:
            put = self.client.put_object(
                Bucket=self.bucket,
                Key=self.key,
                Body=state.to_json(),
                ContentType="application/json",
                **condition,
            )
        except ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = e.response.get("Error", {}).get("Code")
            if status in (409, 412) or code in ("PreconditionFailed", "NoSuchKey"):
                raise StateConflict(
                    f"state {self.location} was written by another run since this one read it "
                    f"({code or status}); nothing notified, the other run holds the state"
                ) from None
            raise self._fail("write", e) from None
        except BotoCoreError as e:
            raise self._fail("write", e) from None
        return str(put["ETag"])
