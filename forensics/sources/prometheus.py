"""Prometheus (docs/configuration.md `[prometheus]`): the pods kube-state-metrics saw with a
`DisruptionTarget` condition (`kube_pod_status_disruption_reason`), through the HTTP API's
`/api/v1/query_range`. What each rule below rests on, with the upstream lines: docs/upstream.md,
"Kubernetes events and disruption conditions".

- `reason="Other"` is never evidence, and a reason followed on the same pod by `Other` (the
  disruption controller resetting a stale condition) is a disruption that did not happen.
- Each step reads `max_over_time(...[step])`, so a condition scraped once is seen; its time is
  the first step whose range holds a sample: later than Kubernetes set it, never earlier.
- Pod labels renamed `exported_namespace` / `exported_pod` by a scrape without `honor_labels`
  are read (with a warning); a series naming no pod is a failed part, never a silent empty read;
  a window with no series is checked against the metadata API (a warning when no target
  declares the family).
- The window is read in shards of 10,000 steps (Prometheus refuses more than 11,000 points per
  series); a shard that cannot be read is returned as failed (the scan makes it a gap of source
  `prometheus`). `PrometheusClient.calls` counts the requests by API path.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import requests

from forensics.config import PrometheusSettings
from forensics.errors import FailureKind, SourceError
from forensics.failures import http_status_kind, os_failure
from forensics.model import UTC, Disruption, FailedPart, Window
from forensics.retry import Again, RetryPolicy, call
from forensics.sources.k8s_events import EventsRead

log = logging.getLogger("elastic-audit")

SOURCE = "prometheus"
METRIC = "kube_pod_status_disruption_reason"
OTHER = "Other"  # kube-state-metrics' reason for a reason it does not know, or none (reset)
# The pod's labels as kube-state-metrics writes them, and as a scrape without honor_labels renames
# them where the target has the same label (prometheus scrape/scrape.go mutateSampleLabels).
POD_LABELS = ("namespace", "pod", "uid")
EXPORTED = "exported_"
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

    def __init__(self, settings: PrometheusSettings, *, retry: RetryPolicy | None = None) -> None:
        """`retry`: how a failed query is retried (default: 3 retries after 0.5, 1, 2 s)."""
        assert settings.url is not None
        self.settings = settings
        self.retry = retry or _POLICY
        self.url = settings.url.rstrip("/")
        self.session = requests.Session()
        if settings.username and settings.password:  # the [prometheus] url's user:password
            password = settings.password
            self.session.auth = _BasicAuth(settings.username, lambda: password.value)
        self.calls: Counter[str] = Counter()  # requests sent, by API path (retries included)

    def close(self) -> None:
        self.session.close()

    def exposed(self, metric: str) -> bool | None:
        """Whether a scrape target exposes `metric`'s family now (its HELP/TYPE, in the metadata
        API: prometheus web/api/v1/api.go `metricMetadata`); None when the API cannot say."""
        self.calls["/api/v1/metadata"] += 1
        try:
            r = self.session.get(
                f"{self.url}/api/v1/metadata",
                params={"metric": metric},
                timeout=self.settings.timeout,
            )
        except requests.RequestException as e:
            log.debug("Prometheus metadata: %s", type(e).__name__)
            return None
        body = _json(r)
        data = body.get("data")
        if r.status_code != 200 or body.get("status") != "success" or not isinstance(data, dict):
            log.debug("Prometheus metadata: HTTP %d", r.status_code)
            return None
        return bool(data.get(metric))

    def query_range(self, query: str, window: Window, step: timedelta) -> list[dict[str, Any]]:
        """The matrix `query` gives over `window` at `step`; SourceError with why if none."""
        params = {
            "query": query,
            "start": f"{window.start.timestamp():.3f}",
            "end": f"{window.end.timestamp():.3f}",
            "step": f"{step.total_seconds():g}",
        }

        def once() -> list[dict[str, Any]]:
            self.calls["/api/v1/query_range"] += 1
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
            return call(self.retry, once, _again)
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


def condition_query(step: timedelta) -> str:
    """Every sample of each step's range (`max_over_time`), per pod and reason: a condition
    exposed for one scrape is seen however short, stale markers notwithstanding."""
    labels = [*POD_LABELS, *(EXPORTED + x for x in POD_LABELS), "reason"]
    return f"max by ({', '.join(labels)}) (max_over_time({METRIC}[{_duration(step)}]))"


def _duration(step: timedelta) -> str:
    ms = round(step.total_seconds() * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass
class _Series:
    """One (pod, reason) series: the steps at which it is present, oldest first."""

    namespace: str
    pod: str
    uid: str
    reason: str
    steps: list[datetime] = field(default_factory=list)
    exported: bool = False  # its pod labels renamed by a scrape without honor_labels


@dataclass
class _Shard:
    """What one shard's answer holds: its series, and those that name no pod."""

    series: list[_Series] = field(default_factory=list)
    nameless: int = 0  # series with no namespace or pod label at all
    nameless_example: str | None = None


def _label(labels: dict[str, str], name: str) -> str | None:
    return labels.get(EXPORTED + name) or labels.get(name) or None


def read_series(result: list[dict[str, Any]]) -> _Shard:
    """The series of one query answer: each pod's reason and the steps it is present at."""
    shard = _Shard()
    for series in result:
        labels = series.get("metric") or {}
        ns, pod, reason = _label(labels, "namespace"), _label(labels, "pod"), labels.get("reason")
        steps = [
            datetime.fromtimestamp(float(t), tz=UTC)
            for t, v in series.get("values") or ()
            if v not in ("0", "NaN")
        ]
        if not steps or not reason:
            continue
        if not ns or not pod:
            shard.nameless += 1
            shard.nameless_example = shard.nameless_example or _text(labels)
            continue
        exported = any(EXPORTED + x in labels for x in POD_LABELS)
        shard.series.append(_Series(ns, pod, _label(labels, "uid") or "", reason, steps, exported))
    return shard


