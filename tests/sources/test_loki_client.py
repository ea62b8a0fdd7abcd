"""The Loki client against the sandbox Loki server over real sockets: pages, shards, retries, auth."""

from __future__ import annotations

import _thread
import logging
import signal
import threading
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics import __version__
from forensics.cli.exits import for_error
from forensics.config import LokiSettings, Secret, load_settings
from forensics.errors import ConfigError, LokiQueryError, SourceError, UsageError
from forensics.model import UTC, LogEntry, ShardRead, Window, to_ns
from forensics.retry import RetryPolicy
from forensics.sandbox.loki_logql import parse_log_query
from forensics.sandbox.loki_server import FaultRule, LokiFaults, LokiServer
from forensics.sandbox.scenario import SandboxLogLine
from forensics.sources.logql import (
    build_query,
    line_filter,
    quote_string,
    regex_escape,
    selector,
    validate_selector,
)
from forensics.sources.loki import LokiClient
from forensics.sources.loki_answers import QUERY_RANGE, LokiAuthError, LokiEntryLimitError
from forensics.sources.loki_http import BUILDINFO

T0 = datetime(2026, 9, 10, tzinfo=UTC)
BASE = to_ns(T0)
HOUR = Window(T0, T0 + timedelta(hours=1))
FAST = RetryPolicy(
    retries=4, backoff_factor=0.01, backoff_max=0.05, retry_after_max=5, total_time=20
)
SIGTERM = build_query('{namespace="ml"}', [("|=", "SIGTERM")])


def pod(name: str, namespace: str = "ml") -> dict[str, str]:
    return {"namespace": namespace, "pod": name, "container": "pytorch"}


def key(e: LogEntry | SandboxLogLine) -> tuple[int, tuple[tuple[str, str], ...], str]:
    if isinstance(e, LogEntry):
        return (e.ts_ns, e.labels, e.line)
    return (e.ts_ns, tuple(sorted(e.labels.items())), e.line)


def client(server: LokiServer, **kw: object) -> LokiClient:
    settings = kw.pop("settings", None) or LokiSettings(url=server.url, timeout=5.0)
    kw.setdefault("retry", FAST)
    return LokiClient(settings, **kw)  # type: ignore[arg-type]


def entries_and_outcomes(items: list[object]) -> tuple[list[LogEntry], list[ShardRead]]:
    return (
        [i for i in items if isinstance(i, LogEntry)],
        [i for i in items if isinstance(i, ShardRead)],
    )


def some_signals(n: int = 3) -> list[SandboxLogLine]:
    return [
        SandboxLogLine(
            BASE + i * 1_000, pod(f"p{i % 2}"), f"Received Signals.SIGTERM death signal {i}"
        )
        for i in range(n)
    ]


# --- pagination -------------------------------------------------------------------------------


@pytest.mark.integration
def test_more_than_5000_matches_with_many_lines_sharing_timestamps_are_read_once_each() -> None:
    # 3 pods x 40 timestamps x 100 lines: 300 lines per nanosecond, so every 5,000-line page ends
    # inside a group of lines that share its last timestamp; noise lines in between are filtered.
    wanted, noise = [], []
    for k in range(40):
        for p in ("p0", "p1", "p2"):
            for j in range(100):
                wanted.append(SandboxLogLine(BASE + k, pod(p), f"SIGTERM {p} {k} {j}"))
                noise.append(SandboxLogLine(BASE + k, pod(p), f"heartbeat {p} {k} {j}"))
    with LokiServer(noise + wanted) as server:
        got = list(client(server).query_range(SIGTERM, HOUR))
        sent = server.requests.snapshot()
    assert len(got) == 12_000
    assert Counter(map(key, got)) == Counter(map(key, wanted))  # none lost, none repeated
    assert [e.ts_ns for e in got] == sorted(e.ts_ns for e in got)  # merged across streams
    assert all(r.params["limit"] == "5000" and r.params["direction"] == "forward" for r in sent)
    # The next page starts at the last timestamp of the previous one (inclusive).
    assert [int(r.params["start"]) for r in sent] == [BASE, BASE + 16, BASE + 32]
    assert len(sent) == 3


