"""What a Python caller may pass for each kind of argument, made into what the library works
with: one normaliser per kind, used by every public entry point that takes that kind
(docs/library.md, "What each argument takes").

- an execution: an `ExecutionRef`, or any form the CLI takes (`project:domain:name`,
  `project/domain/name`, a Flyte console URL);
- a window's start: an aware `datetime`, a `timedelta` back from its end, or the CLI's
  `--since` text (RFC 3339, a date, or a duration such as `7d`); its end: a `datetime`, the
  CLI's `--until` text, or None (now);
- projects and domains: one name (`"gs1"`: one project, never its letters) or any iterable of
  names, each a Flyte name;
- a report: a `Report` or its document (`as_dict()`, the JSON of docs/report.md).

A value of the wrong type is a TypeError naming the parameter (a mistake in the calling code);
a value of the right type that is malformed is a UsageError (`params.ParamError`) naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from forensics.model import ExecutionRef, Report, Window
from forensics.params import Param, ParamError


def _type_error(param: str, expected: str, value: object) -> TypeError:
    return TypeError(f"{param}: expected {expected}, got {type(value).__name__} {value!r}")


def execution_of(value: ExecutionRef | str, *, param: str = "execution") -> ExecutionRef:
    """An ExecutionRef, or one parsed from a form the CLI takes (UsageError otherwise)."""
    if isinstance(value, ExecutionRef):
        return value
    if not isinstance(value, str):
        raise _type_error(param, "an ExecutionRef or 'project:domain:name'", value)
    from forensics.identifiers import parse_execution

    return parse_execution(value)


def names_of(value: str | Iterable[str] | None, *, param: str) -> tuple[str, ...]:
    """Projects or domains: a str is one name; None or empty is none (every one)."""
    from forensics.config import FLYTE_NAME

    if value is None:
        return ()
    if isinstance(value, str):
        names: tuple[object, ...] = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, bytes | Mapping):
        names = tuple(value)
    else:
        raise _type_error(param, "a name or an iterable of names", value)
    for name in names:
        if not isinstance(name, str):
            raise _type_error(param, "names (str)", name)
        if not FLYTE_NAME.fullmatch(name):
            raise ParamError(
                Param(param), f": {name!r} is not a Flyte name (letters, digits, - and _)"
            )
    return tuple(dict.fromkeys(names))  # type: ignore[arg-type]


def _time_text(value: datetime | str | None, param: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ParamError(Param(param), f": {value!r} has no time zone (give an aware datetime)")
        return value.isoformat()
    raise _type_error(param, "a datetime or a time text (RFC 3339, a date)", value)


def since_text(value: datetime | timedelta | str | None, *, param: str = "since") -> str | None:
    """A window's start as the CLI's `--since` text: a datetime (aware), a positive timedelta
    (seconds, `90s`) or the text itself (`7d`, a date, RFC 3339); None stays None."""
    if isinstance(value, timedelta):
        if value <= timedelta(0):
            raise ParamError(Param(param), f": {value!r} must be a positive duration")
        return f"{value.total_seconds():.6f}s"
    return _time_text(value, param)


def until_text(value: datetime | str | None, *, param: str = "until") -> str | None:
    """A window's end as the CLI's `--until` text: a datetime (aware) or the text itself."""
    return _time_text(value, param)


def window_of(
    since: datetime | timedelta | str,
    until: datetime | str | None = None,
    *,
    now: datetime | None = None,
) -> Window:
    """`[since, until)`: `since` a time, a timedelta or the CLI's `--since` text (`7d`, a date,
    RFC 3339); `until` a time, the CLI's `--until` text, or None for now. A bad value raises
    UsageError with the reason, as `--since`/`--until` are refused."""
    from forensics.model import UTC
    from forensics.timeutil import parse_until, parse_window

    end_text = _time_text(until, "until")
    if isinstance(since, timedelta):
        if since <= timedelta(0):
            raise ParamError(Param("since"), f": {since!r} must be a positive duration")
        end = parse_until(end_text, now or datetime.now(UTC))
        try:
            start = end - since
        except OverflowError:
            raise ParamError(Param("since"), f": {since!r} reaches back too far") from None
        return parse_window(start.isoformat(), end.isoformat(), now=now)
    if not isinstance(since, str | datetime):
        raise _type_error("since", "a datetime, a timedelta or a text such as '7d'", since)
    return parse_window(_time_text(since, "since"), end_text, now=now)  # type: ignore[arg-type]


def report_doc(value: Report | Mapping[str, Any], *, param: str = "report") -> dict[str, Any]:
    """A report's JSON document (docs/report.md) from a Report or the document itself."""
    if isinstance(value, Report):
        return value.as_dict()
    if isinstance(value, Mapping):
        return dict(value)
    raise _type_error(param, "a Report or its as_dict() document", value)


def reports_of(
    value: Report | Mapping[str, Any] | Iterable[Report | Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Several reports' documents; one Report or document alone is a list of one."""
    if isinstance(value, Report | Mapping):
        return [report_doc(value, param="reports")]
    if not isinstance(value, Iterable) or isinstance(value, str | bytes):
        raise _type_error("reports", "Reports or their as_dict() documents", value)
    return [report_doc(r, param="reports") for r in value]
