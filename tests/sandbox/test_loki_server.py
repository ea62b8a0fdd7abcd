"""The sandbox Loki server against Loki's documented behaviour and upstream source.

Expected texts are Loki's own, copied from grafana/loki (`pkg/loghttp`,
`pkg/util/server/error.go`, `pkg/querier/queryrange/limits.go`, `pkg/logqlmodel/error.go`),
never from the server under test. Requests are made with plain `requests`, not our client.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import requests

from forensics.model import UTC, Window, to_ns
from forensics.sandbox.loki_params import go_duration, parse_timestamp, prom_duration
from forensics.sandbox.loki_server import FaultRule, LokiFaults, LokiServer
from forensics.sandbox.scenario import SandboxLogLine

# 2019-09-23T19:21:37.240578Z, the instant in Loki's own API documentation example.
T = 1_569_266_497_240_578_000
SEC = 1_000_000_000
QR = "/loki/api/v1/query_range"


def labels(pod: str) -> dict[str, str]:
    return {"namespace": "ml", "pod": pod, "container": "pytorch"}


@pytest.fixture(scope="module")
def loki() -> Iterator[LokiServer]:
    lines = [SandboxLogLine(T + i * SEC, labels("a"), f"a line {i}") for i in range(150)]
    lines += [SandboxLogLine(T + i * SEC + 500, labels("b"), f"b line {i}") for i in range(150)]
    lines += [SandboxLogLine(T + 10 * SEC, labels("c"), "Received Signals.SIGTERM death signal")]
    lines += [SandboxLogLine(T + 11 * SEC, labels("c"), "Received SignalsXSIGTERM death signal")]
    lines += [SandboxLogLine(1_569_266_600_000_300_000, labels("r"), "r line")]
    with LokiServer(lines) as server:
        yield server


def get(server: LokiServer, path: str = QR, **params: object) -> requests.Response:
    return requests.get(
        server.url + path, params={k: str(v) for k, v in params.items()}, timeout=10
    )


def lines_of(resp: requests.Response) -> list[str]:
    assert resp.status_code == 200, resp.text
    values = [(int(v[0]), v[1]) for s in resp.json()["data"]["result"] for v in s["values"]]
    return [line for _, line in sorted(values)]


def a_query(**extra: object) -> dict[str, object]:
    return {"query": '{pod="a"}', "start": T, "end": T + 5 * SEC, "direction": "forward", **extra}


# --- response shape ---------------------------------------------------------------------------


@pytest.mark.integration
def test_a_log_query_answers_streams_with_string_nanosecond_values_and_stats(
    loki: LokiServer,
) -> None:
    resp = get(loki, **a_query(limit=2))
    doc = resp.json()
    assert resp.headers["Content-Type"].startswith("application/json")
    assert doc["status"] == "success"
    assert doc["data"]["resultType"] == "streams"
    assert doc["data"]["result"] == [
        {
            "stream": {"namespace": "ml", "pod": "a", "container": "pytorch"},
            "values": [[str(T), "a line 0"], [str(T + SEC), "a line 1"]],
        }
    ]
    assert doc["data"]["stats"]["summary"]["totalEntriesReturned"] == 2


@pytest.mark.integration
def test_post_with_a_form_body_is_answered_like_get(loki: LokiServer) -> None:
    form = {k: str(v) for k, v in a_query(limit=3).items()}
    posted = requests.post(loki.url + QR, data=form, timeout=10)
    assert posted.status_code == 200
    assert posted.json()["data"]["result"] == get(loki, **a_query(limit=3)).json()["data"]["result"]


# --- time parameters ----------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("start", "end"),
    [
        (str(T - SEC // 2), str(T + 5 * SEC // 2)),  # nanoseconds (what logcli sends)
        ("1569266496.740578", "1569266499.740578"),  # float seconds
        ("2019-09-23T19:21:36.740578Z", "2019-09-23T19:21:39.740578Z"),  # RFC 3339 Nano
        ("2019-09-23T21:21:36.740578+02:00", "2019-09-23T21:21:39.740578+02:00"),  # with offset
    ],
)
def test_every_documented_timestamp_format_selects_the_same_lines(
    loki: LokiServer, start: str, end: str
) -> None:
    assert lines_of(get(loki, **a_query(start=start, end=end))) == [
        "a line 0",
        "a line 1",
        "a line 2",
    ]


@pytest.mark.integration
def test_integer_seconds_of_up_to_ten_digits_are_seconds(loki: LokiServer) -> None:
    # T is 1569266497.240578 s; whole seconds from 1569266498 hold lines 1, 2, 3.
    got = lines_of(get(loki, **a_query(start="1569266498", end="1569266501")))
    assert got == ["a line 1", "a line 2", "a line 3"]


def test_parse_timestamp_follows_lokis_rules() -> None:
    assert parse_timestamp("1569266497") == 1_569_266_497 * SEC
    assert parse_timestamp("1569266497240578000") == T
    assert parse_timestamp("1569266497.2406") == 1_569_266_497_241_000_000  # ms rounding
    assert parse_timestamp("2019-09-23T19:21:37.240578Z") == T
    with pytest.raises(
        ValueError, match=r'^strconv.ParseInt: parsing "yesterday": invalid syntax$'
    ):
        parse_timestamp("yesterday")


@pytest.mark.integration
def test_float_seconds_are_rounded_to_milliseconds(loki: LokiServer) -> None:
    # The line sits at 1569266600.0003 s; a start of .0004 s rounds down to .000 and includes it.
    got = lines_of(get(loki, query='{pod="r"}', start="1569266600.0004", end="1569266601.0"))
    assert got == ["r line"]


@pytest.mark.integration
def test_start_is_inclusive_and_end_is_exclusive(loki: LokiServer) -> None:
    got = lines_of(get(loki, **a_query(start=T + SEC, end=T + 3 * SEC)))
    assert got == ["a line 1", "a line 2"]


@pytest.mark.integration
def test_end_before_start_is_refused_with_lokis_text(loki: LokiServer) -> None:
    resp = get(loki, **a_query(start=T + SEC, end=T))
    assert resp.status_code == 400
    assert resp.text == "end timestamp must not be before or equal to start time"
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"


@pytest.mark.integration
def test_end_equal_to_start_is_an_empty_success(loki: LokiServer) -> None:
    resp = get(loki, **a_query(start=T, end=T))
    assert resp.status_code == 200 and resp.json()["data"]["result"] == []


@pytest.mark.integration
def test_an_unparseable_start_names_the_parameter(loki: LokiServer) -> None:
    resp = get(loki, **a_query(start="yesterday"))
    assert resp.status_code == 400
    assert resp.text == (
        "could not parse 'start' parameter: strconv.ParseInt: parsing \"yesterday\": invalid syntax"
    )


# --- limit and direction ----------------------------------------------------------------------


@pytest.mark.integration
def test_limit_defaults_to_100(loki: LokiServer) -> None:
    resp = get(loki, query='{pod="a"}', start=T, end=T + 1000 * SEC)
    assert len(lines_of(resp)) == 100


@pytest.mark.integration
@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_that_is_not_positive_is_refused(loki: LokiServer, limit: str) -> None:
    resp = get(loki, **a_query(limit=limit))
    assert (resp.status_code, resp.text) == (400, "limit must be a positive value")


@pytest.mark.integration
def test_a_limit_above_max_entries_is_refused_with_lokis_text(loki: LokiServer) -> None:
    resp = get(loki, **a_query(limit=5001))
    assert resp.status_code == 400
    assert resp.text == (
        "max entries limit per query exceeded, limit > max_entries_limit_per_query (5001 > 5000)"
    )
    assert get(loki, **a_query(limit=5000)).status_code == 200


@pytest.mark.integration
def test_limit_applies_across_streams_in_direction_order(loki: LokiServer) -> None:
    # pods a and b interleave: a at T+i s, b at T+i s+500 ns.
    q = {"query": '{pod=~"a|b"}', "start": T, "end": T + 100 * SEC, "limit": 5}
    forward = lines_of(get(loki, **q, direction="forward"))
    assert forward == ["a line 0", "b line 0", "a line 1", "b line 1", "a line 2"]
    backward = lines_of(get(loki, **q, direction="backward"))
    assert backward == ["b line 97", "a line 98", "b line 98", "a line 99", "b line 99"]


@pytest.mark.integration
def test_direction_defaults_to_backward_and_is_case_insensitive(loki: LokiServer) -> None:
    base = {"query": '{pod="a"}', "start": T, "end": T + 10 * SEC, "limit": 1}
    assert lines_of(get(loki, **base)) == ["a line 9"]
    assert lines_of(get(loki, **base, direction="FORWARD")) == ["a line 0"]
    assert lines_of(get(loki, **base, direction="Backward")) == ["a line 9"]
    resp = get(loki, **base, direction="sideways")
    assert (resp.status_code, resp.text) == (400, "invalid direction 'sideways'")


@pytest.mark.integration
def test_values_within_a_stream_follow_the_direction(loki: LokiServer) -> None:
    resp = get(loki, query='{pod="a"}', start=T, end=T + 3 * SEC, direction="backward")
    assert [v[1] for v in resp.json()["data"]["result"][0]["values"]] == [
        "a line 2",
        "a line 1",
        "a line 0",
    ]


# --- max query length -------------------------------------------------------------------------


@pytest.mark.integration
def test_a_range_longer_than_max_query_length_is_refused_with_lokis_text(loki: LokiServer) -> None:
    start = T
    ok = get(loki, query='{pod="a"}', start=start, end=start + 721 * 3600 * SEC)
    assert ok.status_code == 200
    resp = get(loki, query='{pod="a"}', start=start, end=start + (721 * 3600 + 1) * SEC)
    assert resp.status_code == 400
    assert resp.text == (
        "the query time range exceeds the limit (query length: 721h0m1s, limit: 30d1h)"
    )


def test_durations_print_like_go_and_prometheus() -> None:
    assert prom_duration(721 * 3600 * SEC) == "30d1h"  # the documented default limit
    assert prom_duration(7 * 86_400 * SEC) == "1w"
    assert prom_duration(90 * 86_400 * SEC) == "90d"  # weeks only when exact
    assert go_duration(744 * 3600 * SEC) == "744h0m0s"
    assert go_duration((743 * 3600 + 59 * 60 + 59) * SEC + 999_000_000) == "743h59m59.999s"
    assert go_duration(1_500_000) == "1.5ms"


@pytest.mark.integration
def test_a_smaller_configured_max_query_length_is_enforced() -> None:
    with LokiServer(max_query_length=timedelta(hours=24)) as server:
        resp = get(server, query='{pod="a"}', start=T, end=T + 48 * 3600 * SEC)
    assert resp.text == "the query time range exceeds the limit (query length: 48h0m0s, limit: 1d)"


# --- LogQL ----------------------------------------------------------------------------------


@pytest.mark.integration
def test_label_regexes_are_fully_anchored(loki: LokiServer) -> None:
    window = {"start": T, "end": T + 2 * SEC, "direction": "forward"}
    assert lines_of(get(loki, query='{pod=~"a"}', **window)) == ["a line 0", "a line 1"]
    assert lines_of(get(loki, query='{namespace=~"m"}', **window)) == []
    assert len(lines_of(get(loki, query='{namespace=~"m.*", pod!~"b|c"}', **window))) == 2


@pytest.mark.integration
def test_line_filters_contains_excludes_and_unanchored_regex(loki: LokiServer) -> None:
    window = {"start": T, "end": T + 20 * SEC, "direction": "forward", "limit": 1000}
    sig = '{pod="c"}'
    assert lines_of(get(loki, query=sig + ' |= "Signals.SIGTERM"', **window)) == [
        "Received Signals.SIGTERM death signal"
    ]
    # A LogQL double-quoted string needs the backslash escaped (Go string rules); backticks are raw.
    for regex in ('|~ "Signals\\\\.SIGTERM"', "|~ `Signals\\.SIGTERM`"):
        assert lines_of(get(loki, query=f"{sig} {regex}", **window)) == [
            "Received Signals.SIGTERM death signal"
        ]
    assert lines_of(get(loki, query=sig + ' |~ "Signals.SIGTERM"', **window)) == [
        "Received Signals.SIGTERM death signal",
        "Received SignalsXSIGTERM death signal",
    ]
    assert lines_of(get(loki, query=sig + ' != "X" !~ "^nothing"', **window)) == [
        "Received Signals.SIGTERM death signal"
    ]
    assert lines_of(get(loki, query=sig + ' |~ "(?i)received signals\\\\."', **window)) == [
        "Received Signals.SIGTERM death signal"
    ]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "text"),
    [
        (
            '{pod=~".*"}',
            "parse error : queries require at least one regexp or equality matcher that does not "
            'have an empty-compatible value. For instance, app=~".*" does not meet this '
            'requirement, but app=~".+" will',
        ),
        ('{pod="c"} |~ "Signals\\.SIGTERM"', "parse error at line 1, col 14: invalid syntax"),
        (
            '{pod="c"',
            "parse error at line 1, col 9: syntax error: unexpected $end, expecting , or }",
        ),
    ],
)
def test_malformed_queries_are_refused_with_a_parse_error(
    loki: LokiServer, query: str, text: str
) -> None:
    resp = get(loki, query=query, start=T, end=T + SEC)
    assert (resp.status_code, resp.text) == (400, text)


@pytest.mark.integration
@pytest.mark.parametrize(
    "query", ['{pod="c"} | json', 'count_over_time({pod="c"}[5m])', '{pod="c"} |= "a" or "b"']
)
def test_logql_beyond_selectors_and_line_filters_is_a_parse_error(
    loki: LokiServer, query: str
) -> None:
    resp = get(loki, query=query, start=T, end=T + SEC)
    assert resp.status_code == 400 and resp.text.startswith("parse error")


@pytest.mark.integration
def test_lookahead_is_refused_as_re2_would(loki: LokiServer) -> None:
    resp = get(loki, query='{pod="c"} |~ "Signals(?=\\\\.)"', start=T, end=T + SEC)
    assert resp.status_code == 400
    assert "invalid or unsupported Perl syntax: `(?=`" in resp.text


@pytest.mark.integration
def test_a_repeated_entry_in_one_stream_is_kept_once() -> None:
    line = SandboxLogLine(T, labels("a"), "same")
    twin = SandboxLogLine(T, labels("b"), "same")
    with LokiServer([line, line, twin, SandboxLogLine(T, labels("a"), "same")]) as server:
        assert lines_of(get(server, query='{namespace="ml"}', start=T, end=T + 1)) == [
            "same",
            "same",
        ]


# --- tenants and auth ---------------------------------------------------------------------


@pytest.mark.integration
def test_a_missing_org_id_is_401_no_org_id() -> None:
    with LokiServer([SandboxLogLine(T, labels("a"), "x")], tenant_required="team-a") as server:
        resp = get(server, query='{pod="a"}', start=T, end=T + 1)
        assert (resp.status_code, resp.text) == (401, "no org id\n")
        ok = requests.get(
            server.url + QR,
            params={"query": '{pod="a"}', "start": str(T), "end": str(T + 1)},
            headers={"X-Scope-OrgID": "team-b|team-a"},
            timeout=10,
        )
        assert lines_of(ok) == ["x"]
        assert requests.get(server.url + "/ready", timeout=10).status_code == 200


@pytest.mark.integration
def test_gateway_auth_by_bearer_or_basic() -> None:
    with LokiServer(bearer_token="t0k", basic_auth=("user", "pw")) as server:
        q = {"query": '{pod="a"}', "start": str(T), "end": str(T + 1)}
        assert requests.get(server.url + QR, params=q, timeout=10).status_code == 401
        bearer = {"Authorization": "Bearer t0k"}
        assert (
            requests.get(server.url + QR, params=q, headers=bearer, timeout=10).status_code == 200
        )
        assert requests.get(server.url + QR, params=q, auth=("user", "pw"), timeout=10).ok
        bad = {"Authorization": "Basic " + base64.b64encode(b"user:nope").decode()}
        resp = requests.get(server.url + QR, params=q, headers=bad, timeout=10)
        assert resp.status_code == 401 and "nope" not in resp.text
        assert all("Authorization" not in r.headers for r in server.requests)


# --- other endpoints -----------------------------------------------------------------------


@pytest.mark.integration
def test_ready_labels_series_buildinfo_and_unknown_paths(loki: LokiServer) -> None:
    ready = requests.get(loki.url + "/ready", timeout=10)
    assert (ready.status_code, ready.text) == (200, "ready\n")
    labels_doc = get(loki, "/loki/api/v1/labels", start=T, end=T + SEC).json()
    assert labels_doc == {"status": "success", "data": ["container", "namespace", "pod"]}
    series = get(
        loki, "/loki/api/v1/series", **{"match[]": '{pod=~"a|c"}'}, start=T, end=T + 20 * SEC
    )
    assert sorted(s["pod"] for s in series.json()["data"]) == ["a", "c"]
    assert get(loki, "/loki/api/v1/status/buildinfo").json()["version"]
    assert get(loki, "/loki/api/v1/nothing").status_code == 404


# --- faults -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_fault_fires_count_times_with_its_retry_after_then_stops() -> None:
    faults = LokiFaults(rules=[FaultRule(429, count=2, retry_after="3")])
    with LokiServer([SandboxLogLine(T, labels("a"), "x")], faults) as server:
        first = get(server, query='{pod="a"}', start=T, end=T + 1)
        assert (first.status_code, first.text) == (429, "too many outstanding requests")
        assert first.headers["Retry-After"] == "3"
        assert get(server, query='{pod="a"}', start=T, end=T + 1).status_code == 429
        assert get(server, query='{pod="a"}', start=T, end=T + 1).status_code == 200
        assert [r.fault for r in server.requests] == ["429", "429", None]


@pytest.mark.integration
def test_a_fault_with_a_window_hits_only_overlapping_queries() -> None:
    t0 = datetime(2026, 9, 10, tzinfo=UTC)
    rule = FaultRule(504, count="always", window=Window(t0, t0 + timedelta(hours=1)))
    with LokiServer(faults=LokiFaults(rules=[rule])) as server:
        inside = get(server, query='{pod="a"}', start=to_ns(t0) + SEC, end=to_ns(t0) + 2 * SEC)
        after = get(
            server,
            query='{pod="a"}',
            start=to_ns(t0 + timedelta(hours=1)),
            end=to_ns(t0 + timedelta(hours=2)),
        )
    assert inside.status_code == 504 and inside.text.startswith("request timed out")
    assert after.status_code == 200


@pytest.mark.integration
def test_truncated_nonjson_reset_and_latency_faults() -> None:
    q = {"query": '{pod="a"}', "start": str(T), "end": str(T + 1)}
    rules = [FaultRule("truncated"), FaultRule("nonjson"), FaultRule("reset")]
    with LokiServer(faults=LokiFaults(latency=0.2, rules=rules)) as server:
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            requests.get(server.url + QR, params=q, timeout=10).content  # noqa: B018
        html = requests.get(server.url + QR, params=q, timeout=10)
        assert html.status_code == 200 and html.text.startswith("<html>")
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(server.url + QR, params=q, timeout=10)
        started = time.monotonic()
        assert requests.get(server.url + QR, params=q, timeout=10).status_code == 200
        assert time.monotonic() - started >= 0.2
        assert [r.fault for r in server.requests] == ["truncated", "nonjson", "reset", None]


@pytest.mark.integration
def test_a_stalled_answer_outlasts_a_client_timeout() -> None:
    faults = LokiFaults(rules=[FaultRule("timeout", sleep=2)])
    with LokiServer(faults=faults) as server:
        with pytest.raises(requests.exceptions.ReadTimeout):
            requests.get(server.url + QR, params={"query": '{pod="a"}'}, timeout=0.3)


def test_an_unknown_fault_is_refused() -> None:
    with pytest.raises(ValueError):
        FaultRule(418)


@pytest.mark.integration
def test_a_million_lines_are_indexed_and_queried() -> None:
    pods = [labels(f"noise-{i}") for i in range(100)]
    noise = (
        SandboxLogLine(T + i * 1000, pods[i % 100], f"noise line {i}") for i in range(1_000_000)
    )
    with LokiServer(noise) as server:
        server.add_lines([SandboxLogLine(T + 500_000_123, labels("noise-7"), "the SIGTERM line")])
        resp = get(
            server,
            query='{namespace="ml"} |= "SIGTERM"',
            start=T,
            end=T + 2 * SEC,
            direction="forward",
        )
        assert lines_of(resp) == ["the SIGTERM line"]
        resp = get(
            server, query='{pod="noise-3"}', start=T, end=T + SEC, limit=2, direction="forward"
        )
        assert lines_of(resp) == ["noise line 3", "noise line 103"]


# --- tenant limits and query timeouts (docs/upstream.md, Loki) -----------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("wording", "text"),
    [
        # v3's query frontend: pkg/util/validation/validate.go ErrMaxEntriesLimit
        ("frontend", "max entries limit per query exceeded, limit > max_entries_limit_per_query"),
        # the querier and older releases: pkg/querier/http.go validateMaxEntriesLimits
        ("querier", "max entries limit per query exceeded, limit > max_entries_limit"),
    ],
)
def test_a_tenants_lower_entry_limit_is_refused_in_either_wording(wording: str, text: str) -> None:
    lines = [SandboxLogLine(T, labels("a"), "x")]
    with LokiServer(lines, tenant_max_entries={"ml": 1000}, entry_limit_wording=wording) as s:
        q = a_query(limit=5000)

        def as_tenant(org: str) -> requests.Response:
            return requests.get(s.url + QR, params=q, headers={"X-Scope-OrgID": org}, timeout=10)

        refused = as_tenant("ml")
        assert (refused.status_code, refused.text) == (400, f"{text} (5000 > 1000)")
        assert as_tenant("other").status_code == 200  # the server's default (5000) applies
        # Several tenants: the smallest positive limit (SmallestPositiveNonZeroIntPerTenant).
        assert as_tenant("other|ml").text == f"{text} (5000 > 1000)"
        ok = requests.get(
            s.url + QR, params={**q, "limit": 1000}, headers={"X-Scope-OrgID": "ml"}, timeout=10
        )
        assert ok.status_code == 200


@pytest.mark.integration
def test_an_entry_limit_of_zero_is_no_limit() -> None:
    with LokiServer([], tenant_max_entries={"ml": 0}) as s:
        resp = requests.get(
            s.url + QR, params=a_query(limit=50_000), headers={"X-Scope-OrgID": "ml"}, timeout=10
        )
    assert resp.status_code == 200


@pytest.mark.integration
def test_a_query_over_a_dense_range_times_out_like_loki() -> None:
    # What Loki must scan is every line of the selected streams in the range, filters or not.
    lines = [SandboxLogLine(T + i * SEC, labels("a"), f"noise {i}") for i in range(100)]
    with LokiServer(lines, query_timeout_lines=50) as s:
        dense = get(s, query='{pod="a"} |= "never"', start=T, end=T + 100 * SEC, limit=10)
        sparse = get(s, query='{pod="a"} |= "never"', start=T, end=T + 50 * SEC, limit=10)
        other = get(s, query='{pod="b"}', start=T, end=T + 100 * SEC, limit=10)
    assert dense.status_code == 504
    assert dense.text.startswith("request timed out, decrease the duration of the request")
    assert sparse.status_code == 200 and other.status_code == 200


@pytest.mark.integration
def test_latency_per_line_follows_the_lines_the_query_scans_not_those_it_returns() -> None:
    # A real Loki reads every chunk of the selected streams in the range to apply the filters
    # (tests/bench/bench_scan.py, the "real Loki" row): 150 lines scanned, none returned.
    lines = [SandboxLogLine(T + i * SEC, labels("a"), f"a line {i}") for i in range(150)]
    with LokiServer(lines, LokiFaults(latency_per_line=0.004)) as server:
        query = {"query": '{pod="a"} |= "no such text"', "start": T, "end": T + 150 * SEC}
        t0 = time.perf_counter()
        assert lines_of(get(server, **query)) == []
        whole = time.perf_counter() - t0
        t0 = time.perf_counter()
        assert lines_of(get(server, **{**query, "end": T + 15 * SEC})) == []
        tenth = time.perf_counter() - t0
    assert whole >= 150 * 0.004 and tenth < whole / 2


# --- the tenant's queue (forensics/sandbox/loki_queue.py) ---------------------------------------


@pytest.mark.integration
def test_sub_queries_waiting_in_the_tenants_queue_refuse_what_would_overflow_it() -> None:
    # grafana/loki pkg/queue/queue.go Enqueue: 429 `too many outstanding requests` when the
    # tenant's waiting sub-queries would pass max_outstanding_requests_per_tenant.
    hour = 3600 * SEC
    with LokiServer(
        [SandboxLogLine(T, labels("a"), "x")],
        split_queries_by_interval=timedelta(hours=1),
        max_outstanding_requests_per_tenant=24,
        queriers=1,
        subquery_seconds=0.1,
    ) as server:
        day: list[requests.Response] = []
        first = threading.Thread(
            target=lambda: day.append(get(server, query='{pod="a"}', start=T, end=T + 24 * hour))
        )
        first.start()
        time.sleep(0.15)  # its 24 sub-queries wait for the one querier: about 22 still do
        refused = get(server, query='{pod="a"}', start=T, end=T + 4 * hour)
        first.join()
        assert (refused.status_code, refused.text) == (429, "too many outstanding requests")
        assert lines_of(day[0]) == ["x"]
        after = get(server, query='{pod="a"}', start=T, end=T + 4 * hour)  # the queue drained
        assert lines_of(after) == ["x"]
        assert server.queue is not None and server.queue.refused == 1
