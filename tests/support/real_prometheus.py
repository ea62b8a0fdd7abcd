"""A real Prometheus for the tests that run against one: Debian's `prometheus` package
(/usr/bin/prometheus; .ci/run installs it, never starting its service), run on loopback with a
config and a TSDB in a scratch folder, scraping small exporters the test serves on loopback, stopped
when the test ends. No binary: the test skips, saying why."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests

from support.processes import free_port, stop

BINARY = "/usr/bin/prometheus"
SCRAPE = 1  # seconds between scrapes: a condition of a few seconds is scraped a few times

# One job per exporter. `honor_labels: false` (Prometheus' default) with target labels
# `namespace` and `pod` is how a kubernetes_sd scrape of kube-state-metrics' own pod looks: the
# exporter's labels of the same names become exported_namespace / exported_pod.
CONFIG = """
global:
  scrape_interval: {scrape}s
  scrape_timeout: {scrape}s
scrape_configs:
{jobs}
"""
JOB = """  - job_name: {name}
    honor_labels: {honor}
    static_configs:
      - targets: ["{target}"]
        labels: {labels}
"""


def binary() -> str:
    """The Prometheus binary to run, or skip saying why there is none."""
    if not Path(BINARY).is_file():
        pytest.skip(f"no real Prometheus: {BINARY} is missing (apt-get install prometheus)")
    return BINARY


class Exporter:
    """A loopback /metrics in Prometheus' text format: `series` (label text -> value) are
    exposed while present; the family's HELP and TYPE always, as kube-state-metrics v2.20.0 writes
    them while it watches any pod (pkg/metrics_store/metrics_writer.go:83-105)."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        self.series: dict[str, float] = {}
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self._server.server_address[1]}"

    def text(self) -> str:
        with self.lock:
            rows = [f"{self.metric}{{{labels}}} {v:g}" for labels, v in self.series.items()]
        head = [
            f"# HELP {self.metric} The pod disruption condition reason",
            f"# TYPE {self.metric} gauge",
        ]
        return "\n".join([*head, *rows]) + "\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # the base names it `format`
                pass

            def do_GET(self) -> None:
                data = exporter.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def real_prometheus(
    scratch: Path, jobs: list[tuple[str, Exporter, bool, dict[str, str]]]
) -> Iterator[str]:
    """A real Prometheus on loopback scraping each (job name, exporter, honor_labels, target
    labels) every SCRAPE seconds; yields its base URL once every target has been scraped."""
    exe = binary()
    scratch.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cfg = scratch / "prometheus.yml"
    cfg.write_text(
        CONFIG.format(
            scrape=SCRAPE,
            jobs="".join(
                JOB.format(
                    name=name,
                    honor="true" if honor else "false",
                    target=exp.address,
                    labels="{" + ", ".join(f'{k}: "{v}"' for k, v in labels.items()) + "}",
                )
                for name, exp, honor, labels in jobs
            ),
        )
    )
    log = (scratch / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            exe,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={scratch / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        cwd=scratch,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_scraped(proc, url, len(jobs), scratch / "prometheus.log")
        yield url
    finally:
        stop(proc)
        log.close()
        shutil.rmtree(scratch / "data", ignore_errors=True)


def _wait_scraped(proc: subprocess.Popen, url: str, targets: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"Prometheus exited: {log.read_text()[-2000:]}")
        try:
            r = requests.get(url + "/api/v1/query", params={"query": "sum(up)"}, timeout=2)
            result = r.json()["data"]["result"] if r.status_code == 200 else []
            if result and float(result[0]["value"][1]) == targets:
                return
        except (requests.RequestException, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Prometheus did not scrape its targets within 60 s: {log.read_text()[-2000:]}"
            )
        time.sleep(0.25)


def query(url: str, endpoint: str, **params: str) -> list[dict[str, Any]]:
    """The `result` of one query API call (`query` or `query_range`)."""
    r = requests.get(f"{url}/api/v1/{endpoint}", params=params, timeout=10)
    r.raise_for_status()
    return r.json()["data"]["result"]
