"""Webhook notifications: one POST per run and URL, JSON or a Slack incoming-webhook payload.

Webhook URLs carry their secret in the path (Slack's `/services/T…/B…/…`), so only scheme and
host are ever printed; urllib3's own log records (request lines, retry warnings) are redacted
while a notification is being sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from forensics import TOOL
from forensics.errors import FailureKind, UsageError
from forensics.failures import http_status_kind, os_failure
from forensics.retry import ONE_TRY, Again, RetryPolicy, call, retry_after
from forensics.secrets import safe_url, url_secrets

FORMATS = ("json", "slack")
# Slack rejects a message with more than 50 blocks; the rest are counted in a closing line.
_SLACK_MAX_ITEMS = 40
_TIMEOUT = (5.0, 15.0)  # connect, read


def check_webhook(url: str) -> None:
    """Refuse (exit 2) a --notify value that is not an http(s) URL, without echoing it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--notify {safe_url(url) if parts.scheme else '<value>'}: not an http(s) URL"
        )


@dataclass(frozen=True)
class Delivery:
    """How one webhook POST ended: `error` is None on success (a 2xx after retries)."""

    target: str  # scheme://host only
    error: str | None
    failure: FailureKind | None = None  # what the error means


@dataclass(frozen=True)
class Message:
    """What is new in this run, in the report's JSON shapes (docs/report.md), and the one-line summary."""

    summary: str
    window: dict[str, Any]
    complete: bool
    findings: Sequence[dict[str, Any]]
    pending: Sequence[dict[str, Any]]
    gaps: Sequence[dict[str, Any]]
    page_url: str | None = None  # the incident page uploaded by --report-html s3://…

    def json_payload(self) -> dict[str, Any]:
        return {
            "tool": TOOL,
            "text": self.summary,
            "window": self.window,
            "complete": self.complete,
            "new_findings": list(self.findings),
            "new_pending": list(self.pending),
            "new_gaps": list(self.gaps),
            "report_html": self.page_url,
        }

    def slack_payload(self) -> dict[str, Any]:
        """An incoming-webhook payload: `text` (the notification's fallback) and blocks."""
        head = f"*{self.summary}*"
        if self.page_url:
            head += f"\n{_link(self.page_url, 'The incident page: timelines and cost')}"
        blocks: list[dict[str, Any]] = [
            {"type": "section", "text": {"type": "mrkdwn", "text": head}}
        ]
        lines = [_slack_finding(f) for f in self.findings]
        lines += [_slack_pending(p) for p in self.pending]
        lines += [
            f":warning: gap in {g.get('source')}: {g.get('start')} – {g.get('end')}: "
            f"{g.get('error')}"
            for g in self.gaps
        ]
        for line in lines[:_SLACK_MAX_ITEMS]:
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": line}})
        if len(lines) > _SLACK_MAX_ITEMS:
            more = len(lines) - _SLACK_MAX_ITEMS
            blocks.append(
                {
                    "type": "context",
                    "elements": [{"type": "mrkdwn", "text": f"… and {more} more in the report"}],
                }
            )
        return {"text": self.summary, "blocks": blocks}


def _exec_name(item: dict[str, Any]) -> str:
    e = item.get("execution") or {}
    return f"{e.get('project')}/{e.get('domain')}/{e.get('name')}"


def _link(url: str | None, label: str) -> str:
    return f"<{url}|{label}>" if url else label


def _slack_finding(f: dict[str, Any]) -> str:
    links = f.get("links") or {}
    sig = f.get("signal") or {}
    ck = f.get("checkpoint") or {}
    head = _link(links.get("flyte"), _exec_name(f))
    parts = [
        f"*{f.get('verdict')}* {head} node `{f.get('node_id')}` attempt {f.get('attempt')}",
        f"signal {sig.get('name')} at {sig.get('at')}" if sig else "no signal found",
        f"succeeded {f.get('succeeded_at')}",
        f"checkpoint {ck.get('state')}",
    ]
    if links.get("logs"):
        parts.append(_link(links["logs"], "logs"))
    parent = f.get("parent")  # docs/report.md: a child execution names its parent (relaunch that)
    if isinstance(parent, dict) and parent.get("execution"):
        parts.append(f"child of {_exec_name(parent)}")
    return " · ".join(parts)


