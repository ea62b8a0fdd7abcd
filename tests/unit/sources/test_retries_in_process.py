"""The HTTP clients' retries against answers scripted in-process (support/faulty.py), their
backoff set to 0 (Loki's through its settings' `retry_backoff`, Prometheus' through its
client's `retry`): the fault matrix's transient and permanent failures of
one request, in milliseconds. The same against the loopback servers, with real sockets:
tests/sources/test_loki_client.py, tests/scan/test_reliability_scan.py (integration)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from support.faulty import ScriptedAdapter, ScriptedHTTP, reset

from forensics.config import LokiSettings, PrometheusSettings
from forensics.errors import SourceError
from forensics.model import UTC, Window
from forensics.retry import RetryPolicy
from forensics.sources.loki import LokiClient
from forensics.sources.prometheus import PrometheusClient

WINDOW = Window(datetime(2026, 9, 10, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))
LABELS = "/loki/api/v1/labels"
QUERY_RANGE = "/api/v1/query_range"
# What the default backoffs would wait for three retries: Loki 0 + 1 + 2 s, Prometheus
# 0.5 + 1 + 2 s. A test taking less did not wait.
NO_WAIT = 1.0

TRANSIENT = {
    "500": (500, "internal server error\n"),
    "502": (502, "bad gateway\n"),
    "503": (503, "overloaded\n"),
    "504": (504, "gateway timeout\n"),
    "429-queue-full": (429, "too many outstanding requests\n"),
    "connection-reset": reset(),
}


def loki(adapter: ScriptedAdapter, retries: int = 3) -> LokiClient:
    settings = LokiSettings(url="http://loki.test:3100", retries=retries, retry_backoff=0)
    return LokiClient(settings, session=ScriptedHTTP(adapter))


@pytest.mark.parametrize("failure", TRANSIENT.values(), ids=TRANSIENT.keys())
def test_loki_retries_a_transient_failure_without_waiting_and_answers(failure):
    names = (200, {"status": "success", "data": ["pod", "namespace"]})
    adapter = ScriptedAdapter({LABELS: [failure, failure, failure, names]})
    started = time.monotonic()
    assert loki(adapter).label_names(WINDOW) == ["namespace", "pod"]
    assert time.monotonic() - started < NO_WAIT
    assert adapter.sent == [LABELS] * 4


def test_loki_gives_up_after_its_retries_saying_how_often_it_asked():
    adapter = ScriptedAdapter({LABELS: [(503, "overloaded\n")] * 10})
    with pytest.raises(SourceError, match="HTTP 503 from Loki after 4 attempts"):
        loki(adapter).label_names(WINDOW)
    assert len(adapter.sent) == 4


def test_loki_never_retries_a_refusal():
    adapter = ScriptedAdapter({LABELS: [(400, "parse error\n")] * 10})
    with pytest.raises(SourceError, match="Loki rejected the query: parse error"):
        loki(adapter).label_names(WINDOW)
    assert len(adapter.sent) == 1


def prometheus(adapter: ScriptedAdapter) -> PrometheusClient:
    settings = PrometheusSettings(url="http://prom.test:9090")
    client = PrometheusClient(settings, retry=RetryPolicy(retries=3, backoff_factor=0))
    client.session.mount("http://prom.test:9090", adapter)
    return client


MATRIX = (200, {"status": "success", "data": {"resultType": "matrix", "result": []}})


@pytest.mark.parametrize(
    "failure",
    [(503, {"status": "error", "error": "overloaded"}), (429, "slow down\n"), reset()],
    ids=["503", "429", "connection-reset"],
)
def test_prometheus_retries_with_the_backoff_its_settings_give(failure):
    adapter = ScriptedAdapter({QUERY_RANGE: [failure, failure, failure, MATRIX]})
    started = time.monotonic()
    assert prometheus(adapter).query_range("up", WINDOW, timedelta(minutes=1)) == []
    assert time.monotonic() - started < NO_WAIT
    assert adapter.sent == [QUERY_RANGE] * 4


def test_prometheus_gives_up_after_three_retries_with_the_last_status():
    adapter = ScriptedAdapter({QUERY_RANGE: [(503, {"status": "error", "error": "down"})] * 9})
    with pytest.raises(SourceError, match="HTTP 503: down"):
        prometheus(adapter).query_range("up", WINDOW, timedelta(minutes=1))
    assert len(adapter.sent) == 4
