"""flyteadmin's list requests as the sandbox Admin answers them: filters, sort keys, pagination
and their error texts. Pure: no state, no I/O (the in-process fakes share `parse_filters`).
Upstream: docs/upstream.md, "The sandbox servers".
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from flyteidl.admin import (
    common_pb2,
)

from forensics.model import UTC
from forensics.timeutil import fromisoformat

Status = grpc.StatusCode

EXECUTION, NODE_EXECUTION, TASK_EXECUTION, TASK = "e", "ne", "te", "t"
_PREFIXES = {
    "task": "t",
    "workflow": "w",
    "launch_plan": "l",
    "execution": "e",
    "node_execution": "ne",
    "task_execution": "te",
    "entities": "nen",
    "named_entity_metadata": "nem",
    "project": "p",
    "signal": "s",
    "admin_tag": "at",
    "execution_admin_tag": "eat",
}
_JOINS = {
    EXECUTION: {"e", "l", "w", "t", "at"},
    NODE_EXECUTION: {"ne", "e"},
    TASK_EXECUTION: {"te", "t", "e", "ne"},
    "p": {"p"},
}


def _names(text: str) -> set[str]:
    return set(text.split())


_BASE = _names("id created_at updated_at deleted_at")
_EXEC_KEY = _names("execution_project execution_domain execution_name execution_org")
# gorm DB names of each model (`repositories/models/*.go`, via `modelColumns`).
COLUMNS: dict[str, set[str]] = {
    EXECUTION: _BASE
    | _EXEC_KEY
    | _names(
        "launch_plan_id workflow_id task_id phase closure spec started_at execution_created_at "
        "execution_updated_at duration abort_cause mode source_execution_id "
        "parent_node_execution_id cluster inputs_uri user_inputs_uri error_kind error_code user "
        "state launch_entity"
    ),
    NODE_EXECUTION: _BASE
    | _EXEC_KEY
    | _names(
        "node_id phase input_uri closure started_at node_execution_created_at "
        "node_execution_updated_at duration node_execution_metadata parent_id "
        "parent_task_execution_id error_kind error_code cache_status "
        "dynamic_workflow_remote_closure_reference internal_data"
    ),
    TASK_EXECUTION: _BASE
    | _EXEC_KEY
    | _names(
        "project domain name version node_id retry_attempt phase phase_version input_uri closure "
        "started_at task_execution_created_at task_execution_updated_at duration"
    ),
    TASK: _BASE | _names("project domain name version closure digest type"),
    "l": _BASE | _names("project domain name version spec closure state"),
    "w": _BASE | _names("project domain name version closure digest"),
    "at": _BASE | {"name"},
    "p": _BASE | _names("identifier name description labels state org"),
}
_FILTER_RE = re.compile(r"(.+)\((.+),\s?(.+)\)")
_FUNCS = {"contains", "not_like", "gt", "gte", "lt", "lte", "eq", "ne", "value_in", "value_not_in"}
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}


class Abort(Exception):
    """A gRPC status to answer with."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def db_error(message: str) -> NoReturn:
    # flyteadmin's postgres transformer: any non-unique-violation error -> Unknown.
    raise Abort(Status.UNKNOWN, f"failed database operation with {message}")


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


@dataclass(frozen=True)
class Column:
    kind: str  # "str" | "int" | "time" | "duration"
    get: Callable[[Any], Any]


@dataclass(frozen=True)
class Filter:
    function: str
    column: Column
    values: tuple[Any, ...]

    def __call__(self, row: Any) -> bool:
        v = self.column.get(row)
        if v is None:  # SQL NULL compares false
            return False
        f, vals = self.function, self.values
        if f in ("value_in", "value_not_in"):
            return (v in vals) == (f == "value_in")
        if len(vals) != 1:
            db_error(f'syntax error in "{f}" with a list of values')
        x = vals[0]
        if f in ("contains", "not_like"):
            if self.column.kind != "str":
                db_error("operator does not exist: LIKE on a non-text column")
            if f == "contains":
                return x in v
            pattern = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in x)
            return re.fullmatch(pattern, v, re.S) is None
        return _COMPARE[f](v, x)


