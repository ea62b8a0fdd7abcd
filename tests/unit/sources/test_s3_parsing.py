"""The short path for flat structures parses a ListObjectsV2 page exactly as botocore does."""

from __future__ import annotations

import botocore.session
import pytest
from botocore import handlers
from botocore.parsers import RestXMLParser

from forensics.sources.s3_parsing import FlatStructureParser, listing_is_broken, parsers
from forensics.sources.storage import _timestamp

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
OBJECT = (
    "<Contents><Key>{key}</Key><LastModified>2026-09-08T03:00:00.{ms:03d}Z</LastModified>"
    "<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>{size}</Size>"
    "<StorageClass>STANDARD</StorageClass>{extra}</Contents>"
)
EXTRAS = [
    "",
    "<ChecksumAlgorithm>CRC32</ChecksumAlgorithm><ChecksumAlgorithm>SHA256</ChecksumAlgorithm>",
    "<ChecksumType>FULL_OBJECT</ChecksumType>",
    "<Owner><DisplayName>o</DisplayName><ID>1234</ID></Owner>",  # nested: botocore's own path
    "<RestoreStatus><IsRestoreInProgress>true</IsRestoreInProgress></RestoreStatus>",
    "<Unmodelled>x</Unmodelled>",  # a member the model does not declare: ignored by both
    "<ChecksumType/>",  # an empty element: "" for both
]


def _page(namespace: bool) -> bytes:
    objects = "".join(
        OBJECT.format(key=f"a/&amp;b &lt;{i}&gt;/outputs.pb", ms=i, size=i, extra=e)
        for i, e in enumerate(EXTRAS)
    )
    xmlns = f' xmlns="{NS}"' if namespace else ""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult{xmlns}><Name>b</Name>'
        "<Prefix>a/</Prefix><KeyCount>7</KeyCount><MaxKeys>1000</MaxKeys>"
        "<IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken>"
        f"<StartAfter>a/</StartAfter><EncodingType></EncodingType>{objects}"
        "<CommonPrefixes><Prefix>a/x/</Prefix></CommonPrefixes></ListBucketResult>"
    ).encode()


@pytest.mark.parametrize("namespace", [True, False])
def test_a_listing_page_parses_as_botocore_parses_it(namespace):
    shape = botocore.session.get_session().get_service_model("s3")
    output = shape.operation_model("ListObjectsV2").output_shape
    response = {"status_code": 200, "headers": {"x-amz-request-id": "r"}, "body": _page(namespace)}
    ours = FlatStructureParser(timestamp_parser=_timestamp).parse(dict(response), output)
    theirs = RestXMLParser(timestamp_parser=_timestamp).parse(dict(response), output)
    assert ours == theirs
    assert ours["Contents"][0]["Key"] == "a/&b <0>/outputs.pb"
    assert ours["Contents"][1]["ChecksumAlgorithm"] == ["CRC32", "SHA256"]


def test_the_factory_makes_the_short_parser_for_s3_only():
    factory = parsers(_timestamp)
    assert type(factory.create_parser("rest-xml")) is FlatStructureParser
    assert not isinstance(factory.create_parser("json"), FlatStructureParser)


def _error(code: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        "<Message>We encountered an internal error. Please try again.</Message>"
        "<RequestId>r</RequestId></Error>"
    ).encode()


def _bodies() -> list[bytes]:
    page = _page(True)
    cut = [page[:n] for n in (1, 40, len(page) // 2, len(page) - 1)]  # a connection cut short
    return [page, page + b"\n", _page(False), _error("InternalError"), b"<Error/>", *cut]


@pytest.mark.parametrize("body", _bodies())
def test_a_listing_page_is_judged_broken_exactly_when_botocore_judges_it(body):
    assert listing_is_broken(body) == handlers._looks_like_special_case_error(200, body)


def test_a_client_retries_a_listing_page_cut_short_and_parses_each_page_once(monkeypatch):
    # botocore's own check (a second parse of every page) is out of the way; ours turns a page
    # cut short into the 500 botocore would have made of it, and the retry reads the whole page.
    from botocore.awsrequest import AWSResponse

    from forensics.sources.storage import _make_client

    for name, value in (("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    full = _page(True)
    bodies = [full[: len(full) // 2], full]
    parses = []
    original = handlers._looks_like_special_case_error
    monkeypatch.setattr(
        handlers,
        "_looks_like_special_case_error",
        lambda *a: parses.append(1) or original(*a),
    )
    client = _make_client(retries=3)

    def answer(request, **kwargs):
        raw = type("Raw", (), {"stream": lambda self, **k: iter([bodies.pop(0)])})()
        return AWSResponse(request.url, 200, {}, raw)

    client.meta.events.register_first("before-send.s3.ListObjectsV2", answer)
    page = client.list_objects_v2(Bucket="b", Prefix="a/")
    assert len(page["Contents"]) == len(EXTRAS)
    assert bodies == [] and parses == []
