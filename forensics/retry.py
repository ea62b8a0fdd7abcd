"""One retry policy for the clients the tool drives itself: Loki, Flyte Admin, Prometheus, the
guard's webhooks and GitHub (S3 keeps botocore's own standard mode).

The shape of botocore's `retries/standard.py`: a checker says whether a failure is worth
another try (and why, for the notice), a backoff says how long to wait (exponential, with
jitter, a server's `Retry-After` first), and the attempts are bounded by a number and a
deadline. `call` runs one operation under it; each retry is announced through `notice`
(`forensics.notices.retrying` for the sources).
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from urllib3.util.retry import Retry

__all__ = ["ONE_TRY", "Again", "RetryPolicy", "call", "retry_after"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one call is retried before it is given up.

    `retries` bounds the attempts (1 + retries), `total_time` the seconds one call may go on
    retrying after its first failure (waits are cut short to fit). The wait before retry `n` is
    `backoff_factor * 2**(n-1)` seconds, at most `backoff_max`; with `first_immediate` (urllib3's
    formula) the first retry does not wait; `jitter` takes up to that fraction off each wait at
    random. A server's `Retry-After` replaces the backoff, capped at `retry_after_max`.
    """

    retries: int = 5
    backoff_factor: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 60.0
    total_time: float = 300.0
    jitter: float = 0.0
    first_immediate: bool = True

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1 for the first) absent a Retry-After."""
        if self.first_immediate and retry <= 1:
            return 0.0
        wait = min(self.backoff_max, self.backoff_factor * 2 ** (retry - 1))
        if self.jitter:
            wait *= random.uniform(1.0 - self.jitter, 1.0)
        return max(0.0, wait)

    def wait(self, retry: int, after: float | None) -> float:
        """The wait before retry `retry`: the server's Retry-After (capped) when it gave one."""
        if after:
            return min(after, self.retry_after_max)
        return self.backoff(retry)


@dataclass(frozen=True)
class Again:
    """A checker's verdict that a failure is worth another try: `why` for the notice
    ("refused", "answered 503"), `after` the server's Retry-After in seconds if it sent one."""

    why: str
    after: float | None = None


def call(
    policy: RetryPolicy,
    attempt: Callable[[], T],
    checker: Callable[[Exception], Again | None],
    *,
    notice: Callable[[str, int, int], None] | None = None,
    pause: Callable[[float], None] = time.sleep,
) -> T:
    """`attempt()` until it returns, retrying the exceptions `checker` finds worth it.

    Gives up, raising the last exception, when the checker says no, `policy.retries` retries
    are spent, or `policy.total_time` has passed since the first failure. Before each wait
    `notice(why, retry number, policy.retries)` is called; `pause` waits (a client may pass one
    that ends early).
    """
    deadline: float | None = None
    retry = 0
    while True:
        try:
            return attempt()
        except Exception as e:
            again = checker(e)
            if again is None or retry >= policy.retries:
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + policy.total_time
            elif now >= deadline:
                raise
            retry += 1
            if notice is not None:
                notice(again.why, retry, policy.retries)
            pause(min(policy.wait(retry, again.after), max(0.0, deadline - now)))


# The transport's own retries off, for an HTTP client retried by `call`: one try per request,
# a connection failure (a read timeout included) raised wrapped in MaxRetryError, as urllib3
# raises it when its retries are spent; an error status handed back as the response.
ONE_TRY = Retry(total=0, connect=0, read=0, status=0, other=0, redirect=0, raise_on_status=False)

_SECONDS = re.compile(r"^\s*[0-9]+\s*$")
# urllib3's: a status outside a client's list is still retried when it comes with a Retry-After.
RETRY_AFTER_STATUSES = frozenset({413, 429, 503})


def retry_after(value: str | None) -> float | None:
    """The seconds a `Retry-After` header asks for (a number or an HTTP date); None when absent
    or unreadable."""
    if value is None:
        return None
    if _SECONDS.match(value):
        return float(int(value))
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - time.time())
