"""Prometheus (docs/configuration.md `[prometheus]`): the pods kube-state-metrics saw with a
`DisruptionTarget` condition, through the HTTP API's `/api/v1/query_range`.

kube-state-metrics (>= 2.20, internal/store/pod.go `createPodStatusDisruptionReasonFamilyGenerator`)
exports `kube_pod_status_disruption_reason{namespace, pod, uid, reason}` = 1 for every pod whose
status carries a `DisruptionTarget` condition, the reason one of `PreemptionByScheduler`,
`DeletionByTaintManager`, `EvictionByEvictionAPI`, `DeletionByPodGC`, `TerminationByKubelet`
(k8s.io/api core/v1 types.go) or `Other`. The condition has no time in the metric: the time is
the first evaluation step at which the series is present, at most one `step` (plus a scrape
interval) after Kubernetes set it — later, never earlier, so a grade it gives is never too strong.

Prometheus refuses more than 11,000 points per series (web/api/v1/api.go), so the window is read in
shards of 10,000 steps; a shard that cannot be read is a gap of source `prometheus`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import requests

from forensics.config import PrometheusSettings
from forensics.errors import FailureKind, SourceError
from forensics.failures import http_status_kind, os_failure
from forensics.model import UTC, Disruption, Gap, Window
from forensics.retry import Again, RetryPolicy, call
from forensics.sources.k8s_events import EventsRead

log = logging.getLogger("elastic-audit")

SOURCE = "prometheus"
METRIC = "kube_pod_status_disruption_reason"
QUERY = f"max by (namespace, pod, reason) ({METRIC})"
MAX_STEPS = 10_000  # below Prometheus' 11,000 points per series
RETRIES = 3

# DisruptionTarget reason -> who sets it (kubernetes pkg/scheduler, pkg/controller/tainteviction,
# pkg/registry/core/pod/storage/eviction.go, pkg/controller/podgc, pkg/kubelet).
INITIATORS = {
    "PreemptionByScheduler": "default-scheduler",
    "DeletionByTaintManager": "taint-eviction-controller",
    "EvictionByEvictionAPI": "eviction-api",
    "DeletionByPodGC": "pod-garbage-collector",
    "TerminationByKubelet": "kubelet",
}


class PrometheusClient:
    """A small client of Prometheus' query API: GET, bounded retries, errors as SourceError."""

    def __init__(self, settings: PrometheusSettings) -> None:
        assert settings.url is not None
        self.settings = settings
        self.url = settings.url.rstrip("/")
        self.session = requests.Session()
        if settings.username and settings.password:  # the [prometheus] url's user:password
            password = settings.password
            self.session.auth = _BasicAuth(settings.username, lambda: password.value)
        self.calls = 0

    def close(self) -> None:
        self.session.close()

    def query_range(self, query: str, window: Window, step: timedelta) -> list[dict[str, Any]]:
        """The matrix `query` gives over `window` at `step`; SourceError with why if none."""
        params = {
            "query": query,
            "start": f"{window.start.timestamp():.3f}",
            "end": f"{window.end.timestamp():.3f}",
            "step": f"{step.total_seconds():g}",
        }

        def once() -> list[dict[str, Any]]:
            self.calls += 1
            try:
                r = self.session.get(
                    f"{self.url}/api/v1/query_range", params=params, timeout=self.settings.timeout
                )
            except requests.RequestException as e:
                kind = os_failure(e) or FailureKind.UNREACHABLE
                if isinstance(e, requests.Timeout):
                    kind = FailureKind.TIMED_OUT
                raise _Failed(f"{type(e).__name__}: {e}", kind, again=True) from None
            body = _json(r)
            if r.status_code == 200 and body.get("status") == "success":
                data = body.get("data") or {}
                if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
                    raise SourceError(
                        SOURCE,
                        f"not a Prometheus matrix: {str(body)[:200]}",
                        kind=FailureKind.BAD_ANSWER,
                    )
                return data["result"]
            # bad_data (400) or execution (422): asking again gives the same
            raise _Failed(
                f"HTTP {r.status_code}: {body.get('error') or r.text[:200]}",
                http_status_kind(r.status_code) if r.status_code != 200 else FailureKind.BAD_ANSWER,
                again=r.status_code >= 500 or r.status_code == 429,
            )

        try:
            return call(_POLICY, once, _again)
        except _Failed as e:
            raise SourceError(SOURCE, e.cause, kind=e.kind) from None