def _text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _runs(steps: list[datetime], step: timedelta) -> list[datetime]:
    """The first step of each run of consecutive steps (a condition set again later)."""
    starts = []
    for i, t in enumerate(steps):
        if i == 0 or t - steps[i - 1] > step:
            starts.append(t)
    return starts


def pod_disruptions(series: list[_Series], step: timedelta) -> tuple[list[Disruption], int]:
    """One pod's disruptions from its series (all of one namespace, pod and uid), and how many
    conditions the disruption controller reset (a reason, then `Other`): those, and `Other`
    itself, are no evidence (module docstring)."""
    resets = sorted(t for s in series if s.reason == OTHER for t in _runs(s.steps, step))
    found, stale = [], 0
    for s in series:
        if s.reason == OTHER:
            continue
        runs = _runs(s.steps, step)
        live = None
        for i, start in enumerate(runs):
            until = runs[i + 1] if i + 1 < len(runs) else None
            if any(start <= r and (until is None or r < until) for r in resets):
                stale += 1  # reset to False: the pod was not disrupted then
                continue
            live = start
            break
        if live is None:
            continue
        text = (
            f'{METRIC}{{namespace="{s.namespace}", pod="{s.pod}", reason="{s.reason}"}} first seen'
        )
        found.append(
            Disruption(SOURCE, s.reason, INITIATORS.get(s.reason), live, s.namespace, s.pod, text)
        )
    return found, stale


def read_conditions(
    client: PrometheusClient, window: Window, keep: Callable[[str], bool] | None = None
) -> EventsRead:
    """Every pod's DisruptionTarget condition seen in `window`, per (namespace, pod); with
    `keep`, only those of the namespaces it accepts."""
    step = client.settings.step
    query = condition_query(step)
    out = EventsRead(source=SOURCE, window=window)
    series: dict[tuple[str, str, str, str], _Series] = {}
    for shard in window.split(step * MAX_STEPS):
        try:
            read = read_series(client.query_range(query, shard, step))
        except SourceError as e:
            out.failed.append(_failed(shard, f"{client.url}: {e.cause}", e.kind))
            continue
        except (ValueError, TypeError, AttributeError, OverflowError) as e:
            why = f"not a Prometheus matrix ({type(e).__name__}: {e})"
            out.failed.append(_failed(shard, f"{client.url}: {why}", FailureKind.BAD_ANSWER))
            continue
        if read.nameless:
            why = (
                f"{read.nameless} series of {METRIC} name no pod (no namespace or pod label, "
                f"e.g. {read.nameless_example}): a relabelling drops them"
            )
            out.failed.append(_failed(shard, f"{client.url}: {why}", FailureKind.BAD_ANSWER))
        for s in read.series:
            if keep is not None and not keep(s.namespace):
                continue
            known = series.setdefault((s.namespace, s.pod, s.uid, s.reason), s)
            if known is not s:  # a series crossing shards: the boundary step is read twice
                known.steps.extend(t for t in s.steps if t > known.steps[-1])
    exported = sum(s.exported for s in series.values())
    if exported:
        log.warning(
            "Prometheus: %d series of %s carry the pod as exported_namespace/exported_pod: "
            "kube-state-metrics is scraped without honor_labels: true (read from those labels)",
            exported,
            METRIC,
        )
    _index(out, series, step)
    if not series and not out.failed and client.exposed(METRIC) is False:
        log.warning(
            "Prometheus: no scrape target exposes %s (kube-state-metrics older than v2.20.0, or "
            "the family left out by its --metric-allowlist/--metric-denylist): it can witness "
            "no DisruptionTarget condition",
            METRIC,
        )
    log.info(
        "Prometheus %s: %d pod(s) with a DisruptionTarget condition, %d gap(s), %d call(s)",
        query,
        len(out.by_pod),
        len(out.failed),
        client.calls["/api/v1/query_range"],
    )
    return out


def _failed(shard: Window, error: str, kind: FailureKind) -> FailedPart:
    return FailedPart(shard.start, shard.end, error, kind)


def _index(
    out: EventsRead, series: dict[tuple[str, str, str, str], _Series], step: timedelta
) -> None:
    """Each pod's disruptions into `out.by_pod`, earliest first; `Other` and reset conditions
    are counted and said at -v, never evidence."""
    by_uid: dict[tuple[str, str, str], list[_Series]] = {}
    for (ns, pod, uid, _), s in series.items():
        by_uid.setdefault((ns, pod, uid), []).append(s)
    other_only = stale = 0
    for (ns, pod, _), pod_series in by_uid.items():
        found, reset = pod_disruptions(pod_series, step)
        stale += reset
        if not found:
            other_only += all(s.reason == OTHER for s in pod_series)
            continue
        out.by_pod.setdefault((ns, pod), []).extend(found)
    for found in out.by_pod.values():
        found.sort(key=lambda d: (d.at, d.reason))
    if other_only or stale:
        log.info(
            "Prometheus: not evidence: %d pod(s) whose condition reads only reason=%s, %d "
            "condition(s) reset to False by the disruption controller (a reason, then %s)",
            other_only,
            OTHER,
            stale,
            OTHER,
        )
