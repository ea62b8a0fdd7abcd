"""How many requests the Loki client has in flight: an adaptive limit (AIMD) on the tenant's queue.

Loki's query frontend splits each query into sub-queries and queues them per tenant; a full queue
answers 429 `too many outstanding requests` (grafana/loki `pkg/queue/queue.go` ErrTooManyRequests,
docs/upstream.md "Tenant limits learned at run time"). Sending again at the same concurrency only
meets the same full queue: a scan that takes 3 s against a default queue took minutes and
hundreds of refused requests against a small one. So, as TCP does with a congested link:

- each 429 `too many outstanding requests` halves the requests in flight (once per round: the
  other requests already in flight when it came do not halve it again), down to one at a time;
- each answered request raises it by 1/(limit * GROWTH): one more request every GROWTH rounds,
  up to `most` (slower than TCP's one per round: at one or two requests in flight against a
  queue that holds one query's sub-queries, one per round would have every other request
  refused);
- a piece still refused after its retries is read in halves (as a timed-out one); once a half is
  read, no longer piece is sent for the rest of the run (`learn`, `too_big`): the queue cannot
  hold its sub-queries whatever else is in flight;
- a request refused for the full queue waits about one request's time (its running average,
  with jitter) before it is sent again, so the queue has drained when it arrives.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Ticket:
    """One request's place under the limit: the round it was sent in, and when."""

    round: int
    began: float


class Gate:
    """The client's concurrency limit (thread-safe). `enter` before a request, `leave` after."""

    SMOOTHING = 0.2  # weight of the newest request in the running average of a request's time
    GROWTH = 8  # rounds per additional request in flight

    def __init__(self, most: int) -> None:
        if most < 1:
            raise ValueError(f"most must be at least 1, not {most}")
        self.most = most
        self.limit = float(most)
        self.lowest = float(most)  # the lowest limit the run came to (for -v and benchmarks)
        self.throttled = 0  # 429s for a full queue
        self._in_flight = 0
        self._round = 0  # bumped at each halving
        self._took = 0.0  # running average of an answered request's seconds
        self._cond = threading.Condition()
        self.piece: int | None = None  # ns: the longest piece to send (half of one refused)

    def enter(self, stop: threading.Event | None = None) -> Ticket | None:
        """Wait for room under the limit; the ticket to hand back to `leave`, or None once
        `stop` is set."""
        with self._cond:
            while self._in_flight >= int(self.limit):
                if stop is not None and stop.is_set():
                    return None
                self._cond.wait(0.05)
            self._in_flight += 1
            return Ticket(self._round, time.monotonic())

    def leave(self, ticket: Ticket, *, answered: bool, full: bool = False) -> None:
        """A request ended: `answered` by Loki (the limit grows), or refused for a `full`
        queue (the limit halves, once per round)."""
        with self._cond:
            self._in_flight -= 1
            if full:
                self.throttled += 1
                if ticket.round == self._round:
                    # Half of what was in flight (this one included), not of a limit unused.
                    self.limit = max(1.0, min(self.limit, self._in_flight + 1) / 2)
                    self.lowest = min(self.lowest, self.limit)
                    self._round += 1
            elif answered:
                took = time.monotonic() - ticket.began
                self._took = (
                    took if not self._took else self._took + self.SMOOTHING * (took - self._took)
                )
                self.limit = min(float(self.most), self.limit + 1 / (self.limit * self.GROWTH))
            self._cond.notify_all()

    def too_big(self, params: dict[str, str]) -> bool:
        """Whether a query_range (`params`) the queue refused is longer than `piece`: too big for
        it whatever else is in flight, so sending it again cannot help."""
        try:
            return self.piece is not None and int(params["end"]) - int(params["start"]) > self.piece
        except (KeyError, ValueError):  # an RFC 3339 instant: before 1970-01-01T00:00:10Z
            return False

    def learn(self, refused_ns: int, floor_ns: int) -> bool:
        """A piece of `refused_ns` could not be read for the full queue and its halves could:
        pieces of half that (at least `floor_ns`) from now on, since every shard would meet the
        same refusal at that length. True when that lowered `piece`."""
        half = max(refused_ns // 2, floor_ns)
        with self._cond:
            if self.piece is not None and self.piece <= half:
                return False
            self.piece = half
            return True

    def pause(self) -> float:
        """Seconds a request refused for a full queue waits before it is sent again: about one
        request's time, with jitter so that the refused ones do not all return at once."""
        with self._cond:
            took = self._took or 0.1
        return took * random.uniform(0.5, 1.5)
