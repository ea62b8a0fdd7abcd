"""Flyte Admin's transport: the one place that speaks gRPC (flytekit's channel, flyteidl's
messages), with retries, deadlines, paging and the `calls` counter, answering in our records
(`admin_types.py`). The reads (`admin_reads.py`) and the relaunch writes (`admin_relaunch.py`)
sit on it; nothing else imports flytekit, flyteidl or grpc.

The channel is `admin_channel.py`'s, the protobuf-to-record conversion `admin_records.py`'s, the
filter language `admin_filters.py`'s. What Admin and propeller put where, and how many calls each
question costs: docs/upstream.md ("What Admin and propeller put where") and docs/performance.md
("Admin calls per question").
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc
import yaml
from flyteidl.admin import (
    common_pb2,
    execution_pb2,
    launch_plan_pb2,
    node_execution_pb2,
    project_pb2,
    task_execution_pb2,
)
from flyteidl.core import identifier_pb2
from google.protobuf import json_format

from forensics.config import flytekit_config_file
from forensics.errors import ConfigError, FailureKind, NotFoundError, SourceError
from forensics.failures import os_failure
from forensics.model import AttemptRef, ExecutionRecord, ExecutionRef
from forensics.notices import retrying
from forensics.retry import Again, RetryPolicy, call
from forensics.secrets import masked_url
from forensics.sources.admin_closures import NodePlan, plan_of
from forensics.sources.admin_records import (
    dynamic_workflow,
    execution_record,
    execution_ref,
    graph_of,
    input_texts,
    literals_of,
    node_record,
    task_facts_of,
    task_run,
    task_template_of,
    workflow_facts_of,
)
from forensics.sources.admin_types import (
    Created,
    DynamicWorkflow,
    Literals,
    NodeData,
    NodeRecord,
    RerunRequest,
    TaskFacts,
    TaskId,
    TaskRun,
    TaskTemplate,
    VersionRequest,
    WorkflowFacts,
    WorkflowGraph,
    one_line,
    rerun_labels,
)
from forensics.sources.task_resources import TaskResources, resources_of

# flytekit reads its config file already while it is imported (data_persistence's
# `DataConfig.auto()`), and logs one it cannot parse as a warning of several lines: its records
# are held from here to `load_platform_config` (below), which writes them or, when it refuses
# that config in one line of ours, drops them. A filter (flytekit sets its logger's level and
# handler on import, never its filters), taken off again once the import is done. The modules
# above this block import nothing of flytekit.
_FLYTEKIT_LOG = logging.getLogger("flytekit")
_HELD_AT_IMPORT: list[logging.LogRecord] = []
_hold_at_import = _HELD_AT_IMPORT.append  # returns None: the record is kept here, not written
_FLYTEKIT_LOG.addFilter(_hold_at_import)
try:
    from flytekit.clients.friendly import SynchronousFlyteClient
    from flytekit.configuration import PlatformConfig
    from flytekit.configuration.file import get_config_file
    from flytekit.exceptions.base import FlyteException

    from forensics.sources.admin_channel import (
        AdminCalls,
        AdminChannel,
        FlytekitCalls,
    )
finally:
    _FLYTEKIT_LOG.removeFilter(_hold_at_import)

log = logging.getLogger("forensics.sources.admin")

T = TypeVar("T")
Status = grpc.StatusCode

# Idempotent reads may be repeated; these statuses say "try again", nothing else does. NOT_FOUND,
# INVALID_ARGUMENT and ALREADY_EXISTS are answers, and repeating them only costs round trips.
RETRYABLE = frozenset({Status.UNAVAILABLE, Status.RESOURCE_EXHAUSTED, Status.DEADLINE_EXCEEDED})

# Node and task lists join the executions table, where a bare `id` would be ambiguous; these
# columns exist only on their own table and are unique within one node / one execution.
_NODE_SORT = common_pb2.Sort(key="node_id", direction=common_pb2.Sort.ASCENDING)
_TASK_SORT = common_pb2.Sort(key="retry_attempt", direction=common_pb2.Sort.ASCENDING)


# -- configuration ----------------------------------------------------------------------------


def load_platform_config(config_file: str | None) -> PlatformConfig:
    """flytekit's own loading (as pyflyte): `config_file`, else its search; FLYTE_* env wins.

    flytekit's log records meanwhile (and those of its import) are held: written once the config
    is taken, dropped when it is refused, as a configuration error is one line (ours)."""
    with _flytekit_records_held() as held:
        platform = _platform_config(config_file)  # a ConfigError leaves, the records dropped
    for record in held:
        _FLYTEKIT_LOG.handle(record)
    return platform


@contextmanager
def _flytekit_records_held() -> Iterator[list[logging.LogRecord]]:
    """flytekit's records from the block (after any left from its import) are kept, not written."""
    held = _HELD_AT_IMPORT[:]
    _HELD_AT_IMPORT.clear()
    hold = held.append  # a filter that returns None: each record is kept, not written
    _FLYTEKIT_LOG.addFilter(hold)
    try:
        yield held
    finally:
        _FLYTEKIT_LOG.removeFilter(hold)