@pytest.mark.integration
def test_a_line_repeated_in_two_pods_at_one_nanosecond_on_a_page_boundary_is_kept_for_both() -> (
    None
):
    # logcli de-duplicates the boundary on (timestamp, line) and would drop pod b's copy.
    lines = [
        SandboxLogLine(BASE, pod("a"), "SIGTERM y1"),
        SandboxLogLine(BASE, pod("a"), "SIGTERM y2"),
        SandboxLogLine(BASE + 1, pod("a"), "SIGTERM x"),
        SandboxLogLine(BASE + 1, pod("b"), "SIGTERM x"),
    ]
    with LokiServer(lines) as server:
        got = list(client(server, page_limit=3).query_range(SIGTERM, HOUR))
    assert Counter(map(key, got)) == Counter(map(key, lines))


@pytest.mark.integration
def test_more_matches_at_one_nanosecond_than_a_page_holds_are_read_stream_by_stream() -> None:
    burst = [
        SandboxLogLine(BASE + 5, pod(f"p{s}"), f"SIGTERM burst {s} {j}")
        for s in range(4)
        for j in range(3_000)
    ]
    around = [SandboxLogLine(BASE + t, pod("p0"), f"SIGTERM at {t}") for t in (1, 5_000, 9_000)]
    with LokiServer(burst + around) as server:
        got = list(client(server).query_range(SIGTERM, HOUR))
        paths = Counter(r.path for r in server.requests)
    assert Counter(map(key, got)) == Counter(map(key, burst + around))
    assert paths["/loki/api/v1/series"] == 1
    # 2 pages to reach the burst, one read per pod at that nanosecond, 1 page after it.
    assert paths["/loki/api/v1/query_range"] == 2 + 4 + 1


@pytest.mark.integration
def test_a_single_pod_with_a_full_page_at_one_nanosecond_fails_the_shard_loudly() -> None:
    lines = [SandboxLogLine(BASE + 7, pod("p0"), f"SIGTERM {j}") for j in range(60)]
    with LokiServer(lines) as server:
        c = client(server, page_limit=50)
        with pytest.raises(SourceError) as err:
            list(c.query_range(SIGTERM, HOUR))
        assert (
            "share the timestamp 2026-09-10T00:00:00Z (1788998400000000007 ns)" in err.value.cause
        )
        assert 'pod="p0"' in err.value.cause
        _, outcomes = entries_and_outcomes(
            list(
                c.read_shards(
                    SIGTERM, HOUR, shard=timedelta(hours=1), max_query_length=timedelta(hours=721)
                )
            )
        )
    assert (
        len(outcomes) == 1
        and outcomes[0].error
        and "cannot be read completely" in outcomes[0].error
    )


@pytest.mark.integration
def test_a_third_element_in_values_is_tolerated() -> None:
    session = requests.Session()
    session.headers["X-Loki-Response-Encoding-Flags"] = "categorize-labels"
    with LokiServer(some_signals()) as server:
        got = list(client(server, session=session).query_range(SIGTERM, HOUR))
        raw = session.get(
            f"{server.url}/loki/api/v1/query_range",
            params={"query": SIGTERM, "start": str(BASE), "end": str(BASE + 10**9)},
        ).json()
    assert all(len(v) == 3 for s in raw["data"]["result"] for v in s["values"])
    assert [e.line for e in got] == [f"Received Signals.SIGTERM death signal {i}" for i in range(3)]


