"""Prometheus metrics of a guard run (docs/deployment.md), written with the Prometheus client library.

One collector built from the last run's report and the state's cumulative counters; the same
registry feeds the textfile collector (`--metrics-file`, written atomically), the Pushgateway
(`--pushgateway`) and `watch --metrics-port`'s /metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, push_to_gateway
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import basic_auth_handler, default_handler

from forensics.errors import SourceError
from forensics.fsutil import write_atomic

VERDICTS = ("affected", "suspected")
SOURCES = ("loki", "admin", "s3")
JOB = "elastic-audit"


@dataclass
class Snapshot:
    """The values of one run (what the metrics say until the next run replaces them)."""

    findings: dict[str, int] = field(default_factory=dict)
    new_findings_total: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    gaps: int = 0
    complete: bool = False
    last_complete_scan: float | None = None  # seconds since the epoch
    duration: float = 0.0
    source_errors_total: dict[str, int] = field(default_factory=dict)


class GuardCollector:
    """A custom collector over the latest Snapshot (thread-safe: /metrics reads it while a run
    replaces it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None

    def update(self, snap: Snapshot) -> None:
        with self._lock:
            self._snap = snap

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            s = self._snap
        if s is None:
            return
        g = GaugeMetricFamily(
            "elastic_audit_findings", "Findings in the last scan's window", labels=["verdict"]
        )
        for v in VERDICTS:
            g.add_metric([v], s.findings.get(v, 0))
        yield g
        c = CounterMetricFamily(
            "elastic_audit_new_findings",
            "Findings first reported by a guard run, over all runs (kept in the state)",
            labels=["verdict"],
        )
        for v in VERDICTS:
            c.add_metric([v], s.new_findings_total.get(v, 0))
        yield c
        yield GaugeMetricFamily(
            "elastic_audit_pending", "Signalled attempts not finished yet", value=s.pending
        )
        yield GaugeMetricFamily(
            "elastic_audit_gaps", "Gaps (unread parts of the window) of the last scan", value=s.gaps
        )
        yield GaugeMetricFamily(
            "elastic_audit_scan_complete",
            "1 when the last scan read its whole window",
            value=1 if s.complete else 0,
        )
        if s.last_complete_scan is not None:
            yield GaugeMetricFamily(
                "elastic_audit_last_complete_scan_timestamp_seconds",
                "When the last complete scan finished (Unix time)",
                value=s.last_complete_scan,
            )
        yield GaugeMetricFamily(
            "elastic_audit_scan_duration_seconds",
            "Wall time of the last scan",
            value=s.duration,
        )
        e = CounterMetricFamily(
            "elastic_audit_source_errors",
            "Gaps per source over all runs (kept in the state)",
            labels=["source"],
        )
        for src in sorted(set(SOURCES) | set(s.source_errors_total)):
            e.add_metric([src], s.source_errors_total.get(src, 0))
        yield e


def registry_for(collector: GuardCollector) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)  # type: ignore[arg-type]
    return reg


def write_textfile(path: str, registry: CollectorRegistry) -> None:
    """The node-exporter textfile collector reads `*.prom` files: replace atomically."""
    write_atomic(path, generate_latest(registry))


def push(url: str, registry: CollectorRegistry) -> None:
    """PUT the metrics to a Pushgateway under job `elastic-audit` (replacing the last push),
    with basic auth when the URL carries user:password (urllib would read it as the host)."""
    from forensics.guard.notify import safe_url
    from forensics.secrets import split_userinfo

    bare, user, password = split_userinfo(url)

    def handler(**request: Any) -> Any:  # url, method, timeout, headers, data
        if password is None:
            return default_handler(**request)
        return basic_auth_handler(**request, username=user, password=password)

    try:
        push_to_gateway(bare, job=JOB, registry=registry, timeout=15, handler=handler)
    except Exception as e:  # urllib's errors carry the URL; say only where and what kind
        raise SourceError(
            "pushgateway", f"push failed ({type(e).__name__})", target=safe_url(url)
        ) from None
