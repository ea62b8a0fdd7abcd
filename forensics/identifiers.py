"""Execution identifiers as users paste them: `p:d:name`, `ex:p:d:name`, console URLs, bare names."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlparse

from forensics.errors import UsageError
from forensics.model import ExecutionRef

# Whole strings (`fullmatch`): Python's `$` also matches before a final newline, which
# flyteadmin's Go `^…$` (RE2, end of text only) does not; `p\n:d:name` is not an execution.
_NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_URL_PATH = re.compile(r"/projects/([^/]+)/domains/([^/]+)/executions/([^/?#]+)")

FORMS = (
    "project:domain:name, project/domain/name, ex:project:domain:name, a Flyte console URL "
    "(…/projects/P/domains/D/executions/NAME), or a bare name with --project and --domain"
)


def parse_execution(
    text: str, *, project: str | None = None, domain: str | None = None
) -> ExecutionRef:
    """An ExecutionRef from any accepted form; a clear UsageError otherwise."""
    raw = text.strip()
    if raw.startswith(("http://", "https://")):
        m = _URL_PATH.search(unquote(urlparse(raw).path))
        if not m:
            raise UsageError(
                f"execution {text!r}: not a Flyte console execution URL (expected {FORMS})"
            )
        parts = list(m.groups())
    else:
        # `p/d/name` as flytectl and older reports print it; no part may hold `/` or `:`.
        parts = raw.split("/") if "/" in raw and ":" not in raw else raw.split(":")
        if parts and parts[0] == "ex":
            parts = parts[1:]
        if len(parts) == 1:
            if not (project and domain):
                raise UsageError(
                    f"execution {text!r}: a bare name needs --project and --domain (or use {FORMS})"
                )
            parts = [project, domain, parts[0]]
        if len(parts) != 3:
            raise UsageError(f"execution {text!r}: unknown form (expected {FORMS})")
    p, d, n = parts
    if not _PART.fullmatch(p) or not _PART.fullmatch(d):
        raise UsageError(f"execution {text!r}: project and domain must be letters, digits, - or _")
    if not _NAME.fullmatch(n):
        raise UsageError(
            f"execution {text!r}: execution names match ^[a-z][a-z0-9-]*$ and have at most 63 characters"
        )
    return ExecutionRef(p, d, n)