# --- shards -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_a_thirty_day_window_is_read_in_day_shards_and_every_line_arrives() -> None:
    window = Window(T0, T0 + timedelta(days=30))
    busy_day = [  # 250 matches on day 12: three pages of 100
        SandboxLogLine(BASE + 12 * 86_400 * 10**9 + i * 10**6, pod("p1"), f"SIGTERM busy {i}")
        for i in range(250)
    ]
    quiet = [
        SandboxLogLine(BASE + d * 86_400 * 10**9 + 3_600 * 10**9, pod("p0"), f"SIGTERM day {d}")
        for d in (0, 5, 29)
    ]
    edges = [  # exactly on shard borders: start inclusive, end exclusive
        SandboxLogLine(BASE + 1 * 86_400 * 10**9, pod("p2"), "SIGTERM border 1"),
        SandboxLogLine(to_ns(window.end), pod("p2"), "SIGTERM after the window"),
    ]
    with LokiServer(busy_day + quiet + edges) as server:
        c = client(server, workers=4, page_limit=100)
        items = list(
            c.read_shards(
                SIGTERM, window, shard=timedelta(days=2), max_query_length=timedelta(hours=24)
            )
        )
        sent = server.requests.snapshot()
    got, outcomes = entries_and_outcomes(items)
    assert Counter(map(key, got)) == Counter(map(key, busy_day + quiet + edges[:1]))
    assert len(outcomes) == 30 and all(o.ok for o in outcomes)
    assert sorted(o.window.start for o in outcomes) == [T0 + timedelta(days=d) for d in range(30)]
    # requests = shards + further pages: day 12 needs 3 pages (100, 100, 50) instead of 1.
    assert len(sent) == sum(c.calls.values()) == sum(o.requests for o in outcomes) == 30 + 2
    assert {o.window.start: o.entries for o in outcomes}[T0 + timedelta(days=12)] == 250
    for r in sent:
        assert int(r.params["end"]) - int(r.params["start"]) <= 86_400 * 10**9
    assert c.bytes_received == sum(r.bytes for r in sent)


@pytest.mark.integration
def test_entries_of_a_shard_arrive_in_time_order_across_pods() -> None:
    lines = [
        SandboxLogLine(BASE + (i * 7919) % 1000, pod(f"p{i % 5}"), f"SIGTERM {i}")
        for i in range(400)
    ]
    with LokiServer(lines) as server:
        got = list(client(server, page_limit=64).query_range(SIGTERM, HOUR))
    assert [e.ts_ns for e in got] == sorted(e.ts_ns for e in got)
    assert len(got) == 400


# --- retries and failures -------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_a_throttled_or_failing_loki_is_retried_and_nothing_is_lost(status: int) -> None:
    faults = LokiFaults(rules=[FaultRule(status, count=2)])
    with LokiServer(some_signals(), faults) as server:
        c = client(server)
        got = list(c.query_range(SIGTERM, HOUR))
        statuses = [r.status for r in server.requests]
    assert len(got) == 3
    assert statuses == [status, status, 200]
    assert c.retries == 2 and c.calls == {QUERY_RANGE: 3}  # one request, tried three times


@pytest.mark.integration
def test_a_query_timeout_504_is_read_in_halves_and_nothing_is_lost() -> None:
    # Loki's 504 is its query_timeout (pkg/util/server/error.go): the same query again would time
    # out again, so the piece is split instead of being retried at the same size.
    faults = LokiFaults(rules=[FaultRule(504, count=2)])
    with LokiServer(some_signals(), faults) as server:
        c = client(server)
        got = list(c.query_range(SIGTERM, HOUR))
        sent = server.requests.snapshot()
    assert len(got) == 3 and len({(e.ts_ns, e.line) for e in got}) == 3
    assert [r.status for r in sent] == [504, 504, 200, 200, 200]
    spans = [(int(r.params["start"]), int(r.params["end"])) for r in sent]
    whole, half, quarter = (e - s for s, e in spans[:3])
    assert whole == 2 * half == 4 * quarter
    assert spans[2][1] == spans[3][0] and spans[3][1] == spans[4][0]  # no hole, no overlap
    assert c.retries == 2


@pytest.mark.integration
def test_retry_after_is_honoured() -> None:
    faults = LokiFaults(rules=[FaultRule(429, count=1, retry_after="1")])
    with LokiServer(some_signals(), faults) as server:
        got = list(client(server).query_range(SIGTERM, HOUR))
        first, second = server.requests.snapshot()
    assert len(got) == 3
    assert first.status == 429 and second.status == 200
    assert second.at - first.at >= 0.95


