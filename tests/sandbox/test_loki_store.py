"""The sandbox Loki's stream selection by time: the same streams as testing every one of them."""

from __future__ import annotations

import random

from forensics.sandbox.loki_logql import parse_log_query
from forensics.sandbox.loki_store import HOUR_NS, Store
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
