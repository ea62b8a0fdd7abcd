"""What an answer that is not Loki's is called, and how any answer's body is shown: one short line.

The sockets-and-CLI side is tests/scan/test_scan_loki_not_loki.py; these are the functions alone.
"""

from __future__ import annotations

import pytest

from forensics.sources.loki_answers import not_loki, object_store_error, snippet, summary

# moto's 404 for a bucket that does not exist; MinIO and AWS answer the same shape.
NO_SUCH_BUCKET = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchBucket</Code><Message>The '
    b"specified bucket does not exist</Message><BucketName>loki</BucketName><RequestId>x"
    b"</RequestId><HostId>y</HostId></Error>"
)
ACCESS_DENIED = (  # AWS S3's answer to an unsigned GET, no XML declaration, text/xml
    b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message>"
    b"<RequestId>R</RequestId><HostId>H</HostId></Error>"
)


@pytest.mark.parametrize(
    ("ctype", "body", "code"),
    [
        ("application/xml", NO_SUCH_BUCKET, "NoSuchBucket"),
        ("no content type", NO_SUCH_BUCKET, "NoSuchBucket"),
        ("text/xml", ACCESS_DENIED, "AccessDenied"),
        ("application/xml", b"\xef\xbb\xbf" + NO_SUCH_BUCKET, "NoSuchBucket"),
    ],
)
def test_an_s3_style_xml_error_is_named_by_its_code(ctype, body, code):
    assert object_store_error(ctype, body) == code
    assert summary(ctype, body) == f"an S3-style XML error answer ({code})"


@pytest.mark.parametrize(
    ("ctype", "body"),
    [
        ("text/plain", b"NoSuchBucket: The specified bucket does not exist\n\tstatus code: 404"),
        ("text/plain", ACCESS_DENIED),  # XML-looking text without XML's declaration or type
        ("application/xml", b'<?xml version="1.0"?><ListAllMyBucketsResult/>'),
        ("application/xml", b"<Error><Code>" + b"A" * 200 + b"</Code></Error>"),
        ("application/json", b'{"Error": {"Code": "NoSuchBucket"}}'),
        ("text/html", b"<html><title>Error</title><Error><Code>X</Code></Error></html>"),
    ],
)
def test_anything_else_is_no_object_store_error(ctype, body):
    assert object_store_error(ctype, body) is None


def test_the_not_loki_line_names_the_object_store_and_never_shows_the_xml():
    line = str(not_loki("http://127.0.0.1:9000", 404, "application/xml", NO_SUCH_BUCKET))
    assert line == (
        "not Loki at http://127.0.0.1:9000: HTTP 404, application/xml, an S3-style XML error "
        "answer (NoSuchBucket) — an object store's address? (Loki answers JSON or plain text); "
        "point the Loki URL at Loki's HTTP API (the address that serves /loki/api/v1/*) — "
        "LOKI_ADDR or [loki] url"
    )


def test_another_xml_document_is_named_by_its_root_element():
    body = b'<?xml version="1.0"?>\n<ListAllMyBucketsResult xmlns="x"><Owner/></ListAllMyBuckets'
    body += b"Result>"  # what S3 answers a GET of its root
    assert summary("application/xml", body) == "an XML document (ListAllMyBucketsResult)"


@pytest.mark.parametrize(
    "body",
    [
        b"upstream failed\n\tat Handler.serve(Handler.java:12)\r\n\tat Main.run\n\n" * 40,
        b"\n\n  404 page not found  \n\n",
        b"line one\x00\x1b[31m\nline two" + "\u2028".encode(),
        NO_SUCH_BUCKET,
    ],
)
def test_any_body_shown_in_an_error_is_one_short_printable_line(body):
    text = snippet(body)
    assert text.isprintable() and len(text) <= 500, text
    assert "  " not in text and text == text.strip() and text
    words = body.decode("utf-8", "replace").split()
    assert text.startswith(words[0].split("\x00")[0])


def test_a_long_body_is_cut_short_and_says_so():
    text = snippet(b"word " * 1000)
    assert len(text) == 500 and text.endswith("…")


def test_a_short_one_line_body_is_shown_as_it_is():
    assert snippet(b"too many outstanding requests\n") == "too many outstanding requests"