@pytest.mark.integration
def test_a_huge_retry_after_is_capped_by_the_policy() -> None:
    faults = LokiFaults(rules=[FaultRule(503, count=1, retry_after="3600")])
    policy = RetryPolicy(retries=3, backoff_factor=0.01, retry_after_max=0.2, total_time=10)
    with LokiServer(some_signals(), faults) as server:
        started = time.monotonic()
        got = list(client(server, retry=policy).query_range(SIGTERM, HOUR))
    assert len(got) == 3
    assert time.monotonic() - started < 3


@pytest.mark.integration
def test_retries_are_bounded_and_the_last_answer_is_reported() -> None:
    faults = LokiFaults(rules=[FaultRule(502, count="always")])
    with LokiServer(some_signals(), faults) as server:
        with pytest.raises(SourceError) as err:
            list(client(server).query_range(SIGTERM, HOUR))
        assert len(server.requests) == 1 + FAST.retries
    assert err.value.cause == "HTTP 502 from Loki after 5 attempts: 502 Bad Gateway"
    assert err.value.retryable


@pytest.mark.integration
def test_a_connection_reset_is_retried() -> None:
    faults = LokiFaults(rules=[FaultRule("reset", count=1)])
    with LokiServer(some_signals(), faults) as server:
        got = list(client(server).query_range(SIGTERM, HOUR))
        assert [r.fault for r in server.requests] == ["reset", None]
    assert len(got) == 3


@pytest.mark.integration
def test_a_read_timeout_is_retried() -> None:
    faults = LokiFaults(rules=[FaultRule("timeout", count=1, sleep=3)])
    with LokiServer(some_signals(), faults) as server:
        settings = LokiSettings(url=server.url, timeout=0.5)
        c = client(server, settings=settings)
        got = list(c.query_range(SIGTERM, HOUR))
    assert len(got) == 3 and c.retries == 1


@pytest.mark.integration
@pytest.mark.parametrize(
    ("fault", "says"),
    [("truncated", "truncated body"), ("nonjson", "body is not JSON")],
)
def test_a_200_that_is_cut_off_or_not_json_is_retried_then_fails_the_shard(
    fault: str, says: str
) -> None:
    once = LokiFaults(rules=[FaultRule(fault, count=1)])
    with LokiServer(some_signals(), once) as server:
        c = client(server)
        assert len(list(c.query_range(SIGTERM, HOUR))) == 3
        # An HTML page is no Loki answer: build info is asked once, and shows Loki is there.
        reads = [r for r in server.requests if r.path != BUILDINFO]
        assert [r.fault for r in reads] == [fault, None] and c.retries == 1
    always = LokiFaults(rules=[FaultRule(fault, count="always")])
    with LokiServer(some_signals(), always) as server:
        with pytest.raises(SourceError) as err:
            list(client(server).query_range(SIGTERM, HOUR))
        assert len([r for r in server.requests if r.path != BUILDINFO]) == 1 + FAST.retries
    assert says in err.value.cause


@pytest.mark.integration
def test_a_permanently_failing_shard_is_reported_while_the_others_are_read() -> None:
    day = timedelta(days=1)
    lines = [
        SandboxLogLine(BASE + d * 86_400 * 10**9 + j, pod("p0"), f"SIGTERM day {d} #{j}")
        for d in range(3)
        for j in range(10)
    ]
    broken = FaultRule(500, count="always", window=Window(T0 + day, T0 + 2 * day))
    with LokiServer(lines, LokiFaults(rules=[broken])) as server:
        items = list(
            client(server, workers=3).read_shards(
                SIGTERM, Window(T0, T0 + 3 * day), shard=day, max_query_length=timedelta(hours=721)
            )
        )
    got, outcomes = entries_and_outcomes(items)
    by_start = {o.window.start: o for o in outcomes}
    assert by_start[T0].ok and by_start[T0 + 2 * day].ok
    failed = by_start[T0 + day]
    assert (
        failed.error
        == "HTTP 500 from Loki after 5 attempts: rpc error: code = Internal desc = injected fault"
    )
    assert failed.entries == 0 and failed.requests == 1
    assert sorted(e.line for e in got) == sorted(
        line.line for line in lines if "day 1 " not in line.line
    )