def _platform_config(config_file: str | None) -> PlatformConfig:
    try:
        # flytekit's own search, minus its process-wide lru_cache: a FLYTECTL_CONFIG or file
        # that changed since the first lookup (tests, the sandbox, `demo`) is still honoured.
        found = get_config_file.__wrapped__(config_file)
    except Exception as e:  # configparser / OS errors from a legacy INI file
        where = _searched_file(config_file) or "(flytekit's search)"
        raise ConfigError(f"Flyte config {where}: {one_line(str(e))}") from None
    if found is not None and found.yaml_config is None and found.legacy_config is None:
        # flytekit only logs a warning for unparsable YAML and falls back to localhost:30080;
        # a forensics run against the wrong Admin must not start silently.
        where = _searched_file(config_file)
        raise ConfigError(f"Flyte config {where or '(flytekit config file)'}: {_not_yaml(where)}")
    try:
        return PlatformConfig.auto(found)
    except Exception as e:
        where = (_searched_file(config_file) if found is not None else None) or (
            "(FLYTE_* environment)"
        )
        raise ConfigError(f"Flyte config {where}: {one_line(str(e))}") from None


def _searched_file(config_file: str | None) -> str | None:
    """The file flytekit's `get_config_file` reads: the one given, else the one its own search
    finds (`config.flytekit_config_file`), absolute, as flytekit names it."""
    if config_file:
        return config_file
    found, _ = flytekit_config_file(os.environ)
    return str(Path(found).absolute()) if found else None


def _not_yaml(path: str | None) -> str:
    """Why flytekit could not take the YAML file `path`, as PyYAML says it (what, and the line
    and column where), in one line: never the file's text beyond YAML's short problem."""
    try:
        with open(path or "", "rb") as f:  # bytes: PyYAML finds the encoding, as flytekit's does
            document = yaml.safe_load(f)
    except yaml.MarkedYAMLError as e:
        return f"not valid YAML ({_yaml_mark(e)})"
    except yaml.YAMLError as e:  # an unreadable character: its position, not its line
        return f"not valid YAML ({one_line(str(e))})"
    except OSError:
        return "empty or not valid YAML"
    if document is None:
        return "empty (no settings in it)"
    return "empty or not valid YAML"  # parsed now: changed since flytekit read it


def _yaml_mark(e: yaml.MarkedYAMLError) -> str:
    """`line 3, column 1: expected ',' or ']', but got '<stream end>'; while parsing a flow
    sequence at line 2, column 13`: where the parser stopped, and where what it parsed began."""
    said = one_line(e.problem or e.context or "syntax error", limit=160)
    if e.problem_mark is not None:
        said = f"line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1}: {said}"
    if e.problem and e.context and e.context_mark is not None:
        at = f"line {e.context_mark.line + 1}, column {e.context_mark.column + 1}"
        said += f"; {one_line(e.context, limit=80)} at {at}"
    return said


# -- errors -----------------------------------------------------------------------------------


def rpc_status(exc: BaseException) -> tuple[grpc.StatusCode | None, str]:
    """The gRPC status of an RpcError, or of the one a flytekit exception was raised `from`."""
    for e in (exc, exc.__cause__, exc.__context__):
        if isinstance(e, grpc.RpcError) and callable(getattr(e, "code", None)):
            try:
                return e.code(), e.details() or ""
            except Exception:  # an RpcError without a status: fall through to the next link
                continue
    return None, ""


