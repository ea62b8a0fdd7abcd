"""The lanes' bounded queue: FIFO, bounded, and a producer that outruns its workers sleeps until
the queue is half empty, not once per job taken; a worker keeps nothing of a job it has run."""

from __future__ import annotations

import gc
import queue
import threading
import weakref
from functools import partial

import pytest

from forensics.concurrency import Lane, _Jobs


def test_jobs_are_first_in_first_out_and_bounded():
    jobs: _Jobs[int] = _Jobs(4)
    for i in range(4):
        jobs.put(i, 0.01)
    with pytest.raises(queue.Full):
        jobs.put(4, 0.01)
    with pytest.raises(queue.Full):
        jobs.put_nowait(4)
    assert [jobs.get(0.01) for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(queue.Empty):
        jobs.get(0.01)


def test_a_producer_waiting_on_a_full_queue_sleeps_until_it_is_half_empty():
    jobs: _Jobs[int] = _Jobs(8)
    for i in range(8):
        jobs.put(i, 0.01)
    added = threading.Event()

    def produce() -> None:
        jobs.put(8, 30)  # a wait that only the queue's falling to half ends
        added.set()

    producer = threading.Thread(target=produce)
    producer.start()
    taken = [jobs.get(0.01) for _ in range(3)]  # 5 left: room, but not half empty
    assert not added.wait(0.3)
    taken.append(jobs.get(0.01))  # 4 left: half
    assert added.wait(5)
    producer.join()
    taken += [jobs.get(0.01) for _ in range(5)]
    assert taken == list(range(9))


def test_a_lane_runs_every_job_of_many_more_than_its_queue_holds():
    stop, errors = threading.Event(), []
    lane = Lane("t", 3, stop, errors, capacity=4)
    done: list[int] = []
    lock = threading.Lock()

    def job(i: int) -> None:
        with lock:
            done.append(i)

    for i in range(500):
        lane.submit(lambda i=i: job(i))
    lane.drain()
    lane.close()
    lane.join(1)
    assert sorted(done) == list(range(500))
    assert not errors


def test_a_worker_lets_go_of_a_job_once_it_has_run():
    """An idle worker keeps nothing of its last job: the scan's S3 lane hands each worker a run
    of thousands of outputs.pb checks, and what a run holds must go when it is done, not when
    the worker's next job comes (at 10x, a batch later)."""

    class Held:
        pass

    stop, errors = threading.Event(), []
    lane = Lane("t", 2, stop, errors)
    held = [Held() for _ in range(4)]
    gone = [weakref.ref(h) for h in held]
    for h in held:
        lane.submit(partial(lambda h: None, h))
    del h, held
    lane.drain()  # the jobs have run; the workers now wait for more
    gc.collect()
    assert [r() for r in gone] == [None] * 4
    lane.close()
    lane.join(1)
    assert not errors