# --- 400s, tenants, auth ----------------------------------------------------------------------


@pytest.mark.integration
def test_a_rejected_query_is_final_and_shows_lokis_text() -> None:
    bad = '{namespace="ml"} |~ "(unclosed"'
    with LokiServer(some_signals()) as server:
        c = client(server)
        with pytest.raises(LokiQueryError) as err:
            list(c.query_range(bad, HOUR))
        assert len(server.requests) == 1  # not retried
        with pytest.raises(LokiQueryError):
            list(
                c.read_shards(
                    bad, HOUR, shard=timedelta(minutes=10), max_query_length=timedelta(hours=1)
                )
            )
    assert for_error(err.value) == 2
    assert err.value.cause == (
        "Loki rejected the query: parse error at line 1, col 21: error parsing regexp: "
        "missing ), unterminated subpattern: `(unclosed`"
    )


def test_a_page_limit_above_lokis_maximum_is_refused_before_any_request() -> None:
    with pytest.raises(ConfigError):
        LokiClient(LokiSettings(), page_limit=5001)


@pytest.mark.integration
def test_the_tenant_header_selects_the_tenants_lines() -> None:
    with LokiServer(some_signals(), tenant_required="team-a") as server:
        ours = LokiSettings(url=server.url, org_id="team-a", timeout=5.0)
        theirs = LokiSettings(url=server.url, org_id="team-b", timeout=5.0)
        assert len(list(client(server, settings=ours).query_range(SIGTERM, HOUR))) == 3
        assert list(client(server, settings=theirs).query_range(SIGTERM, HOUR)) == []
        with pytest.raises(LokiAuthError) as err:
            list(client(server).query_range(SIGTERM, HOUR))
        assert server.requests[0].headers["X-Scope-OrgID"] == "team-a"
        assert server.requests[0].headers["User-Agent"] == f"elastic-audit/{__version__}"
    assert "no org id" in err.value.cause and "LOKI_ORG_ID" in err.value.cause


@pytest.mark.integration
def test_bearer_token_auth() -> None:
    with LokiServer(some_signals(), bearer_token="tok-123") as server:
        good = LokiSettings(url=server.url, bearer_token=Secret("tok-123"))
        assert len(list(client(server, settings=good).query_range(SIGTERM, HOUR))) == 3
        bad = LokiSettings(url=server.url, bearer_token=Secret("tok-wrong-SECRET"))
        with pytest.raises(LokiAuthError) as err:
            list(client(server, settings=bad).query_range(SIGTERM, HOUR))
        assert all("Authorization" not in r.headers for r in server.requests)
    assert "HTTP 401" in str(err.value) and "tok-wrong-SECRET" not in str(err.value)


@pytest.mark.integration
def test_basic_auth() -> None:
    with LokiServer(some_signals(), basic_auth=("tenant-7", "pw:with:colons")) as server:
        good = LokiSettings(url=server.url, username="tenant-7", password=Secret("pw:with:colons"))
        c = client(server, settings=good)
        assert len(list(c.query_range(SIGTERM, HOUR))) == 3
        assert "pw:with" not in repr(c._auth)
        bad = LokiSettings(url=server.url, username="tenant-7", password=Secret("nope-SECRET"))
        with pytest.raises(LokiAuthError) as err:
            list(client(server, settings=bad).query_range(SIGTERM, HOUR))
    assert "nope-SECRET" not in str(err.value)


def test_bearer_and_basic_auth_together_is_a_configuration_error() -> None:
    env = {"LOKI_BEARER_TOKEN": "t", "LOKI_USERNAME": "u", "LOKI_PASSWORD": "p"}
    with pytest.raises(ConfigError, match="at most one of HTTP basic auth"):
        load_settings(env=env)
    both = LokiSettings(bearer_token=Secret("t"), username="u", password=Secret("p"))
    with pytest.raises(ConfigError):
        LokiClient(both)