# What each gRPC status means (grpc/doc/statuscodes.md). UNAVAILABLE is also what gRPC core
# answers when it never reached the server: its own texts for that are read in `status_kind`.
_STATUS_KINDS = {
    Status.NOT_FOUND: FailureKind.NOT_FOUND,
    Status.UNAUTHENTICATED: FailureKind.AUTH_REFUSED,
    Status.PERMISSION_DENIED: FailureKind.AUTH_REFUSED,
    Status.DEADLINE_EXCEEDED: FailureKind.TIMED_OUT,
    Status.RESOURCE_EXHAUSTED: FailureKind.THROTTLED,
    Status.INVALID_ARGUMENT: FailureKind.REJECTED,
    Status.FAILED_PRECONDITION: FailureKind.REJECTED,
    Status.ALREADY_EXISTS: FailureKind.REJECTED,
    Status.OUT_OF_RANGE: FailureKind.REJECTED,
    Status.UNAVAILABLE: FailureKind.SERVER_FAILED,
    Status.INTERNAL: FailureKind.SERVER_FAILED,
    Status.UNKNOWN: FailureKind.SERVER_FAILED,
    Status.DATA_LOSS: FailureKind.SERVER_FAILED,
    Status.UNIMPLEMENTED: FailureKind.SERVER_FAILED,
}
# gRPC core's own details for a channel that never reached the server (src/core: the
# subchannel's "failed to connect to all addresses"; the resolver's "errors resolving", older
# c-ares releases' "DNS resolution failed").
_NO_CONNECTION = "failed to connect to all addresses"
_NO_NAME = ("errors resolving", "dns resolution failed")


def status_kind(code: grpc.StatusCode | None, details: str) -> FailureKind:
    """What a gRPC status means; an UNAVAILABLE gRPC core raised before any server answered is
    an unresolvable name or an address where nothing answers."""
    if code is Status.UNAVAILABLE:
        low = details.lower()
        if any(t in low for t in _NO_NAME):
            return FailureKind.NAME_UNRESOLVED
        if _NO_CONNECTION in low:
            return FailureKind.UNREACHABLE
    return _STATUS_KINDS.get(code, FailureKind.FAILED) if code else FailureKind.FAILED


def _source_error(rpc: str, target: str | None, exc: BaseException) -> SourceError:
    code, details = rpc_status(exc)
    if code is None:
        return SourceError(
            "admin",
            f"{rpc}: {one_line(f'{type(exc).__name__}: {exc}')}",
            target=target,
            kind=os_failure(exc) or FailureKind.FAILED,
        )
    cause = f"{rpc}: {code.name}" + (f": {one_line(details)}" if details else "")
    if code is Status.NOT_FOUND:
        return NotFoundError("admin", cause, target=target)
    if code is Status.UNAUTHENTICATED:
        cause += " (check flytekit's credentials settings: FLYTE_CREDENTIALS_* or admin.authType)"
    return SourceError(
        "admin",
        cause,
        target=target,
        retryable=code in RETRYABLE,
        kind=status_kind(code, details),
    )


def _again(exc: Exception) -> Again | None:
    """The retry checker: UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED only."""
    code, _ = rpc_status(exc)
    if code in RETRYABLE and code is not None:
        return Again(code.name.lower().replace("_", " "))
    return None


class _Answered(Exception):
    """A status the caller asked to see as an answer rather than an error (e.g. ALREADY_EXISTS)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code.name)
        self.code = code
        self.details = details


def parse_sort(sort_by: str | None) -> common_pb2.Sort | None:
    """`asc(column)` / `desc(column)` as Admin's Sort message; None for no sort."""
    if not sort_by:
        return None
    m = re.fullmatch(r"(asc|desc)\((\w+)\)", sort_by)
    if m is None:
        raise ValueError(f"sort_by must look like asc(column) or desc(column), not {sort_by!r}")
    direction = common_pb2.Sort.ASCENDING if m.group(1) == "asc" else common_pb2.Sort.DESCENDING
    return common_pb2.Sort(key=m.group(2), direction=direction)


def _ident(resource_type: int, ident: TaskId) -> identifier_pb2.Identifier:
    p, d, n, v = ident
    return identifier_pb2.Identifier(
        resource_type=resource_type, project=p, domain=d, name=n, version=v
    )