class _BasicAuth(requests.auth.HTTPBasicAuth):
    """requests' basic auth, its password read from a Secret at send time and never shown."""

    def __init__(self, username: str, password: Callable[[], str]) -> None:
        self.username, self._password = username, password

    @property  # type: ignore[override]
    def password(self) -> str:
        return self._password()

    def __repr__(self) -> str:
        return f"_BasicAuth({self.username!r}, ***)"


class _Failed(Exception):
    def __init__(self, cause: str, kind: FailureKind, *, again: bool) -> None:
        super().__init__(cause)
        self.cause, self.kind, self.again = cause, kind, again


def _again(e: Exception) -> Again | None:
    return Again("failed") if isinstance(e, _Failed) and e.again else None


# RETRIES retries, waiting 0.5 s, 1 s, 2 s.
_POLICY = RetryPolicy(
    retries=RETRIES,
    backoff_factor=0.5,
    backoff_max=math.inf,
    total_time=math.inf,
    first_immediate=False,
)


def _json(r: requests.Response) -> dict[str, Any]:
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def series_disruptions(result: list[dict[str, Any]]) -> list[Disruption]:
    """One disruption per (namespace, pod, reason) series: its first sample with value 1."""
    found = []
    for series in result:
        labels = series.get("metric") or {}
        ns, pod, reason = labels.get("namespace"), labels.get("pod"), labels.get("reason")
        if not ns or not pod or not reason:
            continue
        first = next((t for t, v in series.get("values") or () if v not in ("0", "NaN")), None)
        if first is None:
            continue
        at = datetime.fromtimestamp(float(first), tz=UTC)
        text = f'{METRIC}{{namespace="{ns}", pod="{pod}", reason="{reason}"}} first seen'
        found.append(Disruption(SOURCE, reason, INITIATORS.get(reason), at, ns, pod, text))
    return found


def read_conditions(
    client: PrometheusClient, window: Window, keep: Callable[[str], bool] | None = None
) -> EventsRead:
    """Every pod's DisruptionTarget condition seen in `window`, per (namespace, pod); with
    `keep`, only those of the namespaces it accepts."""
    step = client.settings.step
    out = EventsRead()
    for shard in window.split(step * MAX_STEPS):
        try:
            found = series_disruptions(client.query_range(QUERY, shard, step))
        except SourceError as e:
            out.gaps.append(
                Gap(SOURCE, shard.start, shard.end, f"{client.url}: {e.cause}", failure=e.kind)
            )
            continue
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            why = f"not a Prometheus matrix ({type(e).__name__}: {e})"
            out.gaps.append(
                Gap(
                    SOURCE,
                    shard.start,
                    shard.end,
                    f"{client.url}: {why}",
                    failure=FailureKind.BAD_ANSWER,
                )
            )
            continue
        for d in found:
            assert d.namespace is not None and d.pod is not None
            if keep is not None and not keep(d.namespace):
                continue
            seen = out.by_pod.setdefault((d.namespace, d.pod), [])
            if not any(x.reason == d.reason for x in seen):  # a series crossing shards
                seen.append(d)
    for found in out.by_pod.values():
        found.sort(key=lambda d: (d.at, d.reason))
    log.info(
        "Prometheus %s: %d pod(s) with a DisruptionTarget condition, %d gap(s), %d call(s)",
        QUERY,
        len(out.by_pod),
        len(out.gaps),
        client.calls,
    )
    return out
