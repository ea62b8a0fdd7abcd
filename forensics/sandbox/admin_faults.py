"""Faults the sandbox Admin injects (`AdminServer.faults`), kept apart from the servicer."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from grpc import StatusCode as Status

PAGE_TOKEN_FAULTS = ("early", "bogus", "repeat")


@dataclass
class AdminFaults:
    """Faults the sandbox Admin injects; safe to change while the server runs.

    `failures[method]` is a queue of status codes: each call of `method` pops one and fails
    with it. `lose_relaunch_response` relaunches for real, then answers UNAVAILABLE (that many
    times). `page_token` breaks the next-page token of `page_token_methods`: `early` drops it
    on a full page, `bogus` returns a non-numeric token, `repeat` returns the request's token.
    `unregistered_tasks` are unknown to GetTask (dynamic tasks need not be registered).
    `max_inline_bytes` mimics Admin's remote-data limit: larger inputs are only linked.
    `drop_cancelled`: a call whose client went away during its latency is not performed (as a
    Go flyteadmin's cancelled request context aborts its transaction); by default it is.
    `lose_relaunch_response` applies to CreateExecution too (single-task ones included).
    `failing_tasks` / `silent_tasks`: task names whose runs in created executions FAIL
    (error.pb written) / SUCCEED without uploading outputs.pb (lost again).
    """

    latency: float = 0.0
    latency_by_method: dict[str, float] = field(default_factory=dict)
    failures: dict[str, list[grpc.StatusCode]] = field(default_factory=dict)
    lose_relaunch_response: int = 0
    page_token: str | None = None
    page_token_methods: frozenset[str] = frozenset({"ListExecutions"})
    unregistered_tasks: set[tuple[str, str, str, str]] = field(default_factory=set)
    max_inline_bytes: int | None = None
    drop_cancelled: bool = False
    # Fail every list call whose `filters` contains the key (e.g. "mode" for relaunch look-ups).
    failing_filters: dict[str, grpc.StatusCode] = field(default_factory=dict)
    # Task names whose runs (single-task or recovered executions) FAIL; whose runs succeed
    # without uploading outputs.pb (lost again). Read when a run finishes.
    failing_tasks: set[str] = field(default_factory=set)
    silent_tasks: set[str] = field(default_factory=set)

    def fail_next(
        self, method: str, times: int = 1, code: grpc.StatusCode = Status.UNAVAILABLE
    ) -> None:
        """Make the next `times` calls of `method` fail with `code`."""
        self.failures.setdefault(method, []).extend([code] * times)