@pytest.mark.integration
def test_an_unreachable_loki_is_a_source_error_naming_the_address() -> None:
    with LokiServer() as server:
        url = server.url
    c = LokiClient(
        LokiSettings(url=url, timeout=1.0), retry=RetryPolicy(retries=1, backoff_factor=0)
    )
    with pytest.raises(SourceError) as err:
        list(c.query_range(SIGTERM, HOUR))
    assert url in err.value.cause and "connect" in err.value.cause


# --- LogQL building --------------------------------------------------------------------------


HOSTILE = 'ml"} |= "x" or {a=~".*"} \\ | {}.*'


@pytest.mark.integration
def test_a_hostile_project_name_cannot_inject_logql() -> None:
    hostile = [SandboxLogLine(BASE, pod("p0", namespace=HOSTILE), "SIGTERM hostile")]
    others = [
        SandboxLogLine(BASE, pod("p0", namespace="ml"), "SIGTERM x"),
        SandboxLogLine(BASE, pod("p0", namespace="other"), "SIGTERM x"),
    ]
    query = build_query(selector({"namespace": ("=", HOSTILE)}), [("|=", 'SIGTERM h"ost\\ile')])
    with LokiServer(hostile + others) as server:
        assert list(client(server).query_range(query, HOUR)) == []  # the filter is literal too
        query = build_query(selector({"namespace": ("=", HOSTILE)}), [("|=", "SIGTERM")])
        got = list(client(server).query_range(query, HOUR))
        sent = server.requests[-1].params["query"]
    assert [e.label("namespace") for e in got] == [HOSTILE]
    parsed = parse_log_query(sent)
    assert [(m.name, m.op, m.value) for m in parsed.matchers] == [("namespace", "=", HOSTILE)]


@pytest.mark.integration
def test_regex_escape_makes_a_literal_match_only_itself() -> None:
    lines = [
        SandboxLogLine(BASE, pod("train.v1(a)-0"), "SIGTERM"),
        SandboxLogLine(BASE, pod("trainXv1(a)-0"), "SIGTERM"),
        SandboxLogLine(BASE, pod("train.v1(a)-0-extra"), "SIGTERM"),
    ]
    query = build_query(selector({"pod": ("=~", regex_escape("train.v1(a)") + "-[0-9]+")}))
    with LokiServer(lines) as server:
        got = list(client(server).query_range(query, HOUR))
    assert [e.label("pod") for e in got] == ["train.v1(a)-0"]


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_any_text_quoted_for_logql_is_read_back_unchanged_by_the_server_parser(text: str) -> None:
    stream = selector([("job", "=", "x"), ("a", "=", text)])
    query = " ".join([stream, line_filter("|=", text), line_filter("|~", r"x\.y")])
    parsed = parse_log_query(query)
    assert parsed.matchers[1].value == text
    assert parsed.filters[0].value == text
    assert parsed.filters[1].value == "x\\.y"


def test_regex_line_filters_with_backslashes_are_written_raw() -> None:
    assert line_filter("|~", r"Signals\.SIGTERM") == r"|~ `Signals\.SIGTERM`"
    assert line_filter("|=", r"a\b") == r'|= "a\\b"'
    assert line_filter("!~", "has `tick` \\d") == '!~ "has `tick` \\\\d"'
    assert quote_string('say "hi"\n') == r'"say \"hi\"\n"'


@pytest.mark.parametrize(
    "bad",
    ['namespace="ml"', '{namespace="ml"} |= "x"', "{namespace=ml}", "{}", '{namespace="ml"', ""],
)
def test_a_configured_selector_must_be_one_stream_selector(bad: str) -> None:
    with pytest.raises(ConfigError):
        validate_selector(bad)


def test_only_line_filters_and_plain_label_names_are_accepted() -> None:
    assert validate_selector(' {namespace=~".+-production", pod!=""} ') == (
        '{namespace=~".+-production", pod!=""}'
    )
    with pytest.raises(UsageError):
        build_query('{a="b"}', [("| json", "")])
    with pytest.raises(UsageError):
        selector({"bad-label": ("=", "x")})
    with pytest.raises(UsageError):
        selector({"a": ("==", "x")})
    assert selector([("namespace", "=~", ".+"), ("namespace", "!~", "kube-.*")]) == (
        '{namespace=~".+", namespace!~"kube-.*"}'
    )


