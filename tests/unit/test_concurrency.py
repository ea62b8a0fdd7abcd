"""`Pools` and `stream`: a phase's join returns every result or raises the first error any job
raised; the stop reaches every job, a Loki-like stream read inside a pool's job included."""

from __future__ import annotations

import threading
import time

import pytest

from forensics.concurrency import Pools, Stopped, stream, watching


def test_a_join_returns_every_result_in_order():
    with Pools({"a": 3, "b": 2}) as pools:
        futures = [pools.submit("a" if i % 2 else "b", lambda i=i: i * i) for i in range(50)]
        assert pools.results(futures) == [i * i for i in range(50)]


def test_the_first_error_of_any_pool_is_raised_at_the_join_and_stops_the_others():
    started = threading.Event()

    def waits_for_the_stop(stop: threading.Event) -> str:
        started.set()
        while not stop.is_set():
            time.sleep(0.01)
        raise Stopped()

    def fails() -> None:
        started.wait(5)
        raise KeyError("first")

    with Pools({"slow": 1, "fast": 1}) as pools:
        slow = pools.submit("slow", waits_for_the_stop, pools.stop)
        failing = pools.submit("fast", fails)
        with pytest.raises(KeyError, match="first"):
            pools.results([slow, failing])  # waiting on the slow one: the error still comes
        assert pools.stop.is_set()
        with pytest.raises(Stopped):
            pools.submit("fast", lambda: None)  # stopped: nothing more runs


def test_a_stream_read_in_a_watching_thread_stops_with_the_event():
    """A Loki read stuck on a silent server ends when the scan stops (Ctrl-C, an error)."""

    def silent(emit):
        time.sleep(30)

    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    start = time.monotonic()
    with watching(stop), pytest.raises(Stopped):
        for _ in stream("t-silent", [silent], 1, buffer=2):
            pass
    assert time.monotonic() - start < 5


def test_a_stream_worker_is_a_daemon():
    """A request that never returns cannot hold up the process's exit."""
    release = threading.Event()

    def blocked(emit):
        release.wait(5)

    items = stream("t-daemon", [blocked], 1, buffer=1)
    stop = threading.Event()
    stop.set()
    with watching(stop), pytest.raises(Stopped):
        next(items)
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("t-daemon"))
    release.set()


def test_after_an_error_closing_lets_the_running_jobs_end_before_the_caller_goes_on():
    """The caller closes the sources next: a job still in a request would fail under it and
    say so after the scan stopped (a warning after `interrupted`)."""
    ended = threading.Event()

    def in_a_request() -> None:
        time.sleep(0.3)
        ended.set()

    pools = Pools({"admin": 2})
    pools.submit("admin", in_a_request)
    failing = pools.submit("admin", lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        pools.results([failing])
    pools.close()
    assert ended.is_set()


def test_a_crawl_does_every_item_its_work_adds_and_returns_what_it_returned():
    # Each number below 200 adds its two children (a tree of 400 items); the odd ones return.
    def work(n: int, add) -> int | None:
        for child in (2 * n + 1, 2 * n + 2):
            if child < 400:
                add(child)
        return n if n % 2 else None

    with Pools({"a": 3}) as pools:
        out = pools.crawl("a", [0], work, 3)
    assert sorted(out) == list(range(1, 400, 2))


def test_a_crawl_with_nothing_to_do_starts_no_job():
    # A job started for nothing would wait on the empty queue until the stop.
    with Pools({"idle-crawl": 1}) as pools:
        assert pools.crawl("idle-crawl", [], lambda item, add: item, 4) == []
        assert not any(t.name.startswith("idle-crawl") for t in threading.enumerate())


def test_an_error_in_a_crawl_is_raised_and_the_other_jobs_stop():
    done = []

    def work(n: int, add) -> None:
        if n == 0:
            for i in range(1, 1000):
                add(i)
        elif n == 5:
            raise ValueError("item 5")
        else:
            time.sleep(0.001)
            done.append(n)

    started = time.monotonic()
    with pytest.raises(ValueError, match="item 5"), Pools({"a": 4}) as pools:
        pools.crawl("a", [0], work, 4)
    assert time.monotonic() - started < 2
    assert len(done) < 900  # the jobs stopped taking items
