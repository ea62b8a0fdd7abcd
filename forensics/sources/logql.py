"""LogQL building: safely quoted strings, label matchers, stream selectors and line filters.

Pure functions. Quoting follows Go's `strconv.Quote` rules, which is how Loki's parser
(grafana/loki `pkg/logql/syntax`) reads string literals back; regex escaping is Go's
`regexp.QuoteMeta`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from forensics.errors import ConfigError, UsageError

LINE_FILTER_OPS = ("|=", "!=", "|~", "!~")
MATCHER_OPS = ("=", "!=", "=~", "!~")


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_GO_ESCAPES = {
    "\a": r"\a",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
    "\v": r"\v",
    "\\": "\\\\",
    '"': '\\"',
}
_RE2_META = frozenset("\\.+*?()|[]{}^$")  # exactly what Go's regexp.QuoteMeta escapes
_STRING = r'"(?:[^"\\\n]|\\.)*"|`[^`]*`'
_MATCHER = rf"\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*(?:{_STRING})\s*"
_SELECTOR = re.compile(rf"\{{{_MATCHER}(?:,{_MATCHER})*\}}", re.S)


def quote_string(value: str) -> str:
    """`value` as a double-quoted LogQL (Go) string literal that Loki reads back as exactly `value`.

    Backslash, double quote and control characters are escaped, so no user-supplied value can end
    the string early and inject LogQL.
    """
    out = ['"']
    for ch in value:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            raise UsageError(f"{value!r} contains a lone surrogate and cannot be sent to Loki")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def regex_escape(literal: str) -> str:
    """Escape RE2 metacharacters so `literal` matches itself inside `=~`, `!~`, `|~` or `!~`."""
    return "".join("\\" + c if c in _RE2_META else c for c in literal)


def matcher(name: str, op: str, value: str) -> str:
    """One label matcher, `name="value"` / `name=~"regex"`, with the value safely quoted."""
    if not _LABEL_NAME.match(name):
        raise UsageError(f"{name!r} is not a valid Loki label name")
    if op not in MATCHER_OPS:
        raise UsageError(
            f"label matcher operator must be one of {', '.join(MATCHER_OPS)}, not {op!r}"
        )
    return f"{name}{op}{quote_string(value)}"


def selector(
    matchers: Mapping[str, tuple[str, str]] | Iterable[tuple[str, str, str]],
) -> str:
    """A stream selector `{a="x", b=~"y"}` from `{name: (op, value)}` or `(name, op, value)` triples.

    Triples allow two matchers on one label (`namespace=~".+", namespace!~"kube-.*"`).
    """
    items = (
        [(name, op, value) for name, (op, value) in matchers.items()]
        if isinstance(matchers, Mapping)
        else list(matchers)
    )
    if not items:
        raise UsageError("a Loki stream selector needs at least one label matcher")
    return "{" + ", ".join(matcher(name, op, value) for name, op, value in items) + "}"


def _filter_literal(op: str, value: str) -> str:
    # Regexes read better raw (`Signals\.SIGTERM` rather than "Signals\\.SIGTERM"); a raw string
    # cannot hold a backtick, and Go drops carriage returns from raw strings.
    raw_ok = "`" not in value and all(c.isprintable() for c in value)
    if op in ("|~", "!~") and "\\" in value and raw_ok:
        return f"`{value}`"
    return quote_string(value)


def line_filter(op: str, value: str) -> str:
    """One line filter stage: `|= "text"`, `!= "text"`, `|~ `regex``, `!~ `regex``."""
    if op not in LINE_FILTER_OPS:
        raise UsageError(
            f"line filter operator must be one of {', '.join(LINE_FILTER_OPS)}, not {op!r}"
        )
    return f"{op} {_filter_literal(op, value)}"


def label_filter(name: str, op: str, value: str) -> str:
    """One label filter stage, `| name=~"value"`: it sees stream labels and structured metadata
    alike (grafana/loki `pkg/logql/log/labels.go`), so it finds a pod whether Loki indexes its
    name or keeps it as structured metadata (OTLP ingestion)."""
    return f"| {matcher(name, op, value)}"


def split_query(query: str) -> tuple[str, str]:
    """Split a log query into its stream selector `{...}` and the (possibly empty) pipeline."""
    q = query.strip()
    m = _SELECTOR.match(q)
    if m is None:
        raise ConfigError(
            f"Loki stream selector {query!r} does not look like "
            '{label="value", ...} (operators =, !=, =~, !~; values in double quotes or backticks)'
        )
    return q[: m.end()], q[m.end() :].strip()


def validate_selector(text: str) -> str:
    """Check that a configured selector is exactly one `{...}` stream selector; return it trimmed."""
    sel, rest = split_query(text)
    if rest:
        raise ConfigError(
            f"Loki stream selector {text!r} has text after the closing '}}': {rest!r}"
        )
    return sel


def build_query(selector: str, line_filters: Sequence[tuple[str, str]] = ()) -> str:
    """A log query: a validated stream selector followed by line filters (`|=`, `!=`, `|~`, `!~`)."""
    parts = [validate_selector(selector)]
    parts.extend(line_filter(op, value) for op, value in line_filters)
    return " ".join(parts)
