"""Bounded concurrent work on the standard library's thread pools, and how it stops.

`Pools` is the scan's: named `concurrent.futures` thread pools sharing one stop event, so the
first error any job raises stops every other job and is raised in the caller's thread when it
reads the results (a phase's join). `stream` runs jobs that emit items (the Loki client's
shards, the coverage probes) and yields them in the caller's thread. A thread that waits on a
stream stops waiting once an event it watches (`watching`) is set: a Loki read inside a pool's
job ends when the scan stops, whatever Loki is doing.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

# After an error or Ctrl-C: how long the jobs already running get to end before the caller goes
# on (closing the sources under them would make them fail, and say so, after the scan stopped).
GRACE = 2.0


class Stopped(Exception):
    """The work is stopping (an error elsewhere, or Ctrl-C): a job gives up quietly."""


_watched = threading.local()


@contextmanager
def watching(stop: threading.Event) -> Iterator[None]:
    """While in this block, a `stream` read in this thread raises `Stopped` once `stop` is set."""
    events: list[threading.Event] = getattr(_watched, "events", [])
    _watched.events = [*events, stop]
    try:
        yield
    finally:
        _watched.events = events


def _stopped_here() -> bool:
    return any(e.is_set() for e in getattr(_watched, "events", ()))


class Pools:
    """Named thread pools (`sizes`: name -> threads) whose jobs share one stop event.

    `submit` runs a job in a pool; `results` is a join: it waits for the futures in order and
    returns their results, or raises the first error any job of any pool raised (a job that saw
    the stop raises `Stopped`, which is never that error). `close` sets the stop, cancels what
    has not started and returns once the running jobs ended (`GRACE` seconds at most, after an
    error); every job watches the stop (`watching`).
    """

    def __init__(self, sizes: dict[str, int]) -> None:
        self.stop = threading.Event()
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._running: set[Future[Any]] = set()
        self._pools = {
            name: ThreadPoolExecutor(max(1, n), thread_name_prefix=name)
            for name, n in sizes.items()
        }

    def submit(self, pool: str, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run `fn(*args)` in `pool`; `Stopped` once the work stops."""
        if self.stop.is_set():
            raise Stopped()
        future = self._pools[pool].submit(self._run, fn, *args)
        with self._lock:
            self._running.add(future)
        future.add_done_callback(self._watch)
        return future

    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self.stop.is_set():
            raise Stopped()
        with watching(self.stop):
            return fn(*args)

    def _watch(self, future: Future[Any]) -> None:
        with self._lock:
            self._running.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is not None and not isinstance(error, Stopped):
            self._errors.append(error)  # before the stop: `results` raises it, not a Stopped
            self.stop.set()

    def crawl(
        self,
        pool: str,
        seeds: Iterable[Any],
        work: Callable[[Any, Callable[[Any], None]], T | None],
        workers: int,
    ) -> list[T]:
        """Work through `seeds` and every item their work adds, with `workers` jobs of `pool`
        taking the next item from one FIFO queue, and return what the work returned (None
        left out, in no particular order). A join: `work(item, add)` may `add` items until the
        last one is done. One job per worker, not one per item: a queue's get is all an item
        costs to hand on."""
        crawl = _Crawl(self.stop, work, max(1, workers))
        for seed in seeds:
            crawl.add(seed)
        if not crawl.pending:
            return []
        jobs: list[Future[list[T]]] = []
        try:
            for _ in range(crawl.workers):
                jobs.append(self.submit(pool, crawl.job))
        except Stopped:  # a job failed already: `results` raises its error
            pass
        return [r for rs in self.results(jobs) for r in rs]

    def results(self, futures: Sequence[Future[T]]) -> list[T]:
        """Wait for every future (Ctrl-C stays deliverable) and return their results in order;
        the first error of any job raises here."""
        out = []
        try:
            for f in futures:
                out.append(f.result())
        except Stopped:
            pass
        if self._errors:
            raise self._errors[0]
        if self.stop.is_set() and len(out) < len(futures):
            raise Stopped()
        return out

    def close(self, *, idle: bool = False) -> None:
        """Stop every job: queued ones are cancelled, running ones see the stop and get up to
        `GRACE` seconds to end. `idle`: every job has ended (after a phase's join), so the
        pools' threads are joined too."""
        self.stop.set()
        for pool in self._pools.values():
            pool.shutdown(wait=idle, cancel_futures=True)
        if not idle:
            with self._lock:
                running = list(self._running)
            wait(running, timeout=GRACE)

    def __enter__(self) -> Pools:
        return self

    def __exit__(self, error: type[BaseException] | None, *exc: object) -> None:
        self.close(idle=error is None)


