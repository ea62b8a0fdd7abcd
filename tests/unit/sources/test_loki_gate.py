"""The Loki client's adaptive concurrency on the tenant's queue (issue 43, item 12)."""

from __future__ import annotations

import threading

from forensics.sources.loki_gate import Gate


def test_a_full_queue_halves_what_was_in_flight_once_per_round():
    gate = Gate(16)
    tickets = [gate.enter() for _ in range(8)]
    gate.leave(tickets[0], answered=False, full=True)  # 8 in flight: down to 4
    assert gate.limit == 4 and gate.throttled == 1
    for t in tickets[1:4]:  # sent in the same round: no halving again
        gate.leave(t, answered=False, full=True)
    assert gate.limit == 4 and gate.throttled == 4
    for t in tickets[4:]:
        gate.leave(t, answered=False)
    later = [gate.enter() for _ in range(4)]  # the next round, 4 in flight
    gate.leave(later[0], answered=False, full=True)
    assert gate.limit == 2 and gate.lowest == 2
    for t in later[1:]:
        gate.leave(t, answered=True)


def test_answers_grow_the_limit_slowly_up_to_most():
    gate = Gate(2)
    gate.leave(gate.enter(), answered=False, full=True)
    assert gate.limit == 1
    for _ in range(Gate.GROWTH - 1):
        gate.leave(gate.enter(), answered=True)
    assert int(gate.limit) == 1  # not yet a second request in flight
    for _ in range(10 * Gate.GROWTH):
        gate.leave(gate.enter(), answered=True)
    assert gate.limit == 2


def test_enter_waits_for_room_and_gives_up_when_stopped():
    gate = Gate(1)
    first = gate.enter()
    stop = threading.Event()
    got = []
    waiter = threading.Thread(target=lambda: got.append(gate.enter(stop)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # no room
    stop.set()
    waiter.join(2)
    assert got == [None]
    gate.leave(first, answered=True)


def test_a_piece_refused_through_its_retries_teaches_the_longest_piece():
    gate = Gate(4)
    day = {"start": "0", "end": str(86_400 * 10**9)}
    assert not gate.too_big(day)
    assert gate.learn(86_400 * 10**9, 60 * 10**9) and gate.piece == 43_200 * 10**9
    assert gate.too_big(day) and not gate.too_big({"start": "0", "end": str(43_200 * 10**9)})
    assert not gate.learn(86_400 * 10**9, 60 * 10**9)  # a longer refusal teaches nothing new
    assert gate.learn(90 * 10**9, 60 * 10**9) and gate.piece == 60 * 10**9  # the floor
