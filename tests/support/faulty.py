"""Failures injected in-process, for the fast level's fault matrix (tests/README.md).

Two kinds, neither needing a server:

- `Faulty` wraps an in-process fake of `support.fakes` (or anything answering the same calls)
  and makes chosen calls fail: once, always, or after an iterator has handed out some items (a
  listing broken midway). Every other call goes through to the fake unchanged.
- `ScriptedHTTP` is a `requests` session answering every request itself, from a script per URL
  path (statuses, bodies, headers, connection failures), through requests' own
  `HTTPAdapter.build_response`: the real HTTP clients (Loki, Prometheus) run against it with
  their real retry policies, their backoff set to 0 through the settings.

`assert_same_as` and `assert_incomplete_without_a_hole` are the fault matrix's two outcomes:
a fault the clients recover from changes nothing; one they do not is a gap covering every loss.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3 import HTTPResponse
from urllib3.exceptions import MaxRetryError, ProtocolError

from forensics.model import Finding, Gap, Report

# -- failing calls of a fake -------------------------------------------------------------------


@dataclass
class Fault:
    """How one method fails: `error` is raised on a call whose arguments `when` accepts, `times`
    times (None: always); for a method returning an iterator, after `after` items of it; with
    `performed`, after the call was made (a write done whose answer was lost)."""

    error: Callable[[], Exception]
    times: int | None = 1
    after: int | None = None
    performed: bool = False
    when: Callable[..., bool] = lambda *args, **kwargs: True
    fired: int = 0


class Faulty:
    """`inner` with failing calls: `fail(method, ...)` adds a `Fault`; `faults[method]` holds
    them, each with how often it `fired`. Attributes other than the failing methods are the
    inner object's own (its counters, its seeding methods)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.faults: dict[str, list[Fault]] = {}
        self._lock = threading.Lock()

    def fail(
        self,
        method: str,
        error: Callable[[], Exception],
        *,
        times: int | None = 1,
        after: int | None = None,
        performed: bool = False,
        when: Callable[..., bool] = lambda *args, **kwargs: True,
    ) -> Fault:
        fault = Fault(error, times, after, performed, when)
        self.faults.setdefault(method, []).append(fault)
        return fault

    def _due(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Fault | None:
        with self._lock:
            for f in self.faults.get(method, ()):
                if (f.times is None or f.fired < f.times) and f.when(*args, **kwargs):
                    f.fired += 1
                    return f
        return None

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self.faults or not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            fault = self._due(name, args, kwargs)
            if fault is None:
                return target(*args, **kwargs)
            if fault.performed:
                target(*args, **kwargs)
            if fault.after is None:
                raise fault.error()
            return _broken_after(target(*args, **kwargs), fault)

        return call


def _broken_after(items: Iterable[Any], fault: Fault) -> Iterator[Any]:
    assert fault.after is not None
    for n, item in enumerate(items):
        if n == fault.after:
            raise fault.error()
        yield item
    raise fault.error()  # fewer items than `after`: it breaks at the end


# -- HTTP answered in-process ------------------------------------------------------------------

Answer = tuple[int, Any] | tuple[int, Any, dict[str, str]] | Exception


def reset(url: str = "http://scripted/") -> requests.ConnectionError:
    """A connection reset by the peer, wrapped as requests raises it after urllib3's one try."""
    reason = ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset"))
    return requests.ConnectionError(MaxRetryError(None, url, reason))  # type: ignore[arg-type]


class ScriptedAdapter(HTTPAdapter):
    """Answers each request with the next answer scripted for its URL path, then `default`.

    An answer is `(status, body)` or `(status, body, headers)`, a body being bytes, text or a
    JSON document; or an exception to raise (`reset()`). `sent` lists the paths asked for."""

    def __init__(
        self,
        script: dict[str, list[Answer]] | None = None,
        default: Answer = (404, "404 page not found\n"),
    ) -> None:
        super().__init__()
        self.script = {path: list(answers) for path, answers in (script or {}).items()}
        self.default = default
        self.sent: list[str] = []
        self._lock = threading.Lock()

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        path = urlsplit(request.url or "").path
        with self._lock:
            self.sent.append(path)
            queue = self.script.get(path)
            answer = queue.pop(0) if queue else self.default
        if isinstance(answer, Exception):
            raise answer
        status, body, *rest = answer
        headers = rest[0] if rest else {}
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            headers = {"Content-Type": "application/json", **headers}
        data = body.encode() if isinstance(body, str) else body
        raw = HTTPResponse(
            body=io.BytesIO(data),
            headers={"Content-Length": str(len(data)), **headers},
            status=status,
            preload_content=False,
            decode_content=False,
        )
        return self.build_response(request, raw)


class ScriptedHTTP(requests.Session):
    """A session whose every request, whatever adapters a client mounts on it, goes to
    `adapter` (requests' public `get_adapter`)."""

    def __init__(self, adapter: ScriptedAdapter) -> None:
        super().__init__()
        self.adapter = adapter

    def get_adapter(self, url: str) -> HTTPAdapter:
        return self.adapter


# -- the two outcomes ----------------------------------------------------------------------------


def _key(f: Finding) -> tuple[str, str, int]:
    return (str(f.attempt.execution), f.attempt.node_id, f.attempt.attempt)


def assert_same_as(report: Report, baseline: Report) -> None:
    """A fault the clients recovered from: the report is the fault-free one."""
    assert report.complete, report.gaps
    assert report.findings == baseline.findings
    assert report.summary == baseline.summary


def covered(finding: Finding, gaps: Iterable[Gap]) -> bool:
    """A gap explains a lost or weakened finding when it spans its signal or its success."""
    times = [finding.succeeded_at, finding.signal.at if finding.signal else None]
    return any(
        t is not None and (g.start is None or g.start <= t) and (g.end is None or t <= g.end)
        for g in gaps
        for t in times
    )


def assert_incomplete_without_a_hole(report: Report, baseline: Report) -> None:
    """Gaps listed, no confident claim invented (only `suspected` may be added, inside a gap),
    and every finding missing or weaker than in the fault-free run lies inside a gap."""
    assert not report.complete
    got = {_key(f): f for f in report.findings}
    want = {_key(f): f for f in baseline.findings}
    for k in set(got) - set(want):
        assert got[k].verdict == "suspected" and covered(got[k], report.gaps), got[k]
    for k, f in want.items():
        if k in got and got[k].verdict == f.verdict:
            continue
        assert covered(f, report.gaps), (k, report.gaps)
