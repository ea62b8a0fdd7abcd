"""How the Loki client retries one HTTP call: the policy (numbers) and urllib3's Retry that applies it.

Kept apart from the client as botocore keeps `retries/standard.py` apart from its clients: the
policy says how much, `BoundedRetry` decides per failure, the client only wires them in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from urllib3.exceptions import MaxRetryError, ReadTimeoutError, ResponseError
from urllib3.util.retry import Retry

from forensics.notices import retrying, why_http

__all__ = ["BoundedRetry", "RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one HTTP call is retried on 429/5xx/connection failures before it is given up.

    `retries` bounds the attempts (1 + retries), `total_time` the seconds one call may go on
    retrying after its first failure (sleeps are cut short to fit),
    `retry_after_max` caps a server's `Retry-After`; backoff is `backoff_factor * 2**(n-1)` seconds
    (urllib3's formula, first retry immediate), at most `backoff_max`.
    """

    retries: int = 5
    backoff_factor: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 60.0
    total_time: float = 300.0


class BoundedRetry(Retry):
    """urllib3's Retry plus a deadline over all attempts; `pause` does the waiting (the client
    passes one that a closed scan interrupts)."""

    def __init__(
        self,
        *args: Any,
        total_time: float = 300.0,
        deadline: float | None = None,
        on_retry: Callable[[], None] | None = None,
        split_timeouts: bool = False,
        pause: Callable[[float], None] = time.sleep,
        fatal: Callable[[Any], BaseException | None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.total_time = total_time
        self.deadline = deadline
        self.on_retry = on_retry
        self.split_timeouts = split_timeouts  # a read timeout is raised at once, to be split
        self.pause = pause
        self.fatal = fatal  # reads a retryable answer; an error it returns is raised, not retried

    def new(self, **kw: Any) -> BoundedRetry:
        kw.setdefault("total_time", self.total_time)
        kw.setdefault("deadline", self.deadline)
        kw.setdefault("on_retry", self.on_retry)
        kw.setdefault("split_timeouts", self.split_timeouts)
        kw.setdefault("pause", self.pause)
        kw.setdefault("fatal", self.fatal)
        return super().new(**kw)

    def increment(  # type: ignore[override]
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> BoundedRetry:
        if self.split_timeouts and isinstance(error, ReadTimeoutError):
            raise error
        if response is not None and self.fatal is not None:
            final = self.fatal(response)
            if final is not None:
                raise final
        deadline = self.deadline
        if deadline is None:
            deadline = time.monotonic() + self.total_time
        new = super().increment(method, url, response, error, _pool, _stacktrace)
        new.deadline = deadline
        if time.monotonic() >= deadline:
            reason = error or ResponseError(f"gave up retrying after {self.total_time:g}s")
            raise MaxRetryError(_pool, url, reason)  # type: ignore[arg-type]
        if self.on_retry is not None:
            self.on_retry()
        if _pool is not None:  # on a terminal, the user hears about it now (forensics/notices.py)
            address = f"{_pool.scheme}://{_pool.host}:{_pool.port}"
            done = len(new.history)
            left = new.total if isinstance(new.total, int) else 0
            retrying("Loki", address, why_http(error, response), done, done + left)
        return new

    def _wait(self, seconds: float) -> None:
        if self.deadline is not None:
            seconds = min(seconds, max(0.0, self.deadline - time.monotonic()))
        self.pause(seconds)

    def sleep_for_retry(self, response: Any) -> bool:
        retry_after = self.get_retry_after(response)
        if retry_after:
            self._wait(retry_after)
            return True
        return False

    def _sleep_backoff(self) -> None:
        self._wait(self.get_backoff_time())
