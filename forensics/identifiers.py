"""Execution identifiers as users paste them: `p:d:name`, `ex:p:d:name`, console URLs, bare names."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlparse

from forensics.config import FLYTE_NAME
from forensics.errors import UsageError
from forensics.model import ExecutionRef

# flyteadmin `validation.CheckValidExecutionID`: the name is lower-cased, then must match
# `^[a-z][a-z\-0-9]*$` and be at most 63 characters (20 before flyteadmin raised it to the
# Kubernetes label limit). That is Go's RE2, where `$` is the end of the text; Python's `$` also
# matches before a final newline, so names (and FLYTE_NAME's projects and domains) are matched
# whole: `p\n:d:name` is not an execution.
EXECUTION_NAME_MAX = 63
_NAME = re.compile(r"[a-z][a-z0-9-]*")
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
    if not FLYTE_NAME.fullmatch(p) or not FLYTE_NAME.fullmatch(d):
        raise UsageError(f"execution {text!r}: project and domain must be letters, digits, - or _")
    if not is_execution_name(n):
        raise UsageError(
            f"execution {text!r}: execution names match ^[a-z][a-z0-9-]*$ and have at most 63 characters"
        )
    return ExecutionRef(p, d, n)


def is_execution_name(name: str) -> bool:
    """Whether flyteadmin accepts `name` as an execution name as it stands (it lower-cases a
    name it is given first; a caller that sends one does that itself)."""
    return len(name) <= EXECUTION_NAME_MAX and _NAME.fullmatch(name) is not None
