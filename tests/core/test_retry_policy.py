"""The one retry policy (forensics/retry.py): attempts, waits, deadline, Retry-After and the
notice; and the clients that use it keep their counts against loopback servers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from forensics.errors import FailureKind
from forensics.guard.notify import post, session
from forensics.retry import Again, RetryPolicy, call, retry_after
from forensics.secrets import mask, safe_url, url_secrets


class Boom(Exception):
    pass


def failing(times: int, result: str = "ok"):  # type: ignore[no-untyped-def]
    calls = []

    def attempt() -> str:
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise Boom(len(calls))
        return result

    return attempt, calls


def always(e: Exception) -> Again | None:
    return Again("failed") if isinstance(e, Boom) else None


def test_attempts_are_bounded_and_each_retry_is_announced() -> None:
    attempt, calls = failing(10)
    said: list[tuple[str, int, int]] = []
    waits: list[float] = []
    policy = RetryPolicy(retries=3, backoff_factor=0.5)
    with pytest.raises(Boom) as raised:
        call(policy, attempt, always, notice=lambda *a: said.append(a), pause=waits.append)
    assert len(calls) == 4 and raised.value.args == (4,)  # the last failure is raised
    assert said == [("failed", 1, 3), ("failed", 2, 3), ("failed", 3, 3)]
    assert waits == [0.0, 1.0, 2.0]  # urllib3's formula: the first retry at once


def test_a_failure_the_checker_refuses_is_raised_at_once() -> None:
    attempt, calls = failing(10)
    with pytest.raises(Boom):
        call(RetryPolicy(retries=5), attempt, lambda e: None, pause=lambda s: None)
    assert len(calls) == 1


def test_success_after_retries_returns_the_answer() -> None:
    attempt, calls = failing(2, "read")
    assert call(RetryPolicy(retries=3), attempt, always, pause=lambda s: None) == "read"
    assert len(calls) == 3


def test_the_deadline_ends_retrying_and_cuts_the_last_wait() -> None:
    attempt, calls = failing(100)
    waits: list[float] = []

    def pause(s: float) -> None:
        waits.append(s)
        time.sleep(s)

    policy = RetryPolicy(retries=100, backoff_factor=0.1, backoff_max=0.1, total_time=0.35)
    started = time.monotonic()
    with pytest.raises(Boom):
        call(policy, attempt, always, pause=pause)
    assert time.monotonic() - started < 1.0
    assert 3 <= len(calls) <= 6 and all(w <= 0.1 for w in waits)


def test_retry_after_replaces_the_backoff_and_is_capped() -> None:
    attempt, _ = failing(2)
    waits: list[float] = []
    policy = RetryPolicy(retries=3, backoff_factor=0.01, retry_after_max=5)
    call(policy, attempt, lambda e: Again("answered 429", after=3600), pause=waits.append)
    assert waits == [5, 5]
    assert retry_after("2") == 2.0 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date passed: at once


def test_jitter_takes_up_to_its_fraction_off_and_no_wait_exceeds_the_cap() -> None:
    policy = RetryPolicy(backoff_factor=0.5, backoff_max=8.0, jitter=0.5, first_immediate=False)
    for n in range(1, 8):
        full = min(8.0, 0.5 * 2 ** (n - 1))
        for _ in range(20):
            assert full / 2 <= policy.backoff(n) <= full


# -- the webhook POST against a loopback receiver --------------------------------------------


@contextmanager
def answers(*statuses: tuple[int, dict[str, str]]) -> Iterator[tuple[str, list[float]]]:
    """A loopback server answering each POST with the next (status, headers), then 200."""
    seen: list[float] = []
    todo = list(statuses)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(time.monotonic())
            status, headers = todo.pop(0) if todo else (200, {})
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/services/T0/B0/secret", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
def test_a_webhook_503_with_retry_after_is_waited_for_then_delivered() -> None:
    policy = RetryPolicy(retries=3, backoff_factor=0.01, total_time=30)
    with answers((503, {"Retry-After": "1"})) as (url, seen), session() as s:
        d = post(s, url, {"text": "x"}, policy)
    assert d.error is None and len(seen) == 2 and seen[1] - seen[0] >= 0.95


@pytest.mark.integration
def test_a_webhook_that_keeps_failing_is_reported_with_its_meaning() -> None:
    policy = RetryPolicy(retries=2, backoff_factor=0.01, total_time=30)
    with answers(*[(500, {})] * 5) as (url, seen), session() as s:
        d = post(s, url, {"text": "x"}, policy)
    assert len(seen) == 3 and d.error == "HTTP 500 after retries"
    assert d.failure is FailureKind.SERVER_FAILED and d.target == safe_url(url)


# -- the one masker ---------------------------------------------------------------------------


def test_the_masker_hides_values_headers_and_url_secrets() -> None:
    assert mask("tok3n-value; Authorization: Bearer abc.def", ["tok3n-value"]) == (
        "***; Authorization: ***"  # an Authorization value is masked to the line's end
    )
    assert mask("X-Amz-Credential=AKIA/x&X-Amz-Signature=f00") == (
        "X-Amz-Credential=***&X-Amz-Signature=***"
    )
    assert mask("Signature:\n" + "0f" * 32) == "Signature:\n***"  # botocore's debug line
    assert mask("denied: bearer abc, token=xyz", loose=True) == "denied: bearer ***, token=***"
    assert mask("page token 5") == "page token 5"  # a word alone is no credential
    url = "https://user:pw@hooks.example.com:8443/services/T/B/s3cr3t?x=1"
    assert safe_url(url) == "https://hooks.example.com:8443"
    assert safe_url(url, keep_path=True) == "https://hooks.example.com:8443/services/T/B/s3cr3t"
    assert dict(url_secrets(url)) == {
        "user:pw@hooks.example.com:8443": "hooks.example.com",
        "/services/T/B/s3cr3t?x=1": "/<redacted>",
        url: "https://hooks.example.com:8443",
    }
