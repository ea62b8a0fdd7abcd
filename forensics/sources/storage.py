"""S3 through boto3: does an attempt's `outputs.pb` exist, and what lies under a checkpoint prefix.

boto3's and botocore's public API only, so that upgrading them cannot break it (what that costs:
docs/performance.md, "S3 through the public API only").
"""

from __future__ import annotations

import os
import platform
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore
import botocore.session
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from forensics import __version__
from forensics.errors import ConfigError, FailureKind, SourceError
from forensics.failures import os_failure
from forensics.model import UTC, KeyPage, ObjectCheck, PrefixListing
from forensics.secrets import safe_url
from forensics.sources.expiry import describe_rule, expires, judge_outputs
from forensics.sources.s3_uri import OUTPUTS_FILE, UnreadableURI, split_s3_uri

# Error codes S3 (and botocore for body-less HEAD answers: the status as a string) uses for
# "slow down"; botocore's standard retry mode retries these before we ever see them.
_THROTTLE_CODES = frozenset(
    {"SlowDown", "503", "Throttling", "ThrottlingException", "RequestLimitExceeded"}
)


class BrokenListing(Exception):
    """A ListObjectsV2 page that says the listing goes on but gives no new token to go on from:
    what follows cannot be read, and the listing must not pass for complete."""

    def __init__(self) -> None:
        super().__init__("S3 answered a truncated listing page without a new continuation token")


def _status(err: ClientError) -> int | None:
    return err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", "") or _status(err) or "")


def describe_error(err: BaseException) -> str:
    """A short reason for an S3 failure that never carries credentials or signatures."""
    if isinstance(err, ClientError):
        code, status = _code(err), _status(err)
        meta = err.response.get("ResponseMetadata", {})
        # HEAD answers have no error document: botocore then uses the status as the code.
        what = f"{status} {code}" if code != str(status) else str(status)
        if status == 403 or code in ("AccessDenied", "AllAccessDisabled"):
            return f"forbidden ({what})"
        if code == "NoSuchBucket":
            return "no such bucket"
        if status == 503 or code in _THROTTLE_CODES:
            attempts = meta.get("RetryAttempts", 0) + 1
            return f"throttled ({what}, gave up after {attempts} attempts)"
        if status == 301 or code in ("PermanentRedirect", "AuthorizationHeaderMalformed"):
            return f"bucket is in another region ({what})"
        return f"S3 error ({what})"
    if isinstance(err, BrokenListing):
        return str(err)
    if isinstance(err, (NoCredentialsError, PartialCredentialsError)):
        return "no usable AWS credentials (standard chain: env, profile, instance role)"
    if isinstance(err, ParamValidationError):
        return "malformed URI: S3 rejects the bucket or key name"
    if isinstance(err, ReadTimeoutError):
        return "S3 read timed out"
    if isinstance(err, (EndpointConnectionError, BotoConnectionError, ConnectionClosedError)):
        endpoint = getattr(err, "kwargs", {}).get("endpoint_url")
        where = f" {safe_url(endpoint, keep_path=True)}" if endpoint else ""
        return f"cannot reach S3{where} ({type(err).__name__})"
    return f"S3 client error ({type(err).__name__})"


_AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
    }
)
_NOT_FOUND_CODES = frozenset({"NoSuchBucket", "NoSuchKey", "NoSuchLifecycleConfiguration"})


def failure_of(err: BaseException) -> FailureKind:
    """What an S3 failure means, from botocore's exception type and S3's error code/status."""
    if isinstance(err, ClientError):
        code, status = _code(err), _status(err) or 0
        if status in (401, 403) or code in _AUTH_CODES:
            return FailureKind.AUTH_REFUSED
        if status == 404 or code in _NOT_FOUND_CODES:
            return FailureKind.NOT_FOUND
        if status in (429, 503) or code in _THROTTLE_CODES:
            return FailureKind.THROTTLED
        if status >= 500:
            return FailureKind.SERVER_FAILED
        if status >= 300:  # a redirect to another region, a malformed request
            return FailureKind.REJECTED
        return FailureKind.FAILED
    if isinstance(err, BrokenListing):
        return FailureKind.BAD_ANSWER
    if isinstance(err, (NoCredentialsError, PartialCredentialsError)):
        return FailureKind.NO_CREDENTIALS
    if isinstance(err, (ParamValidationError, UnreadableURI)):
        return FailureKind.REJECTED
    if isinstance(err, (ReadTimeoutError, ConnectTimeoutError)):
        return FailureKind.TIMED_OUT
    if isinstance(err, (EndpointConnectionError, BotoConnectionError, ConnectionClosedError)):
        below = getattr(err, "kwargs", {}).get("error")
        found = os_failure(below) if isinstance(below, BaseException) else None
        return found or os_failure(err) or FailureKind.UNREACHABLE
    return FailureKind.FAILED


