"""The sandbox Loki's refusals: the Loki release it reproduces and that release's error texts,
word for word (docs/upstream.md, "The sandbox servers", says where each comes from)."""

from __future__ import annotations

SANDBOX_VERSION = "3.4.2"  # the Loki release whose texts this server reproduces

ERR_END_BEFORE_START = "end timestamp must not be before or equal to start time"
ERR_LIMIT = "limit must be a positive value"
ERR_STEP = "zero or negative query resolution step widths are not accepted. Try a positive integer"
ERR_RESOLUTION = (
    "exceeded maximum resolution of 11,000 points per time series. "
    "Try increasing the value of the step parameter"
)
# The 400 for a limit over the tenant's max_entries_limit_per_query, in both wordings Loki uses:
# v3's query frontend (pkg/util/validation/validate.go ErrMaxEntriesLimit) and its querier /
# older releases (pkg/querier/http.go validateMaxEntriesLimits).
ERR_MAX_ENTRIES = (
    "max entries limit per query exceeded, limit > max_entries_limit_per_query ({} > {})"
)
ERR_MAX_ENTRIES_QUERIER = (
    "max entries limit per query exceeded, limit > max_entries_limit ({} > {})"
)
ENTRY_LIMIT_WORDINGS = {"frontend": ERR_MAX_ENTRIES, "querier": ERR_MAX_ENTRIES_QUERIER}
ERR_QUERY_TOO_LONG = "the query time range exceeds the limit (query length: {}, limit: {})"
ERR_DEADLINE = (
    "request timed out, decrease the duration of the request or add more label matchers "
    "(prefer exact match over regex match) to reduce the amount of data processed"
)
# pkg/querier/queryrange/limits.go limErrQueryTooManyBytesTmpl (max_query_bytes_read); sizes in
# go-humanize IBytes form.
ERR_TOO_MANY_BYTES = (
    "the query would read too many bytes (query: {}, limit: {}); consider adding more specific "
    "stream selectors or reduce the time range of the query"
)
ERR_TOO_MANY_REQUESTS = "too many outstanding requests"  # pkg/queue/queue.go ErrTooManyRequests
ERR_TOO_MANY_ORG_IDS = "multiple org IDs present"  # dskit user/id.go ErrTooManyOrgIDs
# pkg/querier/queryrange/codec.go MergeResponse: the frontend splits a series request on
# millisecond bounds; a range inside one millisecond leaves no sub-request to merge.
ERR_MERGE_NONE = "merging responses requires at least one response"


class Refusal(Exception):
    """An answer other than 200 or 400: `status` and Loki's text (the exception's message)."""

    status = 500


class ServerError(Refusal):
    """An internal error Loki answers with HTTP 500 and its text."""


class TooManyRequests(Refusal):
    """The tenant's query queue is full: HTTP 429 `too many outstanding requests`."""

    status = 429

    def __init__(self) -> None:
        super().__init__(ERR_TOO_MANY_REQUESTS)


class QueryTimeout(Refusal):
    """A query Loki gave up on at its query_timeout: HTTP 504 with ERR_DEADLINE."""

    status = 504

    def __init__(self) -> None:
        super().__init__(ERR_DEADLINE)
