"""The sandbox Loki's stream selection by time: the same streams as testing every one of them."""

from __future__ import annotations

import random

from forensics.sandbox.loki_logql import parse_log_query
from forensics.sandbox.loki_store import HOUR_NS, Store, select
from forensics.sandbox.scenario import SandboxLogLine

DAY_NS = 24 * HOUR_NS


def _every_stream(store: Store, query: str, start: int, end: int) -> list[object]:
    """What a query reads, by testing each stream: the definition `within` must keep."""
    q = parse_log_query(query)
    out = []
    for s in store.ordered():
        if q.selects(s.index_labels):
            s.settle()
            lo, hi = s.span(start, end)
            if lo < hi:
                out.append(s)
    return out


def test_streams_within_a_range_are_those_with_an_entry_in_it():
    rng = random.Random(11)
    store = Store()
    lines = []
    for pod in range(300):
        labels = {"namespace": f"ns-{pod % 3}", "pod": f"p{pod}"}
        first = rng.randrange(0, 10 * DAY_NS)
        # Pods of seconds to days, some spanning many hours, entries out of order in some.
        span = rng.choice([10**9, HOUR_NS // 2, 3 * HOUR_NS, 2 * DAY_NS])
        times = [first + rng.randrange(0, span) for _ in range(rng.randrange(1, 6))]
        if pod % 7:
            times.sort()
        lines += [SandboxLogLine(t, labels, f"line {t}") for t in times]
    store.add(lines)
    ranges = [(0, 11 * DAY_NS), (DAY_NS, 2 * DAY_NS), (5, 5), (7, 3)]
    for _ in range(200):
        a, b = rng.randrange(-DAY_NS, 11 * DAY_NS), rng.randrange(1, 3 * DAY_NS)
        ranges.append((a, a + rng.choice([1, HOUR_NS, b])))
    for query in (
        '{namespace="ns-1"}',
        '{namespace=~"ns-.*"}',
        '{namespace=~"ns-.+", namespace!="ns-2"}',
    ):
        selection = store.matching(parse_log_query(query))
        for start, end in ranges:
            assert selection.within(start, end) == _every_stream(store, query, start, end)


def test_entries_added_after_a_query_are_read_by_the_next():
    store = Store()
    store.add([SandboxLogLine(5 * HOUR_NS, {"app": "a"}, "first")])
    query = parse_log_query('{app=~"a|b"}')
    assert [s.lines for s in store.matching(query).within(0, DAY_NS)] == [["first"]]
    # A new stream, and an older entry in the stream already chosen.
    store.add([SandboxLogLine(9 * HOUR_NS, {"app": "b"}, "other")])
    store.add([SandboxLogLine(1 * HOUR_NS, {"app": "a"}, "earlier")])
    chosen = store.matching(query).within(0, 2 * HOUR_NS)
    assert [s.lines for s in chosen] == [["earlier", "first"]]
    assert [s.lines for s in store.matching(query).within(8 * HOUR_NS, DAY_NS)] == [["other"]]


def test_a_query_returns_the_first_entries_that_pass_its_filters_in_its_direction():
    rng = random.Random(5)
    store = Store()
    words = ["sigterm", "signal 15", "noise", "step", "SIGTERM received"]
    lines = []
    for pod in range(60):
        labels = {"namespace": "ns", "pod": f"p{pod % 40}", "c": str(pod % 2)}
        first = rng.randrange(0, 3 * DAY_NS)
        for _ in range(rng.randrange(1, 40)):
            t = first + rng.randrange(0, 6 * HOUR_NS) // 1000 * 1000  # equal times happen
            lines.append(SandboxLogLine(t, labels, f"{rng.choice(words)} {rng.randrange(9)}"))
    store.add(lines)
    queries = [
        '{namespace="ns"}',
        '{namespace="ns"} |= "sig"',
        '{namespace="ns"} |~ "(?i)sigterm" != "3"',
        '{namespace="ns"} |= "signal" |~ "[0-4]$"',
    ]
    for text in queries:
        query = parse_log_query(text)
        for _ in range(40):
            start = rng.randrange(-HOUR_NS, 3 * DAY_NS)
            end = start + rng.randrange(1, 2 * DAY_NS)
            limit, forward = rng.choice([1, 7, 100, 5000]), rng.random() < 0.5
            chosen = store.matching(query).within(start, end)
            result, returned, scanned, _ = select(chosen, query, start, end, limit, forward=forward)
            # By definition: every entry in range that passes every filter, ordered by (time,
            # stream) in the query's direction, the first `limit` of them, grouped by stream.
            every = [
                (t, i, line)
                for i, s in enumerate(chosen)
                for t, line in zip(s.ts, s.lines, strict=True)
                if start <= t < end and all(f.keep(line) for f in query.filters)
            ]
            every.sort(reverse=not forward)
            first = every[:limit]
            expected: dict[int, list[list[str]]] = {}
            for t, i, line in first:
                expected.setdefault(i, []).append([str(t), line])
            assert result == [
                {"stream": dict(chosen[i].labels), "values": expected[i]} for i in sorted(expected)
            ]
            assert returned == len(first)
            assert scanned == sum(start <= t < end for s in chosen for t in s.ts)
