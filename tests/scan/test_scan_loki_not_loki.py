"""Something that is not Loki at LOKI_ADDR gets one line saying what answered (issue 43, item 9).

Grafana's URL (an HTML page, 200 or 404), any HTML page, another service's JSON, Flyte Admin's
gRPC port (HTTP/2 frames), an object store's S3 endpoint (its XML error answer): `scan` exits 2
with one stderr line naming the status, the content type and a short safe summary — never the
page, never raw bytes. A proxy's page in front of a real Loki stays what it was: retried
(tests/sources/test_loki_client.py). Any other answer's body, shown in a gap, is one short line.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from support.answering import answering
from support.cli import run
from support.scan import WINDOW, sandbox_fixtures

from forensics.config import LokiSettings
from forensics.model import UTC, Window
from forensics.retry import RetryPolicy
from forensics.sandbox.incident import reference_scenario
from forensics.sources.loki import LokiClient
from forensics.sources.loki_answers import NotLoki

pytestmark = pytest.mark.integration

box, env = sandbox_fixtures(reference_scenario)

GRAFANA = (
    b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
    b'<title>Grafana</title>\n<base href="/" />\n</head>\n<body>'
    + b'<div class="preloader">' * 2000
    + b"<script>window.grafanaBootData = {};</script></body></html>\n"
)
# What moto's S3 answers a GET of /loki/api/v1/query_range (bucket `loki`, no such bucket).
NO_SUCH_BUCKET = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchBucket</Code><Message>The '
    b"specified bucket does not exist</Message><BucketName>loki</BucketName><RequestId>x"
    b"</RequestId><HostId>y</HostId></Error>"
)
XML = {"Content-Type": "application/xml"}
HOUR = Window(datetime(2026, 9, 10, tzinfo=UTC), datetime(2026, 9, 10, 1, tzinfo=UTC))


def scan_at(url: str, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setenv("LOKI_ADDR", url)
    code, _out, err = run(["scan", *WINDOW, "-o", "json", "--no-progress"], capsys)
    return code, err


def assert_one_line(err: str, *says: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    (line,) = lines
    assert line.startswith("elastic-audit: error: not Loki at http://127.0.0.1:"), line
    for text in says:
        assert text in line, line
    assert "<" not in line and "\\x00" not in line and line.isprintable()
    assert len(line) < 400


@pytest.mark.parametrize("status", [200, 404])
def test_grafanas_url_is_named_in_one_line(status, monkeypatch, capsys):
    with answering(status, GRAFANA, {"Content-Type": "text/html; charset=UTF-8"}) as url:
        code, err = scan_at(url, monkeypatch, capsys)
    assert code == 2
    assert_one_line(
        err, f"HTTP {status}, text/html, an HTML page titled 'Grafana'", "Grafana's URL"
    )


@pytest.mark.parametrize(
    ("status", "body", "keys"),
    [
        (200, b'{"message":"hello","traceID":"0af7"}', "message, traceID"),
        (404, b'{"message":"Not found"}', "message"),
    ],
)
def test_a_json_that_is_not_lokis_is_named_by_its_keys(status, body, keys, monkeypatch, capsys):
    with answering(status, body, {"Content-Type": "application/json"}) as url:
        code, err = scan_at(url, monkeypatch, capsys)
    assert code == 2
    assert_one_line(err, f"HTTP {status}, application/json, a JSON object with keys {keys}")
    assert "hello" not in err and "Not found" not in err  # keys, never values


def test_the_admin_grpc_port_is_named_not_shown_as_bytes(box, monkeypatch, capsys):
    code, err = scan_at(f"http://{box.env['FLYTE_PLATFORM_URL']}", monkeypatch, capsys)
    assert code == 2
    assert_one_line(err, "an HTTP/2 SETTINGS frame (a gRPC port")


@pytest.mark.parametrize("status", [404, 403])
def test_an_object_stores_xml_error_is_named_in_one_line(status, monkeypatch, capsys):
    with answering(status, NO_SUCH_BUCKET, XML) as url:
        code, err = scan_at(url, monkeypatch, capsys)
    assert code == 2
    assert_one_line(
        err,
        f"HTTP {status}, application/xml, an S3-style XML error answer (NoSuchBucket)",
        "an object store's address?",
    )
    assert "bucket does not exist" not in err and "BucketName" not in err  # named, not shown


def test_an_object_stores_xml_error_is_not_loki_at_the_client():
    with answering(404, NO_SUCH_BUCKET, XML) as url:
        with LokiClient(LokiSettings(url=url, timeout=5.0), retry=RetryPolicy(retries=0)) as c:
            with pytest.raises(NotLoki) as raised:
                c.label_names(HOUR)
    assert "an S3-style XML error answer (NoSuchBucket)" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_sandbox_s3_endpoint_is_named_not_shown_as_xml(box, monkeypatch, capsys):
    code, err = scan_at(box.env["AWS_ENDPOINT_URL_S3"].rstrip("/"), monkeypatch, capsys)
    assert code == 2
    assert_one_line(err, "application/xml, an S3-style XML error answer (NoSuch")


@pytest.mark.parametrize(
    "body",
    [
        b"upstream failed\n\tat Handler.serve(Handler.java:12)\r\n\tat Main.run\n\n" * 40,
        b"\n\n  404 page not found  \n\n",
    ],
)
def test_any_other_error_body_in_a_gap_is_one_short_line(body, monkeypatch, capsys):
    with answering(404, body, {"Content-Type": "text/plain"}) as url:
        code, err = scan_at(url, monkeypatch, capsys)
    assert code == 3
    first = body.decode().split()[0]
    (line,) = [x for x in err.splitlines() if "HTTP 404 from Loki" in x]
    assert f"HTTP 404 from Loki: {first}" in line and "likely cause" in line, err
    assert line.isprintable() and len(line) < 800, line
    assert not [x for x in err.splitlines() if x.lstrip().startswith(("at ", "404 page"))], err