def _unknown(err: BaseException) -> ObjectCheck:
    """An `unknown` answer: why (`describe_error`), and what that means (`failure_of`)."""
    reason = str(err) if isinstance(err, UnreadableURI) else describe_error(err)
    return ObjectCheck("unknown", reason, failure=failure_of(err))


def _source_error(message: str, uri: str, err: BaseException) -> SourceError:
    return SourceError("s3", message, target=uri, kind=failure_of(err))


def _is_folder_marker(obj: dict[str, Any]) -> bool:
    # The S3 console's "create folder" and some tools write a zero-byte `name/` object; it holds
    # no checkpoint, so a prefix with only markers is empty for the people restoring a run.
    return obj["Key"].endswith("/") and obj.get("Size", 0) == 0


# The S3 operations this store sends; each request of one (a retry too) is counted in `calls`.
_OPERATIONS = (
    "HeadObject",
    "GetObject",
    "ListObjectsV2",
    "GetBucketLifecycleConfiguration",
    "PutObject",
)


class ObjectStore:
    """Read-only S3 answers for a scan: one object's existence, one prefix's contents.

    Every answer is plain data; an error becomes `unknown` with a reason (never `missing` or
    `empty`), so a scan can report what it could not see. Thread-safe: a boto3 client may be
    shared between threads, and `calls` is updated under a lock.
    """

    def __init__(self, client: BaseClient | None = None) -> None:
        self._client = client if client is not None else _make_client()
        self._lock = threading.Lock()
        # Requests sent, by S3 operation, retries included (each listing page is one).
        self.calls: Counter[str] = Counter()
        # Buckets proven to exist: a 404 from HeadObject there is a missing key, not a bucket.
        self._buckets_seen: set[str] = set()
        self._witnesses: dict[str, ObjectCheck] = {}  # node inputs.pb -> present / missing
        self._witness_locks: dict[str, threading.Lock] = {}
        self._lifecycles: dict[str, list[dict[str, Any]] | str] = {}  # bucket -> rules or error
        events = self._client.meta.events
        for operation in _OPERATIONS:
            events.register(f"before-send.s3.{operation}", partial(self._count, operation))

    @classmethod
    def default(
        cls,
        *,
        workers: int = 8,
        retries: int = 4,
        retry_mode: str = "standard",
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
    ) -> ObjectStore:
        """A store on boto3's standard chain (AWS_PROFILE, AWS_ENDPOINT_URL_S3, ...).

        `retries` is the number of retries after the first attempt (botocore's `max_attempts`);
        503 SlowDown is retried with backoff by botocore's `retry_mode`. The connection pool
        holds at least `workers` connections so concurrent checks do not queue for a socket.
        """
        return cls(
            _make_client(
                workers=workers,
                retries=retries,
                retry_mode=retry_mode,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
            )
        )

    @property
    def endpoint(self) -> str:
        return safe_url(self._client.meta.endpoint_url, keep_path=True)

    @property
    def region(self) -> str | None:
        return self._client.meta.region_name

    def __repr__(self) -> str:
        return f"ObjectStore(endpoint={self.endpoint!r})"

    def _count(self, operation: str, **_: Any) -> None:
        # Returns None: a before-send handler's answer would stand in for S3's.
        with self._lock:
            self.calls[operation] += 1

    def check_object(self, uri: str) -> ObjectCheck:
        """`present`, `missing` (404 / NoSuchKey) or `unknown` with the reason."""
        try:
            bucket, key = split_s3_uri(uri, need_key=True)
        except UnreadableURI as e:
            return _unknown(e)
        try:
            self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if _status(e) != 404:
                return _unknown(e)
        except BotoCoreError as e:
            return _unknown(e)
        else:
            self._buckets_seen.add(bucket)
            return ObjectCheck("present")
        if bucket in self._buckets_seen:
            return ObjectCheck("missing")
        return self._confirm_missing(bucket, key)

    def _confirm_missing(self, bucket: str, key: str) -> ObjectCheck:
        # HEAD answers carry no body, so its 404 cannot say whether the key or the whole bucket
        # is missing; a GET's error document names NoSuchKey or NoSuchBucket.
        try:
            found = self._client.get_object(Bucket=bucket, Key=key)
        except ClientError as e:
            if _code(e) == "NoSuchKey":
                self._buckets_seen.add(bucket)
                return ObjectCheck("missing")
            return _unknown(e)
        except BotoCoreError as e:
            return _unknown(e)
        found["Body"].close()  # written between the two calls; the body itself is not needed
        self._buckets_seen.add(bucket)
        return ObjectCheck("present")

    def outputs_check(self, output_dir: str, inputs_uri: str | None = None) -> ObjectCheck:
        """Whether the attempt wrote `<output_dir>outputs.pb` (the dir ends with `/`); when it
        is missing and `inputs_uri` (the node's inputs.pb) is given, that witness is read too
        (one more HEAD, for missing outputs only) to tell expired from never written."""
        if not output_dir.endswith("/"):
            output_dir += "/"
        return self.judged(self.check_object(output_dir + OUTPUTS_FILE), inputs_uri)

    def judged(
        self, outputs: ObjectCheck, inputs_uri: str | None, witness: ObjectCheck | None = None
    ) -> ObjectCheck:
        """A missing outputs.pb judged by its node's inputs.pb (`expiry.judge_outputs`; read
        once per node unless `witness`, from a listing, already says); an expired folder says
        what the bucket's lifecycle configuration says about it."""
        if outputs.state != "missing" or inputs_uri is None:
            return outputs
        judged = judge_outputs(outputs, witness or self._witness(inputs_uri), inputs_uri)
        if judged.expired:
            bucket, key = split_s3_uri(inputs_uri, need_key=True)
            why = self.lifecycle_note(bucket, key)
            judged = ObjectCheck(judged.state, f"{judged.reason}; {why}", expired=True)
        return judged

    def lifecycle_note(self, bucket: str, key: str) -> str:
        """What the bucket's lifecycle configuration says about `key`: the rule that expires it,
        that none does, or why it could not be read (GetBucketLifecycleConfiguration, once per
        bucket per scan, only for folders found gone)."""
        with self._lock:
            key_lock = self._witness_locks.setdefault(f"lifecycle:{bucket}", threading.Lock())
        with key_lock:
            if bucket not in self._lifecycles:
                self._lifecycles[bucket] = self._read_lifecycle(bucket)
        rules = self._lifecycles[bucket]
        if isinstance(rules, str):
            return f"the bucket's lifecycle configuration could not be read ({rules})"
        for rule in rules:
            if expires(rule, key):
                return f"the bucket's lifecycle rule {describe_rule(rule)} expires it"
        return "no lifecycle rule of the bucket expires it: it was deleted"

    def _read_lifecycle(self, bucket: str) -> list[dict[str, Any]] | str:
        try:
            answer = self._client.get_bucket_lifecycle_configuration(Bucket=bucket)
        except ClientError as e:
            if _code(e) == "NoSuchLifecycleConfiguration":
                return []
            return describe_error(e)
        except BotoCoreError as e:
            return describe_error(e)
        return list(answer.get("Rules", ()))

    def _witness(self, inputs_uri: str) -> ObjectCheck:
        """A node's inputs.pb, read once per scan (the subtasks of a map share their node's)."""
        with self._lock:
            key_lock = self._witness_locks.setdefault(inputs_uri, threading.Lock())
        with key_lock:  # concurrent subtasks of one map wait for the one read
            known = self._witnesses.get(inputs_uri)
            if known is not None:
                return known
            check = self.check_object(inputs_uri)
            if check.state != "unknown":  # an error is retried by the next attempt needing it
                self._witnesses[inputs_uri] = check
            return check

    def list_prefix(self, uri: str) -> PrefixListing:
        """Count and newest LastModified under a prefix (`s3://b/p` lists `p/`), or why unknown.

        Pages through ListObjectsV2 keeping only the count and the maximum, so memory stays
        flat however many objects there are; S3 has no server-side sort by time.
        """
        try:
            bucket, prefix = _listing_prefix(uri)
        except UnreadableURI as e:
            return PrefixListing(uri, "unknown", reason=str(e), failure=FailureKind.REJECTED)
        listed = f"s3://{bucket}/{prefix}"
        count = 0
        latest: datetime | None = None
        try:
            for page in self._pages(bucket, prefix):
                for obj in page.get("Contents", ()):
                    if _is_folder_marker(obj):
                        continue
                    count += 1
                    modified = obj["LastModified"]
                    if latest is None or modified > latest:
                        latest = modified
        except (ClientError, BotoCoreError, BrokenListing) as e:
            return PrefixListing(listed, "unknown", reason=describe_error(e), failure=failure_of(e))
        self._buckets_seen.add(bucket)
        if latest is None:
            return PrefixListing(listed, "empty")
        return PrefixListing(listed, "present", objects=count, latest=latest.astimezone(UTC))

    def object_times(self, uri: str, limit: int = 500) -> list[datetime]:
        """When each object under a prefix was last written (oldest first, the newest `limit`):
        the incident page's checkpoint writes. SourceError when S3 cannot answer."""
        try:
            bucket, prefix = _listing_prefix(uri)
        except UnreadableURI as e:
            raise _source_error(str(e), uri, e) from None
        times: list[datetime] = []
        try:
            for page in self._pages(bucket, prefix):
                times += [
                    o["LastModified"].astimezone(UTC)
                    for o in page.get("Contents", ())
                    if not _is_folder_marker(o)
                ]
                times = sorted(times)[-limit:]  # memory stays at `limit` however many there are
        except (ClientError, BotoCoreError, BrokenListing) as e:
            raise _source_error(f"listing {uri}: {describe_error(e)}", uri, e) from None
        return times

    def list_from(
        self, bucket: str, prefix: str, start_after: str, max_keys: int = 1000
    ) -> KeyPage | ObjectCheck:
        """One ListObjectsV2 page: the keys under `prefix` after `start_after`, in S3's order
        (UTF-8 binary, which is Python's order of `str`), or an `unknown` check with why.

        Every key in the range the page covers (`KeyPage.covers`) that it does not list is
        missing: S3 lists with strong read-after-write consistency, and a successful listing
        proves the bucket exists.
        """
        try:
            page = self._client.list_objects_v2(
                Bucket=bucket, Prefix=prefix, StartAfter=start_after, MaxKeys=max_keys
            )
        except (ClientError, BotoCoreError) as e:
            return _unknown(e)
        self._buckets_seen.add(bucket)
        keys = [o["Key"] for o in page.get("Contents", ())]
        go_on = bool(page.get("IsTruncated"))
        if go_on and not keys:
            # A page that goes on but lists nothing covers nothing: not an answer to trust.
            return ObjectCheck("unknown", "S3 answered a truncated listing page without keys")
        return KeyPage(start_after, frozenset(keys), keys[-1] if go_on else None, prefix)

    def _pages(self, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
        """ListObjectsV2's pages under `prefix`, following the continuation tokens.

        Raises `BrokenListing` at a truncated page with no new token, where botocore's
        paginator would end quietly: a listing cut short is no count of what a prefix holds
        (why not the paginator otherwise: docs/performance.md, "What is called")."""
        args = {"Bucket": bucket, "Prefix": prefix}
        seen: set[str] = set()
        while True:
            page = self._client.list_objects_v2(**args)
            yield page
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")
            if not token or token in seen:
                raise BrokenListing()
            seen.add(token)
            args["ContinuationToken"] = token

    def put_page(self, uri: str, body: bytes, content_type: str) -> str:
        """Write one object (the incident page); its HTTPS address at this endpoint. SourceError
        when S3 refuses; UnreadableURI for a URI without a key."""
        bucket, key = split_s3_uri(uri, need_key=True)
        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
        except (ClientError, BotoCoreError) as e:
            raise _source_error(f"cannot write {uri}: {describe_error(e)}", uri, e) from None
        return object_url(self._client.meta.endpoint_url, bucket, key)


def _listing_prefix(uri: str) -> tuple[str, str]:
    """`s3://bucket/some/dir` -> (`bucket`, `some/dir/`): a listing's prefix ends in `/`, so
    `.../ckpt` does not also list `.../ckpt-old/`. UnreadableURI for a non-S3 URI."""
    bucket, key = split_s3_uri(uri, need_key=False)
    return bucket, key if not key or key.endswith("/") else key + "/"


def object_url(endpoint: str, bucket: str, key: str) -> str:
    """An object's path-style HTTPS address (`<endpoint>/<bucket>/<key>`), as S3 and every
    S3-compatible store answer it; no credentials (the endpoint's user info is dropped)."""
    from urllib.parse import quote

    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}/{quote(bucket)}/{quote(key)}"


