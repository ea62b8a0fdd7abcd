"""Loki's tenant limits as its answers state them, and how the client reads them back.

Each text is Loki's own (grafana/loki at the file cited); the client learns from them for the
rest of a run instead of failing (docs/upstream.md, "Tenant limits learned at run time"):

- `max_query_length`: a 400 `the query time range exceeds the limit (query length: 24h0m0s,
  limit: 12h)` (`pkg/util/validation/validate.go` ErrQueryTooLong, checked in
  `pkg/querier/queryrange/limits.go` limitsMiddleware.Do). The limit is read back and the rest of
  the run reads pieces `MARGIN` shorter: the query-sharding stats lookup asks about 30 s more than
  the query (`pkg/querier/queryrange/shard_resolver.go` adjustedFrom, the engine's
  max_look_back_period default in `pkg/logql/engine.go`), so a piece exactly at the limit fails.
- `max_query_bytes_read` / `max_querier_bytes_read`: a 400 `the query would read too many bytes
  (query: 13 MiB, limit: 2.0 MiB)...` or `... too large to execute on a single querier ...`
  (`pkg/querier/queryrange/limits.go` limErrQueryTooManyBytesTmpl and its siblings): the piece is
  too heavy, read in halves as a timed-out one is.
- a tenant's query queue: a 429 `too many outstanding requests` (`pkg/queue/queue.go`
  ErrTooManyRequests) that persists through the retries: the piece (split by the frontend into
  one sub-query per `split_queries_by_interval`) is read in halves too.
- `multiple org IDs present` (a 500: `vendor/github.com/grafana/dskit/user/id.go`
  ErrTooManyOrgIDs, from `tenant.TenantID` when multi-tenant queries are off): a configuration
  mistake, never retried.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from forensics.errors import ConfigError, LokiQueryError, SourceError

QUERY_TOO_LONG = "the query time range exceeds the limit"
_QUERY_TOO_LONG_RE = re.compile(
    re.escape(QUERY_TOO_LONG) + r" \(query length: ([^,]+), limit: ([0-9a-z]+)\)"
)
TOO_MANY_BYTES = (
    "the query would read too many bytes",
    "too large to execute on a single querier",
)
TOO_MANY_REQUESTS = "too many outstanding requests"
TOO_MANY_ORG_IDS = "multiple org IDs present"
MARGIN = timedelta(seconds=30)
_UNITS = {
    "y": timedelta(days=365),
    "w": timedelta(weeks=1),
    "d": timedelta(days=1),
    "h": timedelta(hours=1),
    "m": timedelta(minutes=1),
    "s": timedelta(seconds=1),
    "ms": timedelta(milliseconds=1),
}
_PROM_DURATION = re.compile(r"(?:([0-9]+)(ms|y|w|d|h|m|s))")


class LokiTooHeavy(SourceError):
    """A piece Loki will not answer at its size (too many bytes, a full queue, a timeout):
    it is read again in two halves."""


class LokiQueryTooLong(LokiQueryError):
    """A 400 saying the range is over the tenant's max_query_length; `limit` as it states it."""

    def __init__(self, source: str, cause: str, *, limit: timedelta | None, **kw: Any) -> None:
        super().__init__(source, cause, **kw)
        self.limit = limit


def parse_prom_duration(text: str) -> timedelta | None:
    """Prometheus model.Duration's text (`12h`, `1d`, `30d1h`, `1h30m`) as a timedelta."""
    parts = _PROM_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum((int(n) * _UNITS[u] for n, u in parts), timedelta())


def too_long_limit(text: str) -> timedelta | None:
    """The limit a max_query_length 400 states, if it states one."""
    m = _QUERY_TOO_LONG_RE.search(text)
    return parse_prom_duration(m.group(2)) if m else None


def too_heavy(text: str) -> bool:
    """Whether a 400 says the query reads more bytes than the tenant may."""
    return any(t in text for t in TOO_MANY_BYTES)


def reading_length(shard: timedelta, max_query_length: timedelta) -> timedelta:
    """The longest piece to ask Loki for: the shard, at most the configured max_query_length
    (taken as the piece length to use, as configured; a learned limit gets `MARGIN` off, see
    `learned_piece`)."""
    return min(shard, max_query_length)


def learned_piece(limit: timedelta) -> timedelta:
    """The piece length to read under a max_query_length Loki stated: `MARGIN` shorter."""
    return limit - MARGIN if limit > 4 * MARGIN else limit / 2


def too_many_org_ids(org_id: str | None, text: str) -> ConfigError:
    """The configuration error a `multiple org IDs present` answer means."""
    return ConfigError(
        f"Loki refused the tenants {org_id!r} ({text.strip()}): querying several tenants at "
        "once needs multi_tenant_queries_enabled: true in Loki's querier config; otherwise set "
        "LOKI_ORG_ID (or [loki] org_id) to one tenant"
    )


def duration_text(d: timedelta) -> str:
    """A duration as the config writes it: `12h`, `11h59m30s`."""
    seconds = int(d.total_seconds())
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    return out or "0s"
