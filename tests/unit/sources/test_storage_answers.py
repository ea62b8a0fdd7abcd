"""ObjectStore against canned S3 answers: what a broken answer becomes, and what is counted.

The answers are given through botocore's documented `before-send` event (a handler may return
an `AWSResponse` that fulfils the request), so no server runs and every botocore step after the
wire (retries, the S3 200-error check, parsing) is botocore's own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pytest
from botocore.awsrequest import AWSResponse

from forensics.errors import FailureKind
from forensics.sources.storage import ObjectStore, _make_client, parse_s3_time

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
KEYS = [f"run/ckpt/step-{i}.pt" for i in range(3)]


def _page(keys: list[str]) -> bytes:
    objects = "".join(
        f"<Contents><Key>{k}</Key><LastModified>2026-09-08T03:00:0{i}.000Z</LastModified>"
        f"<ETag>&quot;e&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>"
        for i, k in enumerate(keys)
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{NS}"><Name>b</Name>'
        f"<Prefix>run/ckpt/</Prefix><KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>false</IsTruncated>{objects}</ListBucketResult>"
    ).encode()


ERROR_200 = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: object):
        yield self.body


Answer = tuple[int, dict[str, str], bytes]


@pytest.fixture
def store(monkeypatch) -> Callable[[str, list[Answer]], ObjectStore]:
    """A store whose `operation` requests are answered, in turn, by the given answers."""
    for name, value in (("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_MAX_ATTEMPTS"):
        monkeypatch.delenv(name, raising=False)
    # botocore's standard retry mode waits up to a second between attempts; no need here
    monkeypatch.setattr("time.sleep", lambda _: None)

    def make(operation: str, answers: list[Answer]) -> ObjectStore:
        client = _make_client(retries=3)
        built = ObjectStore(client)

        def answer(request, **_):
            status, headers, body = answers.pop(0)
            return AWSResponse(request.url, status, headers, _Raw(body))

        # registered after the store's own counter: both run for every request sent
        client.meta.events.register(f"before-send.s3.{operation}", answer)
        return built

    return make


def test_a_listing_page_cut_short_is_retried_not_counted_as_a_part(store):
    full = _page(KEYS)
    answers = [(200, {}, full[: len(full) // 2]), (200, {}, full)]
    s = store("ListObjectsV2", answers)
    listing = s.list_prefix("s3://b/run/ckpt")
    assert (listing.state, listing.objects) == ("present", 3)
    assert listing.latest == datetime(2026, 9, 8, 3, 0, 2, tzinfo=timezone.utc)
    assert listing.latest.tzinfo is timezone.utc
    assert answers == [] and s.calls == {"ListObjectsV2": 2}


def test_an_error_document_under_200_is_retried(store):
    s = store("ListObjectsV2", [(200, {}, ERROR_200), (200, {}, _page(KEYS))])
    assert s.list_prefix("s3://b/run/ckpt").objects == 3
    assert s.calls == {"ListObjectsV2": 2}


def test_a_listing_cut_short_every_time_is_unknown_never_a_count(store):
    cut = _page(KEYS)[:100]
    s = store("ListObjectsV2", [(200, {}, cut)] * 4)
    listing = s.list_prefix("s3://b/run/ckpt")
    assert listing.state == "unknown"
    assert listing.failure == FailureKind.SERVER_FAILED
    assert s.calls == {"ListObjectsV2": 4}  # the first request and 3 retries


def test_calls_count_every_request_sent_by_operation_retries_included(store):
    slow = (503, {}, b"")
    s = store(
        "HeadObject", [slow, slow, (200, {"Last-Modified": "Tue, 08 Sep 2026 03:00:00 GMT"}, b"")]
    )
    assert s.check_object("s3://b/run/outputs.pb").state == "present"
    assert s.calls == {"HeadObject": 3}
    assert sum(s.calls.values()) == 3


def test_a_head_404_in_a_bucket_not_yet_seen_is_told_apart_by_a_get(store):
    no_key = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchKey</Code>'
        b"<Message>The specified key does not exist.</Message></Error>"
    )
    s = store("HeadObject", [(404, {}, b"")])
    s._client.meta.events.register(
        "before-send.s3.GetObject",
        lambda request, **_: AWSResponse(request.url, 404, {}, _Raw(no_key)),
    )
    assert s.check_object("s3://b/run/outputs.pb").state == "missing"
    assert s.calls == {"HeadObject": 1, "GetObject": 1}


@pytest.mark.parametrize(
    "value",
    [
        "2026-09-08T03:00:02.000Z",  # a listing's LastModified
        "2026-09-08T03:00:02Z",
        "2026-09-08T05:00:02.123456+02:00",
        "Tue, 08 Sep 2026 03:00:02 GMT",  # a HEAD's Last-Modified header
        1788836402,  # epoch seconds
    ],
)
def test_the_s3_time_parser_reads_what_botocores_default_reads(value):
    from botocore.parsers import DEFAULT_TIMESTAMP_PARSER

    assert parse_s3_time(value) == DEFAULT_TIMESTAMP_PARSER(value)
    assert parse_s3_time(value).utcoffset() is not None


def test_a_time_neither_parser_reads_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="Invalid timestamp"):
        parse_s3_time("yesterday")


def test_the_client_reads_listing_times_with_the_s3_time_parser(store, monkeypatch):
    seen: list[object] = []

    def recording(value: object) -> datetime:
        seen.append(value)
        return parse_s3_time(value)

    monkeypatch.setattr("forensics.sources.storage.parse_s3_time", recording)
    s = store("ListObjectsV2", [(200, {}, _page(KEYS))])
    assert s.list_prefix("s3://b/run/ckpt").objects == 3
    assert seen == [f"2026-09-08T03:00:0{i}.000Z" for i in range(3)]