def _slack_pending(p: dict[str, Any]) -> str:
    sig = p.get("signal") or {}
    return (
        f"*pending* {_exec_name(p)} node `{p.get('node_id')}` attempt {p.get('attempt')}: "
        f"signalled at {sig.get('at')}, not finished yet — rescan"
    )


class _Redact(logging.Filter):
    """Replace each webhook's secret part in urllib3's log records by its scheme and host."""

    def __init__(self, urls: Sequence[str]) -> None:
        super().__init__()
        self._secrets = [part for url in urls for part in url_secrets(url)]

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        for secret, shown in sorted(self._secrets, key=lambda s: -len(s[0])):
            text = text.replace(secret, shown)
        record.msg, record.args = text, ()
        return True


@contextmanager
def _redacted(urls: Sequence[str]) -> Iterator[None]:
    names = ("urllib3.connectionpool", "urllib3.util.retry", "urllib3.connection")
    loggers = [logging.getLogger(n) for n in names]
    f = _Redact(urls)
    for lg in loggers:
        lg.addFilter(f)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(f)


_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class _Status(Exception):
    """An answer worth another try (`after`: its Retry-After); `response` if none is left."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(response.status_code)
        self.response = response
        self.after = retry_after(response.headers.get("Retry-After"))


def _again(e: Exception) -> Again | None:
    if isinstance(e, _Status):
        return Again(f"answered {e.response.status_code}", e.after)
    if isinstance(e, requests.ConnectionError):
        return Again("failed")
    return None


def session() -> requests.Session:
    """A session that tries each request once (`post` retries)."""
    s = requests.Session()
    adapter = HTTPAdapter(max_retries=ONE_TRY)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s


def post(s: requests.Session, url: str, payload: dict[str, Any], policy: RetryPolicy) -> Delivery:
    """POST `payload` to `url`, retried with exponential backoff on connection errors, 429 and
    5xx (Retry-After honoured); how it ended. POST is not idempotent: a retry after a lost
    answer may deliver twice — at least once is the contract (docs/deployment.md)."""
    target = safe_url(url)

    def once() -> requests.Response:
        r = s.post(url, json=payload, timeout=_TIMEOUT)
        if r.status_code in _RETRY_STATUSES:
            raise _Status(r)
        return r

    try:
        r = call(policy, once, _again)
    except _Status as answered:
        r = answered.response
    except requests.RequestException as e:
        # str(e) names the full URL: only the exception's class is said.
        kind = os_failure(e) or FailureKind.UNREACHABLE
        if isinstance(e, requests.Timeout):
            kind = FailureKind.TIMED_OUT
        return Delivery(target, f"{type(e).__name__} after retries", kind)
    if 200 <= r.status_code < 300:
        return Delivery(target, None)
    return Delivery(target, f"HTTP {r.status_code} after retries", http_status_kind(r.status_code))


# Three retries, waits of 0, 1, 2 s (urllib3's formula), a server's Retry-After first (up to
# urllib3's cap of six hours).
POLICY = RetryPolicy(
    retries=3,
    backoff_factor=0.5,
    backoff_max=120.0,
    retry_after_max=21600.0,
    total_time=float("inf"),
)


def deliver(urls: Sequence[str], message: Message, fmt: str) -> list[Delivery]:
    """POST `message` once to each URL (with retries); say how each ended, secrets left out."""
    payload = message.slack_payload() if fmt == "slack" else message.json_payload()
    with _redacted(urls), session() as s:
        return [post(s, url, payload, POLICY) for url in urls]