# A fixed User-Agent: botocore otherwise rebuilds its default one (platform, config and feature
# tags) on every request, a tenth of the CPU an outputs.pb HEAD costs the scan.
_USER_AGENT = (
    f"elastic-audit/{__version__} Boto3/{boto3.__version__} Botocore/{botocore.__version__} "
    f"Python/{platform.python_version()}"
)


def parse_s3_time(value: object) -> datetime:
    """A timestamp of an S3 answer, as botocore's default parser reads it: ISO 8601 (listings:
    `2026-09-04T00:00:00.000Z`), an HTTP date (a HEAD's `Last-Modified`) or epoch seconds."""
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC)
    text = str(value).strip()
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        try:
            parsed = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            raise ValueError(f"Invalid timestamp {text!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _make_client(
    *,
    workers: int = 8,
    retries: int = 4,
    retry_mode: str = "standard",
    connect_timeout: float = 5.0,
    read_timeout: float = 30.0,
) -> BaseClient:
    # botocore reads only AWS_DEFAULT_REGION; the AWS CLI v2 and the other SDKs let AWS_REGION
    # win over it, and docs/configuration.md (S3) promises the standard settings.
    region = os.environ.get("AWS_REGION") or None
    try:
        core = botocore.session.get_session()
        # Retry settings given the standard way (AWS_MAX_ATTEMPTS, AWS_RETRY_MODE, or
        # max_attempts / retry_mode in the profile) win; a client Config would override them.
        retry: dict[str, Any] = {}
        # (retry_mode has a default, "legacy", so ask where a user would have set it.)
        if not (os.environ.get("AWS_RETRY_MODE") or core.get_scoped_config().get("retry_mode")):
            retry["mode"] = retry_mode
        if core.get_config_variable("max_attempts") is None:
            retry["max_attempts"] = retries
        config = Config(
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries=retry,
            max_pool_connections=max(10, workers),
            user_agent=_USER_AGENT,
            # The requests are built here, from parsed URIs: botocore's check of every parameter
            # against the service model is a quarter of a HEAD's CPU and finds nothing.
            parameter_validation=False,
        )
        # S3 writes every LastModified as `2026-09-04T00:00:00.000Z`; botocore's default parser
        # (dateutil) is most of a listing page's CPU. `set_parser_defaults(timestamp_parser=...)`
        # is the factory's public hook for this (docs/performance.md, "S3 through the public API").
        core.get_component("response_parser_factory").set_parser_defaults(
            timestamp_parser=parse_s3_time
        )
        session = boto3.session.Session(botocore_session=core, region_name=region)
        return session.client("s3", config=config)
    except ProfileNotFound as e:
        raise ConfigError(f"AWS profile {e.kwargs.get('profile')!r} is not configured") from None
    except BotoCoreError as e:
        # botocore's own messages name settings and providers, never secret values
        raise ConfigError(f"cannot set up the S3 client: {e}") from None