class _Crawl:
    """The queue of one `Pools.crawl` and what its jobs run."""

    def __init__(
        self, stop: threading.Event, work: Callable[[Any, Callable[[Any], None]], Any], workers: int
    ) -> None:
        self.stop = stop
        self.work = work
        self.workers = workers
        self.pending = 0  # items added and not done yet
        self._todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._end = object()

    def add(self, item: Any) -> None:
        with self._lock:
            self.pending += 1
        self._todo.put(item)

    def job(self) -> list[Any]:
        """Do items until the last one is done (then every job gets the end)."""
        out = []
        while True:
            item = self._next()
            if item is self._end:
                return out
            result = self.work(item, self.add)
            del item  # an idle worker keeps nothing of the item it did
            if result is not None:
                out.append(result)
            with self._lock:
                self.pending -= 1
                last = self.pending == 0
            if last:
                for _ in range(self.workers):
                    self._todo.put(self._end)

    def _next(self) -> Any:
        while not self.stop.is_set():
            try:
                return self._todo.get(timeout=0.2)
            except queue.Empty:
                continue
        raise Stopped()


Emit = Callable[[Any], bool]


def stream(
    name: str,
    jobs: Iterable[Callable[[Emit], None]],
    workers: int,
    *,
    stop: threading.Event | None = None,
    buffer: int,
) -> Iterator[Any]:
    """Run `jobs` on `workers` daemon threads and yield, in the caller's thread, what they emit.

    A job emits items through the function it is given (False: the stream is closing, stop).
    At most `buffer` items wait for the caller, so a slow consumer slows the workers instead of
    filling memory. A job's exception stops the others and is raised here; closing the generator
    stops the workers (`stop`, when given, is the event they see), and so does an event the
    caller's thread is `watching` (then `Stopped` is raised here). The threads are daemons: one
    blocked in a request never holds up the process's exit.
    """
    todo: queue.SimpleQueue[Callable[[Emit], None]] = queue.SimpleQueue()
    count = 0
    for job in jobs:
        todo.put(job)
        count += 1
    stop = stop or threading.Event()
    out: queue.Queue[Any] = queue.Queue(maxsize=buffer)
    done = object()

    def emit(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        while not stop.is_set():
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            _run_job(job, emit, done)
            del job  # an idle worker keeps nothing of the job it ran

    threads = [
        threading.Thread(target=work, name=f"{name}-{i}", daemon=True)
        for i in range(min(workers, count))
    ]
    for t in threads:
        t.start()
    try:
        yield from _results(out, count, done)
    finally:
        stop.set()


def _results(out: queue.Queue[Any], count: int, done: object) -> Iterator[Any]:
    """What `count` stream jobs emit, until each has ended; `Stopped` once an event this thread
    is `watching` is set."""
    finished = 0
    while finished < count:
        if _stopped_here():
            raise Stopped()
        try:
            item = out.get(timeout=0.2)
        except queue.Empty:
            continue
        if item is done:
            finished += 1
        elif isinstance(item, _Failed):
            raise item.error
        else:
            yield item


def _run_job(job: Callable[[Emit], None], emit: Emit, done: object) -> None:
    """Run one stream job: its exception goes to the caller's thread, then its end."""
    try:
        job(emit)
    except Stopped:
        pass
    except BaseException as e:  # raised in the caller, after what the job emitted before it
        emit(_Failed(e))
    finally:
        emit(done)


class _Failed:
    """A job's exception on its way to the caller's thread."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