# --- closing a scan ---------------------------------------------------------------------------


def _shard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("loki-shard-") and t.is_alive()]


def _wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


@pytest.mark.integration
def test_closing_a_scan_stops_its_workers_promptly() -> None:
    window = Window(T0, T0 + timedelta(days=60))
    lines = [
        SandboxLogLine(BASE + d * 86_400 * 10**9, pod("p0"), f"SIGTERM {d}") for d in range(60)
    ]
    with LokiServer(lines, LokiFaults(latency=0.05)) as server:
        scan = client(server, workers=4).read_shards(
            SIGTERM, window, shard=timedelta(days=1), max_query_length=timedelta(hours=721)
        )
        next(scan)
        scan.close()
        assert _wait_until(lambda: not _shard_threads(), 2.0)
        settled = len(server.requests)
        time.sleep(0.3)
        assert len(server.requests) == settled < 20


@pytest.mark.integration
def test_ctrl_c_during_a_scan_interrupts_workers_waiting_to_retry() -> None:
    faults = LokiFaults(rules=[FaultRule(503, count="always", retry_after="30")])
    policy = RetryPolicy(retries=5, retry_after_max=30, total_time=120)
    with LokiServer(some_signals(), faults) as server:
        scan = client(server, workers=2, retry=policy).read_shards(
            SIGTERM,
            Window(T0, T0 + timedelta(days=2)),
            shard=timedelta(days=1),
            max_query_length=timedelta(hours=721),
        )

        def press_ctrl_c_once_both_workers_wait() -> None:
            if _wait_until(lambda: len(server.requests) >= 2, 5.0):
                time.sleep(0.1)
                _thread.interrupt_main()

        # flytekit, once imported, turns SIGINT into exit(1); Python's own handler is wanted here.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            threading.Thread(target=press_ctrl_c_once_both_workers_wait, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                for _ in scan:
                    pass
        finally:
            signal.signal(signal.SIGINT, previous)
        interrupted = time.monotonic()
        assert _wait_until(lambda: not _shard_threads(), 2.0)
        assert time.monotonic() - interrupted < 2.0
        assert len(server.requests) == 2  # nobody retried after Ctrl-C


# --- tenant entry limits and query timeouts (docs/upstream.md, Loki) -----------------------------


@pytest.mark.integration
@pytest.mark.parametrize("wording", ["frontend", "querier"])
def test_a_lower_tenant_entry_limit_is_adopted_for_the_rest_of_the_run(wording, caplog) -> None:
    lines = [SandboxLogLine(BASE + i * 1000, pod(f"p{i % 3}"), f"SIGTERM {i}") for i in range(2500)]
    opts = {"tenant_max_entries": {"team-ml": 1000}, "entry_limit_wording": wording}
    with LokiServer(lines, **opts) as server:
        settings = LokiSettings(url=server.url, org_id="team-ml", timeout=5.0)
        c = client(server, settings=settings, workers=2)
        day = Window(T0, T0 + timedelta(days=1))
        items = list(
            c.read_shards(SIGTERM, day, shard=timedelta(hours=6), max_query_length=day.length)
        )
        sent = server.requests.snapshot()
    got, outcomes = entries_and_outcomes(items)
    assert sorted(map(key, got)) == sorted(map(key, lines))  # nothing lost, nothing twice
    assert all(o.ok for o in outcomes)
    assert c.page_limit == 1000
    refused = [r for r in sent if r.status == 400]
    assert 1 <= len(refused) <= 2  # the shards in flight when it was learnt
    assert all(r.params["limit"] == "5000" for r in refused)
    assert all(r.params["limit"] == "1000" for r in sent if r.status == 200)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "1000 entries per query" in warnings[0]


