"""Something that is not Loki at LOKI_ADDR gets one line saying what answered (issue 43, item 9).

Grafana's URL (an HTML page, 200 or 404), any HTML page, another service's JSON, Flyte Admin's
gRPC port (HTTP/2 frames): `scan` exits 2 with one stderr line naming the status, the content
type and a short safe summary — never the page, never raw bytes. A proxy's page in front of a
real Loki stays what it was: retried (tests/sources/test_loki_client.py).
"""

from __future__ import annotations

import pytest
from support.answering import answering
from support.cli import run
from support.scan import WINDOW, sandbox_fixtures

from forensics.sandbox.incident import reference_scenario

pytestmark = pytest.mark.integration

box, env = sandbox_fixtures(reference_scenario)

GRAFANA = (
    b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"/>\n'
    b'<title>Grafana</title>\n<base href="/" />\n</head>\n<body>'
    + b'<div class="preloader">' * 2000
    + b"<script>window.grafanaBootData = {};</script></body></html>\n"
)


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