def _wf_id(ref: ExecutionRef) -> identifier_pb2.WorkflowExecutionIdentifier:
    return identifier_pb2.WorkflowExecutionIdentifier(
        project=ref.project, domain=ref.domain, name=ref.name
    )


def _node_id(ref: ExecutionRef, node_id: str) -> identifier_pb2.NodeExecutionIdentifier:
    return identifier_pb2.NodeExecutionIdentifier(node_id=node_id, execution_id=_wf_id(ref))


# -- the transport ----------------------------------------------------------------------------


class AdminTransport:
    """Admin's RPCs through flytekit's channel, one method per question, answering in records.

    flytekit's own client repeats every failed call `rpc_retries` (3) times at once, NOT_FOUND
    and ALREADY_EXISTS included; the channel opened here has no such layer (`AdminChannel`; a
    client a caller gives keeps its own), and this transport repeats UNAVAILABLE /
    RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED only, with exponential backoff, at most `retries`
    times. Each call carries a `timeout` deadline and is counted in `calls` (by RPC,
    retries included). Safe to share between threads.
    """

    def __init__(
        self,
        platform: PlatformConfig,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        client: SynchronousFlyteClient | None = None,
    ) -> None:
        self._platform = platform
        self.endpoint = masked_url(platform.endpoint)  # user:password never shown
        # Whether the channel is plaintext; None for a caller's client (its own to say).
        self.insecure: bool | None = self._platform.insecure if client is None else None
        # Exponential backoff from `backoff`, each wait between half and all of it, no deadline
        # beyond the calls' own.
        self._retry = RetryPolicy(
            retries=retries,
            backoff_factor=backoff,
            backoff_max=max_backoff,
            total_time=math.inf,
            jitter=0.5,
            first_immediate=False,
        )
        self._channel: AdminChannel | None = None  # ours to close; a client given to `over` is not
        if client is None:
            try:  # flytekit's channel, with keepalive options Admin accepts (admin_channel.py)
                self._channel = AdminChannel(self._platform)
            except Exception as e:  # bad endpoint / CA file: a configuration problem
                raise ConfigError(f"Flyte Admin {self.endpoint}: {one_line(str(e))}") from None
        self._rpc = (
            AdminCalls(self._channel, timeout) if client is None else FlytekitCalls(client, timeout)
        )
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    @staticmethod
    def platform_of(client: SynchronousFlyteClient) -> PlatformConfig:
        """What a flytekit client says publicly of its platform: its endpoint (`url`); the rest
        of its configuration is its own, used by its own channel."""
        return PlatformConfig(endpoint=client.url)

    def close(self) -> None:
        """Close the gRPC channel (idempotent); a client given to `over` stays open."""
        if self._channel is not None:
            self._channel.close()

    # -- plumbing ------------------------------------------------------------------------------
    def _call(
        self,
        rpc: str,
        target: str | None,
        fn: Callable[[], T],
        *,
        answers: frozenset[grpc.StatusCode] = frozenset(),
    ) -> T:

        def once() -> T:
            with self._lock:
                self.calls[rpc] += 1
            try:
                return fn()
            except (FlyteException, grpc.RpcError) as exc:
                code, details = rpc_status(exc)
                if code in answers:
                    raise _Answered(code, details) from None
                raise

        def notice(why: str, number: int, of: int) -> None:
            log.debug("Admin %s %s: %s; retry %d of %d", rpc, target, why, number, of)
            retrying("Flyte Admin", str(self.endpoint), why, number, of)

        try:
            return call(self._retry, once, _again, notice=notice)
        except (FlyteException, grpc.RpcError) as exc:
            raise _source_error(rpc, target, exc) from None

    def _pages(
        self, rpc: str, target: str, fetch: Callable[[str], tuple[Sequence[T], str]], limit: int
    ) -> Iterator[T]:
        """Every item of every page (`_page_lists`)."""
        for items in self._page_lists(rpc, target, fetch, limit):
            yield from items

    def _page_lists(
        self, rpc: str, target: str, fetch: Callable[[str], tuple[Sequence[T], str]], limit: int
    ) -> Iterator[Sequence[T]]:
        """Follow flyteadmin's offset tokens, one page per `next`; a token is returned exactly
        when a page is full."""
        token, seen = "", set()
        while True:
            items, nxt = self._call(rpc, target, lambda t=token: fetch(t))  # type: ignore[misc]
            yield items
            if not nxt:
                if len(items) == limit:
                    # flyteadmin always sets the token on a full page; without it we cannot
                    # know the listing is complete, and a forensics run must not guess.
                    raise SourceError(
                        "admin",
                        f"{rpc}: a full page came without a next-page token",
                        target=target,
                        kind=FailureKind.BAD_ANSWER,
                    )
                return
            if nxt in seen or nxt == token:
                raise SourceError(
                    "admin",
                    f"{rpc}: page token {nxt!r} repeated",
                    target=target,
                    kind=FailureKind.BAD_ANSWER,
                )
            seen.add(nxt)
            token = nxt

    # -- executions ----------------------------------------------------------------------------
    def execution(self, ref: ExecutionRef) -> ExecutionRecord:
        """GetExecution."""
        req = execution_pb2.WorkflowExecutionGetRequest(id=_wf_id(ref))
        return execution_record(
            self._call("GetExecution", str(ref), lambda: self._rpc.get_execution(req))
        )

    def executions(
        self, project: str, domain: str, filters: str, sort_by: str | None, page_size: int
    ) -> Iterator[list[ExecutionRecord]]:
        """ListExecutions, one page per `next` (its RPC sent inside it)."""
        sort = parse_sort(sort_by)

        def fetch(token: str) -> tuple[Sequence[execution_pb2.Execution], str]:
            req = common_pb2.ResourceListRequest(
                id=common_pb2.NamedEntityIdentifier(project=project, domain=domain),
                limit=page_size,
                token=token,
                filters=filters,
                sort_by=sort,
            )
            page = self._rpc.list_executions_paginated(req)
            return page.executions, page.token

        for page in self._page_lists("ListExecutions", f"{project}/{domain}", fetch, page_size):
            yield [execution_record(ex) for ex in page]

    def execution_inputs(self, ref: ExecutionRef) -> dict[str, str]:
        """GetExecutionData `full_inputs` as text (`admin_records.input_texts`)."""
        req = execution_pb2.WorkflowExecutionGetDataRequest(id=_wf_id(ref))
        data = self._call("GetExecutionData", str(ref), lambda: self._rpc.get_execution_data(req))
        return input_texts("GetExecutionData", str(ref), data)

    def node_inputs(self, ref: AttemptRef, node_id: str, index: int | None) -> dict[str, str]:
        """GetNodeExecutionData `full_inputs` of `node_id` as text; `index` picks that element
        of each collection."""
        target = f"{ref.execution}/{node_id}"
        req = node_execution_pb2.NodeExecutionGetDataRequest(id=_node_id(ref.execution, node_id))
        data = self._call(
            "GetNodeExecutionData", target, lambda: self._rpc.get_node_execution_data(req)
        )
        return input_texts("GetNodeExecutionData", target, data, index)

    def projects(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """ListProjects: each project's id and its domains' ids."""

        def fetch(token: str) -> tuple[Sequence[project_pb2.Project], str]:
            page = self._rpc.list_projects(project_pb2.ProjectListRequest(limit=100, token=token))
            return page.projects, page.token

        for p in self._pages("ListProjects", "projects", fetch, 100):
            yield p.id, tuple(dict.fromkeys(d.id for d in p.domains if d.id))

    # -- nodes and attempts --------------------------------------------------------------------
    def node_executions(self, ref: ExecutionRef, parent: str | None) -> Iterator[NodeRecord]:
        """ListNodeExecutions: the top-level nodes, or `parent`'s children."""

        def fetch(token: str) -> tuple[Sequence[node_execution_pb2.NodeExecution], str]:
            req = node_execution_pb2.NodeExecutionListRequest(
                workflow_execution_id=_wf_id(ref),
                limit=100,
                token=token,
                sort_by=_NODE_SORT,
                unique_parent_id=parent or "",
            )
            page = self._rpc.list_node_executions_paginated(req)
            return page.node_executions, page.token

        target = f"{ref}/{parent}" if parent else str(ref)
        for node in self._pages("ListNodeExecutions", target, fetch, 100):
            yield node_record(node)

    def node_execution(self, ref: AttemptRef) -> NodeRecord:
        """GetNodeExecution."""
        req = node_execution_pb2.NodeExecutionGetRequest(id=_node_id(ref.execution, ref.node_id))
        return node_record(
            self._call("GetNodeExecution", str(ref), lambda: self._rpc.get_node_execution(req))
        )

    def task_runs(
        self,
        ref: ExecutionRef,
        node_id: str,
        node: NodeRecord | None,
        template_of: Callable[[TaskId], TaskTemplate | None],
        parent_node: str | None = None,
    ) -> list[TaskRun]:
        """ListTaskExecutions of one node, by retry attempt; `node` (None: not read) and
        `template_of` fill what the task execution does not say."""
        tasks = self._task_executions(ref, node_id)
        return [task_run(ref, node, te, template_of, parent_node) for te in tasks]

    def direct_runs(
        self,
        ref: ExecutionRef,
        node_ids: Sequence[str],
        template_of: Callable[[TaskId], TaskTemplate | None],
    ) -> list[TaskRun] | None:
        """ListTaskExecutions of each top-level node, listed without its node execution; None
        (and no template read) when a task execution spawned nodes (`is_parent`)."""
        tasks = [te for n in node_ids for te in self._task_executions(ref, n)]
        if any(te.is_parent for te in tasks):
            return None
        return [task_run(ref, None, te, template_of) for te in tasks]

    def _task_executions(
        self, ref: ExecutionRef, node_id: str
    ) -> list[task_execution_pb2.TaskExecution]:
        nid = _node_id(ref, node_id)

        def fetch(token: str) -> tuple[Sequence[task_execution_pb2.TaskExecution], str]:
            req = task_execution_pb2.TaskExecutionListRequest(
                node_execution_id=nid, limit=100, token=token, sort_by=_TASK_SORT
            )
            page = self._rpc.list_task_executions_paginated(req)
            return page.task_executions, page.token

        tasks = list(self._pages("ListTaskExecutions", f"{ref}/{node_id}", fetch, 100))
        return sorted(tasks, key=lambda te: te.id.retry_attempt)

    # -- templates and workflows ---------------------------------------------------------------
    def _task(self, task_id: TaskId) -> Any:
        req = common_pb2.ObjectGetRequest(id=_ident(identifier_pb2.TASK, task_id))
        task = self._call("GetTask", ":".join(task_id), lambda: self._rpc.get_task(req))
        return task.closure.compiled_task.template

    def task_template(self, task_id: TaskId) -> TaskTemplate:
        """GetTask: what the scan needs of the template; NotFoundError if not registered."""
        return task_template_of(self._task(task_id))

    def task_facts(self, task_id: TaskId) -> TaskFacts:
        """GetTask: what the template says about the code; NotFoundError if not registered."""
        return task_facts_of(self._task(task_id))

    def task_resources(self, task_id: TaskId) -> TaskResources:
        """GetTask: what the task requests; NotFoundError if not registered."""
        return resources_of(self._task(task_id))

    def _get_by_id(self, rpc: str, resource_type: int, ident: TaskId) -> Any:
        """One Get* of a launch plan or workflow version by (project, domain, name, version)."""
        req = common_pb2.ObjectGetRequest(id=_ident(resource_type, ident))
        send = {"GetLaunchPlan": self._rpc.get_launch_plan, "GetWorkflow": self._rpc.get_workflow}
        return self._call(rpc, ":".join(ident), lambda: send[rpc](req))

    def launch_plan_workflow(self, lp: TaskId) -> TaskId:
        """GetLaunchPlan: the workflow a launch plan version runs."""
        w = self._get_by_id("GetLaunchPlan", identifier_pb2.LAUNCH_PLAN, lp).spec.workflow_id
        return (w.project, w.domain, w.name, w.version)

    def workflow_plan(self, wf: TaskId) -> NodePlan:
        """GetWorkflow: which of the workflow version's nodes can run an elastic task."""
        wf_closure = self._get_by_id("GetWorkflow", identifier_pb2.WORKFLOW, wf).closure
        return plan_of(wf_closure.compiled_workflow)

    def dynamic_workflow(self, ref: ExecutionRef, parent: str) -> DynamicWorkflow:
        """GetNodeExecutionData of a dynamic parent: its compiled workflow's plan and tasks."""
        req = node_execution_pb2.NodeExecutionGetDataRequest(id=_node_id(ref, parent))
        data = self._call(
            "GetNodeExecutionData",
            f"{ref}/{parent}",
            lambda: self._rpc.get_node_execution_data(req),
        )
        return dynamic_workflow(data.dynamic_workflow.compiled_workflow)

    def workflow_facts(self, launch_plan: TaskId) -> WorkflowFacts:
        """GetLaunchPlan, then GetWorkflow of its workflow: the compiled tasks and nodes."""
        lp = self._get_by_id("GetLaunchPlan", identifier_pb2.LAUNCH_PLAN, launch_plan)
        wf_id = lp.spec.workflow_id
        workflow = (wf_id.project, wf_id.domain, wf_id.name, wf_id.version)
        wf = self._call(
            "GetWorkflow",
            ":".join(workflow),
            lambda: self._rpc.get_workflow(common_pb2.ObjectGetRequest(id=wf_id)),
        )
        return workflow_facts_of(launch_plan, workflow, wf.closure.compiled_workflow)

    def launch_plan_versions(self, project: str, domain: str, name: str) -> Iterator[str]:
        """ListLaunchPlans sorted by created_at, newest first: each one's version."""

        def fetch(token: str) -> tuple[Sequence[launch_plan_pb2.LaunchPlan], str]:
            req = common_pb2.ResourceListRequest(
                id=common_pb2.NamedEntityIdentifier(project=project, domain=domain, name=name),
                limit=100,
                token=token,
                sort_by=common_pb2.Sort(key="created_at", direction=common_pb2.Sort.DESCENDING),
            )
            page = self._rpc.list_launch_plans_paginated(req)
            return page.launch_plans, page.token

        for lp in self._pages("ListLaunchPlans", f"{project}:{domain}:{name}", fetch, 100):
            yield lp.id.version

    # -- creating executions -------------------------------------------------------------------
    def _create(self, rpc: str, ref: ExecutionRef, send: Callable[[], Any]) -> Created:
        """Send a request that creates an execution; a lost answer is retried, and the retry's
        ALREADY_EXISTS answered as `Created.taken` (with how often the request was sent)."""
        sent = 0

        def once() -> Any:
            nonlocal sent
            sent += 1
            return send()

        try:
            resp = self._call(rpc, str(ref), once, answers=frozenset({Status.ALREADY_EXISTS}))
        except _Answered as a:
            return Created(None, a.details, sent)
        return Created(execution_ref(resp.id), None, sent)

    def relaunch_execution(self, ref: ExecutionRef, name: str, overwrite_cache: bool) -> Created:
        """RelaunchExecution of `ref` as `name` (the friendly client's `relaunch_execution`
        cannot send `overwrite_cache`, so the raw request is built here)."""
        req = execution_pb2.ExecutionRelaunchRequest(
            id=_wf_id(ref), name=name, overwrite_cache=overwrite_cache
        )
        return self._create("RelaunchExecution", ref, lambda: self._rpc.relaunch_execution(req))

    def version_request(
        self, ref: ExecutionRef, *, version: str, name: str, overwrite_cache: bool
    ) -> VersionRequest:
        """GetExecution, GetExecutionData and GetLaunchPlan: the CreateExecution request that
        relaunches `ref` on its launch plan at `version` (`AdminRelaunch.version_request` says
        what it copies). NotFoundError when the launch plan version does not exist."""
        get = execution_pb2.WorkflowExecutionGetRequest(id=_wf_id(ref))
        original = self._call("GetExecution", str(ref), lambda: self._rpc.get_execution(get))
        data_req = execution_pb2.WorkflowExecutionGetDataRequest(id=_wf_id(ref))
        data = self._call(
            "GetExecutionData", str(ref), lambda: self._rpc.get_execution_data(data_req)
        )
        input_texts("GetExecutionData", str(ref), data)  # raises when the inputs are withheld
        lp = identifier_pb2.Identifier()
        lp.CopyFrom(original.spec.launch_plan)
        lp.version = version
        self._call(  # the version must exist before anything is sent
            "GetLaunchPlan",
            f"{lp.project}:{lp.domain}:{lp.name}:{version}",
            lambda: self._rpc.get_launch_plan(common_pb2.ObjectGetRequest(id=lp)),
        )
        o = original.spec
        spec = execution_pb2.ExecutionSpec(
            launch_plan=lp,
            metadata=execution_pb2.ExecutionMetadata(
                mode=execution_pb2.ExecutionMetadata.RELAUNCH, reference_execution=original.id
            ),
            labels=o.labels,
            annotations=o.annotations,
            security_context=o.security_context,
            raw_output_data_config=o.raw_output_data_config,
            overwrite_cache=overwrite_cache,
        )
        request = execution_pb2.ExecutionCreateRequest(
            project=ref.project, domain=ref.domain, name=name, spec=spec, inputs=data.full_inputs
        )
        return VersionRequest(
            original=ref,
            name=name,
            launch_plan=(lp.project, lp.domain, lp.name, lp.version),
            data=json_format.MessageToDict(request, preserving_proto_field_name=True),
            payload=request.SerializeToString(),
        )

    def create_execution(self, ref: ExecutionRef, request: VersionRequest) -> Created:
        """CreateExecution of a `version_request`."""
        req = execution_pb2.ExecutionCreateRequest.FromString(request.payload)
        return self._create("CreateExecution", ref, lambda: self._rpc.create_execution(req))

    # -- re-running only what was lost ---------------------------------------------------------
    def workflow_graph(self, wf: TaskId) -> WorkflowGraph:
        """GetWorkflow: the workflow version's top-level nodes, their order and bindings."""
        closure = self._get_by_id("GetWorkflow", identifier_pb2.WORKFLOW, wf).closure
        return graph_of(wf, closure.compiled_workflow)

    def node_data(self, ref: ExecutionRef, node_id: str) -> NodeData:
        """GetNodeExecutionData: the node's recorded inputs and outputs (None: none recorded).
        A SourceError when Admin withholds either (above its inline size limit)."""
        target = f"{ref}/{node_id}"
        req = node_execution_pb2.NodeExecutionGetDataRequest(id=_node_id(ref, node_id))
        data = self._call(
            "GetNodeExecutionData", target, lambda: self._rpc.get_node_execution_data(req)
        )
        input_texts("GetNodeExecutionData", target, data)  # raises when the inputs are withheld
        outputs = None
        if data.full_outputs.literals:
            outputs = literals_of(data.full_outputs)
        elif data.outputs.bytes > 0:
            raise SourceError(
                "admin",
                f"GetNodeExecutionData: outputs ({data.outputs.bytes} bytes) are larger than "
                "Admin returns inline",
                target=target,
            )
        return NodeData(literals_of(data.full_inputs), outputs)

    def execution_outputs(self, ref: ExecutionRef) -> Literals:
        """GetExecutionData `full_outputs` (a single-task execution's are its node's)."""
        req = execution_pb2.WorkflowExecutionGetDataRequest(id=_wf_id(ref))
        data = self._call("GetExecutionData", str(ref), lambda: self._rpc.get_execution_data(req))
        if not data.full_outputs.literals and data.outputs.bytes > 0:
            raise SourceError(
                "admin",
                f"GetExecutionData: outputs ({data.outputs.bytes} bytes) are larger than Admin "
                "returns inline",
                target=str(ref),
            )
        return literals_of(data.full_outputs)

    def create_rerun(self, request: RerunRequest) -> Created:
        """CreateExecution whose launch plan is the TASK identifier (flyteadmin
        `launchSingleTaskExecution`), mode MANUAL — never RECOVERED, which flyteadmin turns into
        a recovery — with `reference_execution` naming the original and the inputs given."""
        from flyteidl.core import literals_pb2

        ref = request.original
        inputs = literals_pb2.LiteralMap(
            literals={
                k: literals_pb2.Literal.FromString(v) for k, v in request.inputs.payload.items()
            }
        )
        spec = execution_pb2.ExecutionSpec(
            launch_plan=_ident(identifier_pb2.TASK, request.task),
            metadata=execution_pb2.ExecutionMetadata(
                mode=execution_pb2.ExecutionMetadata.MANUAL, reference_execution=_wf_id(ref)
            ),
            labels=common_pb2.Labels(values=rerun_labels(ref, request.node)),
            overwrite_cache=request.overwrite_cache,
        )
        req = execution_pb2.ExecutionCreateRequest(
            project=ref.project, domain=ref.domain, name=request.name, spec=spec, inputs=inputs
        )
        return self._create("CreateExecution", ref, lambda: self._rpc.create_execution(req))