@pytest.mark.integration
def test_a_configured_entry_limit_is_used_from_the_first_request() -> None:
    with LokiServer(some_signals(), tenant_max_entries={"team-ml": 1000}) as server:
        settings = LokiSettings(url=server.url, org_id="team-ml", timeout=5.0, max_entries=1000)
        got = list(client(server, settings=settings).query_range(SIGTERM, HOUR))
        assert [r.params["limit"] for r in server.requests] == ["1000"]
    assert len(got) == 3


@pytest.mark.integration
def test_an_entry_limit_400_that_names_no_lower_limit_stays_an_error() -> None:
    # A limit the tenant already allows cannot be the cause: the 400 is not second-guessed.
    with LokiServer(some_signals(), tenant_max_entries={"team-ml": 5000}) as server:
        settings = LokiSettings(url=server.url, org_id="team-ml", timeout=5.0, max_entries=100)
        c = client(server, settings=settings)
        assert len(list(c.query_range(SIGTERM, HOUR))) == 3
    err = LokiEntryLimitError("Loki rejected the query: max entries limit ...", limit=5000)
    assert not c._adopt_limit(100, err)


@pytest.mark.integration
def test_a_dense_stretch_that_times_out_is_split_down_to_the_floor_and_only_it_is_a_gap() -> None:
    # 200 noise lines within one second make any range that holds them time out (Loki must scan
    # them whatever the filter); the signals around them must still be read.
    dense_at = BASE + 40 * 60 * 10**9  # 00:40:00
    lines = [SandboxLogLine(dense_at + i, pod("noisy"), f"step {i}") for i in range(200)]
    lines += [
        SandboxLogLine(BASE + m * 60 * 10**9, pod(f"p{m}"), f"SIGTERM at minute {m}")
        for m in range(0, 60, 5)
    ]
    with LokiServer(lines, query_timeout_lines=100) as server:
        c = client(server, workers=1)
        items = list(
            c.read_shards(SIGTERM, HOUR, shard=timedelta(hours=1), max_query_length=HOUR.length)
        )
        timeouts = [r for r in server.requests if r.status == 504]
    got, (outcome,) = entries_and_outcomes(items)
    (part,) = outcome.failed
    assert part.start <= datetime.fromtimestamp(dense_at / 1e9, UTC) < part.end
    assert part.end - part.start <= timedelta(minutes=1)
    assert "request timed out" in part.error
    read = {e.line for e in got}
    assert read == {f"SIGTERM at minute {m}" for m in range(0, 60, 5) if m != 40}
    assert 6 <= len(timeouts) <= 8  # one per halving from 1h down to the ~56s floor piece


@pytest.mark.integration
def test_a_loki_that_times_out_on_everything_gives_the_shard_up_after_a_bounded_number_of_tries():
    faults = LokiFaults(rules=[FaultRule(504, count="always")])
    with LokiServer(some_signals(), faults) as server:
        c = client(server)
        items = list(
            c.read_shards(SIGTERM, HOUR, shard=timedelta(hours=1), max_query_length=HOUR.length)
        )
        tries = len(server.requests)
    _, (outcome,) = entries_and_outcomes(items)
    assert [(p.start, p.end, p.error) for p in outcome.failed] == [
        (HOUR.start, HOUR.end, outcome.error)
    ]  # the whole shard, one gap
    assert "timed out" in outcome.error and "504" in outcome.error
    assert tries == c._split_budget(HOUR)  # log2(60) halvings to the floor, rounded up, + 1


@pytest.mark.integration
def test_two_readers_at_full_concurrency_reuse_their_connections(caplog):
    # The signals and the Kubernetes events read the same Loki through one client, each with
    # `workers` requests in flight: no connection is opened only to be dropped (urllib3's
    # "Connection pool is full" warning, which -v shows).
    workers = 8
    with LokiServer(some_signals(), faults=LokiFaults(latency=0.3)) as server:
        c = client(server, workers=workers)
        barrier = threading.Barrier(2 * workers)

        def read() -> None:
            barrier.wait()
            list(c.query_range(SIGTERM, HOUR))

        with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
            threads = [threading.Thread(target=read) for _ in range(2 * workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        sent = len(server.requests.snapshot())
        c.close()
    assert sent >= 2 * workers
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