def _typed(kind: str, raw: str) -> Any:
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            db_error(f'invalid input syntax for type integer: "{raw}"')
    if kind == "time":
        try:
            t = fromisoformat(raw.replace(" ", "T"))  # Postgres reads `Z` on every Python
        except ValueError:
            db_error(f'invalid input syntax for type timestamp with time zone: "{raw}"')
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    return raw


def _go_duration_ns(raw: str) -> int:
    """flyteadmin `prepareValues` for `duration`: a bare float is seconds, else Go ParseDuration."""
    try:
        return int(float(raw) * 10**9)
    except ValueError:
        pass
    sign = -1 if raw.startswith("-") else 1
    body = raw.lstrip("+-")
    parts = _GO_DURATION.findall(body)
    if not body or "".join(n + u for n, u in parts) != body:
        raise Abort(Status.INVALID_ARGUMENT, f"Failed to parse duration [{raw}]")
    return sign * int(sum(float(n) * _GO_UNITS[u] for n, u in parts))


def parse_filters(text: str, entity: str, columns: dict[str, Column]) -> list[Filter]:
    """flyteadmin's `ParseFilters` for `entity`, compiled to predicates over the sandbox rows."""
    out: list[Filter] = []
    for expression in text.split("+"):
        m = _FILTER_RE.search(expression)
        if m is None:
            raise Abort(Status.INVALID_ARGUMENT, "invalid value for filters")
        function, field_name, raw = m.group(1), m.group(2), m.group(3)
        referenced = entity
        for prefix, code in _PREFIXES.items():
            if field_name.startswith(prefix + "."):
                referenced, field_name = code, field_name[len(prefix) + 1 :]
                break
        if referenced not in _JOINS[entity]:
            raise Abort(Status.INVALID_ARGUMENT, f"'{referenced}' entity is not allowed in filters")
        if field_name not in COLUMNS[referenced]:
            raise Abort(Status.INVALID_ARGUMENT, f"'{referenced}.{field_name}' is invalid filter")
        values = raw.split(";")
        if field_name.lower() == "duration":
            values = [_go_duration_ns(v) for v in values]  # type: ignore[misc]
        if function not in _FUNCS:
            raise Abort(Status.INVALID_ARGUMENT, f"unrecognized filter function: {function}")
        column = columns.get(field_name) if referenced == entity else None
        if column is None:
            raise Abort(
                Status.UNIMPLEMENTED,
                f"the sandbox Admin does not evaluate filters on {referenced}.{field_name}",
            )
        typed = tuple(
            v if isinstance(v, int) and column.kind == "duration" else _typed(column.kind, v)
            for v in values
        )
        out.append(Filter(function, column, typed))
    return out


def sorted_rows(
    rows: list[Any],
    sort_by: common_pb2.Sort | None,
    entity: str,
    columns: dict[str, Column],
    has: bool,
) -> list[Any]:
    if not has:
        return rows  # no ORDER BY: the sandbox keeps insertion (row id) order
    key = sort_by.key  # type: ignore[union-attr]
    if key not in COLUMNS[entity]:
        raise Abort(Status.INVALID_ARGUMENT, f"invalid sort key '{key}'")
    column = columns.get(key)
    if column is None:
        raise Abort(Status.UNIMPLEMENTED, f"the sandbox Admin does not sort by {key}")
    present = [r for r in rows if column.get(r) is not None]
    nulls = [r for r in rows if column.get(r) is None]
    if sort_by.direction == common_pb2.Sort.ASCENDING:  # type: ignore[union-attr]
        return sorted(present, key=column.get) + nulls  # Postgres: NULLS LAST ascending
    return nulls + sorted(present, key=column.get, reverse=True)


def page_of(rows: list[Any], limit: int, token: str, rpc: str) -> tuple[list[Any], str]:
    try:
        offset = int(token) if token else 0
    except ValueError:
        offset = -1
    if offset < 0:
        raise Abort(Status.INVALID_ARGUMENT, f"invalid pagination token {token} for {rpc}")
    page = rows[offset : offset + limit]
    return page, str(offset + len(page)) if len(page) == limit else ""
