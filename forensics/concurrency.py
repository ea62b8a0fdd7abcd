"""Bounded concurrent work: lanes of worker threads, and how their errors reach the caller.

One way to run I/O in parallel, used by the scan (one lane per source) and by the Loki client
(shards read `workers` at a time). Every wait is in short steps, so Ctrl-C stays deliverable to
the main thread, and the first exception a job raises stops the work and is re-raised in the
caller's thread: a bug or a refused query never vanishes inside a worker.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Jobs(Generic[T]):
    """A bounded FIFO whose producers, once it is full, sleep until it is half empty.

    `queue.Queue` wakes a waiting producer at every item taken, so a producer that outruns its
    consumers (the sweep's execution listings, 20,000 executions at 1x) sleeps and wakes once
    per item: two context switches each, a few percent of a scan's CPU. Here it wakes once per
    half queue. A wait ends at `timeout` all the same (the caller's loop sees the stop)."""

    def __init__(self, capacity: int) -> None:
        self._items: deque[T] = deque()
        self._capacity = capacity
        self._low = capacity // 2
        lock = threading.Lock()
        self._ready = threading.Condition(lock)  # an item was added
        self._room = threading.Condition(lock)  # the queue fell to half

    def put(self, item: T, timeout: float) -> None:
        """Add `item`; `queue.Full` if the queue is still full after `timeout` seconds."""
        with self._ready:
            if len(self._items) >= self._capacity:
                self._room.wait(timeout)
                if len(self._items) >= self._capacity:
                    raise queue.Full
            self._items.append(item)
            self._ready.notify()

    def put_nowait(self, item: T) -> None:
        self.put(item, 0)

    def get(self, timeout: float) -> T:
        """The oldest item; `queue.Empty` if there is none after `timeout` seconds."""
        with self._ready:
            if not self._items:
                self._ready.wait(timeout)
                if not self._items:
                    raise queue.Empty
            item = self._items.popleft()
            if len(self._items) == self._low:
                self._room.notify_all()
            return item


class Stopped(Exception):
    """The work is stopping (an error elsewhere, or Ctrl-C): a job gives up quietly."""


class Lane:
    """`workers` daemon threads running jobs from one bounded queue.

    Bounded: a producer waits while the queue is full (a few jobs per worker, or `capacity`), so
    memory holds only what is in flight, however many jobs there are; a job that has run is not
    held by its worker. Once it waits, it waits until the queue is half empty (`_Jobs`). The
    first exception a job raises is kept in `errors`, sets `stop`, and is re-raised by `drain()`
    in the caller's thread; once `stop` is set, queued jobs are dropped and the workers end.
    """

    def __init__(
        self,
        name: str,
        workers: int,
        stop: threading.Event,
        errors: list[BaseException],
        *,
        capacity: int | None = None,
    ) -> None:
        self._stop = stop
        self._errors = errors
        self._queue: _Jobs[Callable[[], None] | None] = _Jobs(capacity or 64 + 4 * workers)
        self._pending = 0
        self._idle = threading.Condition()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        for t in self._threads:
            t.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue `job`, waiting while the queue is full; `Stopped` once the work stops."""
        with self._idle:
            self._pending += 1
        while True:
            if self._stop.is_set():
                with self._idle:
                    self._pending -= 1
                raise Stopped()
            try:
                self._queue.put(job, timeout=0.1)
                return
            except queue.Full:
                continue

    def _work(self) -> None:
        while not self._stop.is_set():  # stopped: what is still queued is dropped
            try:
                job = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if job is None:
                return
            try:
                if not self._stop.is_set():
                    job()
            except Stopped:
                pass
            except BaseException as e:  # a bug must surface in the caller, not vanish here
                self._errors.append(e)
                self._stop.set()
            finally:
                # Let go of the job before it counts as done: an idle worker would otherwise
                # keep it, and all it holds, until its next job. The S3 lane's last jobs hold a
                # whole batch of outputs.pb checks, candidates and Admin records with them.
                del job
                with self._idle:
                    self._pending -= 1
                    if self._pending == 0:
                        self._idle.notify_all()

    def drain(self) -> None:
        """Wait until every submitted job has run (Ctrl-C stays deliverable meanwhile)."""
        with self._idle:
            while self._pending and not self._stop.is_set():
                self._idle.wait(0.1)
        raise_first(self._errors)

    def close(self) -> None:
        """End the workers: at once when idle, else once they see the stop (never waits)."""
        for _ in self._threads:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break

    def join(self, timeout: float) -> None:
        """Give each worker up to `timeout` seconds to end (after `close` and the stop)."""
        for t in self._threads:
            t.join(timeout=timeout)


def raise_first(errors: list[BaseException]) -> None:
    """Re-raise, in the caller's thread, the first error a worker recorded."""
    if errors:
        raise errors[0]


def join(thread: threading.Thread, errors: list[BaseException]) -> None:
    """Join `thread` in short steps, so Ctrl-C reaches the main thread meanwhile."""
    while thread.is_alive():
        thread.join(0.1)
        raise_first(errors)
    raise_first(errors)


def guarded(fn: Callable[[], None], stop: threading.Event, errors: list[BaseException]) -> None:
    """Run `fn`; its error (not a quiet `Stopped`) is recorded and stops the work."""
    try:
        fn()
    except Stopped:
        pass
    except BaseException as e:  # surfaces in the main thread (a refused query, a bug)
        errors.append(e)
        stop.set()


Emit = Callable[[Any], bool]


def stream(
    name: str,
    jobs: Iterable[Callable[[Emit], None]],
    workers: int,
    *,
    stop: threading.Event | None = None,
    buffer: int,
) -> Iterator[Any]:
    """Run `jobs` on a lane of `workers` threads and yield, in the caller's thread, what they emit.

    A job emits items through the function it is given (False: the stream is closing, stop).
    At most `buffer` items wait for the caller, so a slow consumer slows the workers instead of
    filling memory. A job's exception stops the others and is raised here; closing the generator
    stops the workers (`stop`, when given, is the event they see).
    """
    todo = list(jobs)
    stop = stop or threading.Event()
    errors: list[BaseException] = []
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

    def run(job: Callable[[Emit], None]) -> None:
        try:
            job(emit)
        except Stopped:
            pass
        except BaseException as e:  # raised in the caller, after what the job emitted before it
            emit(_Failed(e))
        finally:
            emit(done)

    # Every job is queued up front (capacity: all of them), so submitting never waits on the
    # consumer that only starts reading once they are queued.
    lane = Lane(name, min(workers, len(todo)), stop, errors, capacity=max(1, len(todo)))
    try:
        for job in todo:
            lane.submit(lambda job=job: run(job))
        finished = 0
        while finished < len(todo):
            raise_first(errors)
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
        raise_first(errors)
    finally:
        stop.set()
        lane.close()
        lane.join(timeout=0.05)


class _Failed:
    """A job's exception on its way to the caller's thread."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
