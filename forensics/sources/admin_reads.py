"""Flyte Admin's reads over the transport (`admin_transport.py`): executions, attempts, the
sweep's plans, task templates (cached for the client's life), inputs, task resources and the
relaunch lookups. Plain records in and out (`admin_types.py`); no protobuf here.

What each question costs in Admin calls: docs/performance.md ("Admin calls per question").
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from forensics.errors import FailureKind, NotFoundError, SourceError
from forensics.evidence.flyte_names import generated_name, unique_node_id
from forensics.model import AttemptRecord, AttemptRef, ExecutionRecord, ExecutionRef
from forensics.sources.admin_closures import NodePlan
from forensics.sources.admin_filters import (
    DEFAULT_EXECUTION_SORT,
    EXECUTION_MODES,
    admin_filter,
    any_state,
    created_since,
    join_filters,
)
from forensics.sources.admin_types import (
    TERMINAL_TASK_PHASES,
    DynamicWorkflow,
    NodeRecord,
    Reruns,
    SkippedNode,
    SweptAttempts,
    TaskFacts,
    TaskId,
    TaskRun,
    TaskTemplate,
    WorkflowFacts,
)

if TYPE_CHECKING:
    from forensics.sources.admin_transport import AdminTransport
    from forensics.sources.admin_types import Literals, NodeData, TaskResources, WorkflowGraph

log = logging.getLogger("forensics.sources.admin")

T = TypeVar("T")

# A workflow version whose closure could not be read is asked again after this many seconds.
PLAN_RETRY_AFTER = 60.0


class AdminReads:
    """The reads the scan, `examine`, the timeline and the relauncher make of Admin."""

    _transport: AdminTransport

    def _init_reads(self) -> None:
        self._lock = threading.Lock()
        self._task_cache: dict[TaskId, TaskTemplate | None] = {}
        self._key_locks: dict[object, threading.Lock] = {}
        # The sweep's plans: per workflow version, per launch plan, per dynamic parent.
        self._plans: dict[TaskId, NodePlan] = {}
        self._lp_workflows: dict[TaskId, TaskId] = {}
        self._dynamic: dict[tuple[ExecutionRef, str], DynamicWorkflow] = {}
        self.plan_fallbacks = 0  # executions / dynamic parents listed whole: no closure
        self._plan_failed: dict[object, tuple[float, str, FailureKind]] = {}  # when, why, what

    def _key_lock(self, key: object) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    # -- executions ----------------------------------------------------------------------------
    def get_execution(self, ref: ExecutionRef) -> ExecutionRecord:
        """One execution; `NotFoundError` after a single round trip when Admin does not know it."""
        return self._transport.execution(ref)

    def list_executions(
        self,
        project: str,
        domain: str,
        *,
        filters: str | Sequence[Any] | None = None,
        sort_by: str | None = DEFAULT_EXECUTION_SORT,
        page_size: int = 100,
    ) -> Iterator[ExecutionRecord]:
        """Executions of a project/domain matching flyteadmin `filters`, every page, each once
        (a page is read when the iterator reaches it; a failed page raises from `next`).

        Admin adds its implicit `state = ACTIVE` filter unless `filters` names `state`.
        """
        pages = self.list_execution_pages(
            project, domain, filters=filters, sort_by=sort_by, page_size=page_size
        )
        for page in pages:
            yield from page

    def list_execution_pages(
        self,
        project: str,
        domain: str,
        *,
        filters: str | Sequence[Any] | None = None,
        sort_by: str | None = DEFAULT_EXECUTION_SORT,
        page_size: int = 100,
    ) -> Iterator[list[ExecutionRecord]]:
        """`list_executions` one page per `next` (its one call sent inside it), each execution
        once: a caller bounding Admin calls in flight holds its slot around each `next`."""
        if page_size <= 0:
            raise ValueError("page_size must be positive (flyteadmin rejects limit 0)")
        rendered = join_filters(filters)
        seen: set[ExecutionRef] = set()
        for page in self._transport.executions(project, domain, rendered, sort_by, page_size):
            fresh = []
            for record in page:
                if record.ref not in seen:  # rows inserted mid-scan shift offsets: dedupe by id
                    seen.add(record.ref)
                    fresh.append(record)
            yield fresh

    def get_inputs(self, ref: ExecutionRef) -> dict[str, str]:
        """Execution inputs (GetExecutionData `full_inputs`) as text: strings as they are,
        numbers/bools/times rendered, blob and dataset literals as their URI, generic structs as
        JSON; collections, maps and offloaded literals are left out."""
        return self._transport.execution_inputs(ref)

    def get_node_inputs(
        self, ref: AttemptRef, *, array_node: str | None = None, array_index: int | None = None
    ) -> dict[str, str]:
        """The inputs of the attempt's own node (GetNodeExecutionData `full_inputs`), as text
        like `get_inputs`: a `@dynamic` sweep passes each trial its own (docs/upstream.md,
        "Dynamic sweeps"; the execution's inputs hold only the parent's).

        For an array subtask (`array_node` given, `ref.node_id` its unique id) the array node's
        inputs are read and each collection reduced to the subtask's element, as propeller's
        `constructLiteralMap` does (`array_index`; non-collection inputs stay whole). A bound
        collection input (the same list for every subtask) is indistinguishable here and would be
        indexed too; checkpoint locations are strings, so this does not arise for them.
        """
        index = array_index if array_node is not None else None
        return self._transport.node_inputs(ref, array_node or ref.node_id, index)

    def list_projects(self) -> list[str]:
        """Ids of every project Admin knows."""
        return list(self.project_domains())

    def project_domains(self) -> dict[str, tuple[str, ...]]:
        """Every project Admin knows with the domains ListProjects lists for it
        (flyteadmin `project_manager.go`; deployments rename them: `dev`, `prod`, ...)."""
        out: dict[str, tuple[str, ...]] = {}
        for project, domains in self._transport.projects():
            out.setdefault(project, domains)
        return out

    # -- attempts ------------------------------------------------------------------------------
    def list_attempts(self, ref: ExecutionRef) -> list[AttemptRecord]:
        """Every task attempt of every node, nested nodes included (depth first, Admin's order)."""
        out: list[AttemptRecord] = []
        self._collect(ref, None, out)
        return out

    def sweep_attempts(self, ex: ExecutionRecord) -> SweptAttempts:
        """The attempts of the nodes whose task can be elastic (by the compiled closure of the
        execution's workflow, `admin_closures`), and the task nodes passed over: the caller lists
        those the evidence points at with `node_attempts`. Without a readable closure every node
        is listed.

        A workflow whose nodes all run elastic tasks (`NodePlan.direct`) costs one
        ListTaskExecutions per node and no ListNodeExecutions. A task execution that spawned
        nodes (`is_parent`: a `@dynamic` node's children) means the nodes are listed after all;
        so does an attempt whose task is not elastic (the closure does not describe this
        execution)."""
        out: list[AttemptRecord] = []
        skipped: list[SkippedNode] = []
        plan = self.workflow_plan(ex)
        if plan is not None and plan.direct is not None:
            runs = self._transport.direct_runs(ex.ref, plan.direct, self._template_of(ex.ref))
            if runs is not None:
                out = [run.attempt for run in runs]
                if all(a.is_elastic for a in out):
                    return SweptAttempts(out, (), True, direct=True)
                out = []
        self._collect(ex.ref, None, out, plan=plan, skipped=skipped)
        return SweptAttempts(out, tuple(skipped), plan is not None)

    def node_attempts(self, ref: ExecutionRef, nodes: Sequence[SkippedNode]) -> list[AttemptRecord]:
        """The attempts of nodes a sweep passed over (one ListTaskExecutions each)."""
        out: list[AttemptRecord] = []
        for node in nodes:
            self._node_attempts(ref, node.node, node.parent, node.dynamic, out)
        return out

    def _collect(
        self,
        ref: ExecutionRef,
        parent: str | None,
        out: list[AttemptRecord],
        dynamic: str | None = None,
        plan: NodePlan | None = None,
        skipped: list[SkippedNode] | None = None,
    ) -> None:
        """The attempts under `parent`; `dynamic` is the nearest dynamic ancestor, whose compiled
        workflow holds the templates of every task below it, sub-workflows included. With
        `skipped` (a sweep), only the nodes `plan` lists are listed; the others are kept in
        `skipped` (docs/performance.md)."""
        for node in list(self._transport.node_executions(ref, parent)):
            if node.start_or_end:
                continue
            spec = node.spec_node_id or node.node_id
            if node.may_have_tasks:
                # A dynamic parent is listed whatever its task: its attempts tell a trial of its
                # children from the re-run that superseded it (`detect.rerun_of`).
                if skipped is None or plan is None or plan.lists(spec) or node.is_dynamic:
                    self._node_attempts(ref, node, parent, dynamic, out)
                else:
                    skipped.append(SkippedNode(node, parent, dynamic))
            if node.is_parent_node:
                inner = self._children_plan(ref, node, plan) if skipped is not None else None
                nearest = node.node_id if node.is_dynamic else dynamic
                self._collect(ref, node.node_id, out, nearest, inner, skipped)

    def _node_attempts(
        self,
        ref: ExecutionRef,
        node: NodeRecord,
        parent: str | None,
        dynamic: str | None,
        out: list[AttemptRecord],
    ) -> None:
        """The attempts of one node; its task's template is looked up in its nearest dynamic
        ancestor's compiled workflow when Admin has no such task registered."""
        template_of = self._template_of(ref, dynamic)
        for run in self._transport.task_runs(ref, node.node_id, node, template_of, parent):
            own = run.attempt
            tpl = template_of(own.task_id) if own.task_id else None
            subtasks = subtask_records(own, node, run, tpl.type if tpl else "")
            if subtasks:
                # The array's own attempt stays (show lists it); its subtasks' pods
                # belong to the subtasks, which are judged one by one (docs/verdicts.md).
                own = dataclasses.replace(own, pods=run.own_pods)
            out.append(own)
            out.extend(subtasks)

    def get_attempt(self, ref: AttemptRef) -> AttemptRecord:
        """One attempt (GetNodeExecution + ListTaskExecutions); `NotFoundError` if Admin lacks it.

        The parent of a nested node is not on its node execution, so an unregistered dynamic
        task has no template fallback here (`task_type_version` None); `list_attempts` has one.
        """
        node = self._transport.node_execution(ref)
        runs = self._transport.task_runs(
            ref.execution, ref.node_id, node, self._template_of(ref.execution)
        )
        for run in runs:
            if run.attempt.ref.attempt == ref.attempt:
                return run.attempt
        raise NotFoundError("admin", "no such task attempt", target=str(ref))

    def with_node(self, att: AttemptRecord) -> AttemptRecord:
        """An attempt the sweep listed without its node execution (`node_read` False) with what
        that holds: the node's checkpoint location and phase (one GetNodeExecution)."""
        if att.node_read:
            return att
        node = self._transport.node_execution(att.ref)
        return dataclasses.replace(
            att, checkpoint_uri=node.checkpoint_uri or None, node_phase=node.phase, node_read=True
        )

    # -- templates -----------------------------------------------------------------------------
    def _template_of(
        self, ref: ExecutionRef, parent: str | None = None
    ) -> Callable[[TaskId], TaskTemplate | None]:
        return lambda task_id: self._task_template(ref, task_id, parent)

    def _task_template(
        self, ref: ExecutionRef, task_id: TaskId, parent: str | None
    ) -> TaskTemplate | None:
        """A task's template: GetTask once per task id for the client's life; for an
        unregistered task under a dynamic parent, the parent's compiled workflow."""
        if not task_id[2]:
            return None
        with self._key_lock(task_id):
            if task_id not in self._task_cache:
                try:
                    self._task_cache[task_id] = self._transport.task_template(task_id)
                except NotFoundError:
                    self._task_cache[task_id] = None  # dynamic tasks need not be registered
            found = self._task_cache[task_id]
        if found is None and parent is not None:
            found = self._dynamic_workflow(ref, parent).templates.get(task_id)
        return found

    def _dynamic_workflow(self, ref: ExecutionRef, parent: str) -> DynamicWorkflow:
        """A dynamic parent's compiled workflow (GetNodeExecutionData once per parent)."""
        key = (ref, parent)
        with self._key_lock(("dynamic", key)):
            if key not in self._dynamic:
                self._dynamic[key] = self._transport.dynamic_workflow(ref, parent)
            return self._dynamic[key]

    def _children_plan(
        self, ref: ExecutionRef, node: NodeRecord, plan: NodePlan | None
    ) -> NodePlan | None:
        """The plan of a parent node's children: a dynamic node's from its compiled workflow
        (GetNodeExecutionData, once per dynamic parent), a sub-workflow's or branch's from the
        parent's plan; None (list them all) when it cannot be read."""
        if node.is_dynamic:
            try:
                return self._dynamic_workflow(ref, node.node_id).plan
            except SourceError as e:
                log.warning(
                    "%s/%s: dynamic workflow unreadable, listing every node: %s",
                    ref,
                    node.node_id,
                    e.cause,
                )
                with self._lock:
                    self.plan_fallbacks += 1
                return None
        if plan is None:
            return None
        return plan.children(node.spec_node_id or node.node_id)

    def workflow_plan(self, ex: ExecutionRecord) -> NodePlan | None:
        """The plan of the execution's workflow (GetWorkflow once per workflow version for the
        client's life; GetLaunchPlan first when Admin's record names no workflow). None when it
        cannot be read: the caller lists every node (counted in `plan_fallbacks`). A version
        whose closure could not be read is not asked again for `PLAN_RETRY_AFTER` seconds:
        executions of it are listed whole meanwhile, without paying the retries once each."""
        try:
            wf = ex.workflow
            if wf is None and ex.launch_plan is not None:
                wf = self._remembered(
                    ("launch_plan", ex.launch_plan),
                    self._lp_workflows,
                    ex.launch_plan,
                    self._transport.launch_plan_workflow,
                )
            if wf is None:
                raise SourceError("admin", "the execution names no workflow and no launch plan")
            return self._remembered(
                ("workflow", wf), self._plans, wf, self._transport.workflow_plan
            )
        except SourceError as e:
            with self._lock:
                self.plan_fallbacks += 1
                first = self.plan_fallbacks == 1
            if first:  # one line, not one per execution
                log.warning(
                    "%s: workflow closure unreadable, listing every node: %s", ex.ref, e.cause
                )
            return None

    def _remembered(
        self, lock_key: object, cache: dict[Any, T], key: Any, read: Callable[[Any], T]
    ) -> T:
        """`read(key)` once for the client's life; a failure is raised again, without asking,
        for `PLAN_RETRY_AFTER` seconds."""
        with self._key_lock(lock_key):
            if key in cache:
                return cache[key]
            failed = self._plan_failed.get(lock_key)
            if failed is not None and time.monotonic() - failed[0] < PLAN_RETRY_AFTER:
                raise SourceError("admin", failed[1], kind=failed[2])
            try:
                cache[key] = read(key)
            except SourceError as e:
                self._plan_failed[lock_key] = (time.monotonic(), e.cause, e.kind)
                raise
            return cache[key]

    # -- facts for cost and relaunch -----------------------------------------------------------
    def workflow_facts(self, launch_plan: TaskId) -> WorkflowFacts:
        """GetLaunchPlan, then GetWorkflow of its workflow: the compiled tasks and nodes."""
        return self._transport.workflow_facts(launch_plan)

    def task_facts(self, task_id: TaskId) -> TaskFacts:
        """One registered task's template facts (GetTask); NotFoundError if not registered."""
        return self._transport.task_facts(task_id)

    def task_resources(self, task_id: TaskId) -> TaskResources:
        """What one registered task requests (GetTask): pods, GPUs, CPUs (`task_resources.py`);
        NotFoundError if the task is not registered."""
        return self._transport.task_resources(task_id)

    def launch_plan_versions(self, project: str, domain: str, name: str) -> list[str]:
        """Versions of a launch plan, newest first (ListLaunchPlans sorted by created_at)."""
        return list(dict.fromkeys(self._transport.launch_plan_versions(project, domain, name)))

    def workflow_graph(self, workflow: TaskId) -> WorkflowGraph:
        """GetWorkflow: a workflow version's top-level nodes, their order and input bindings."""
        return self._transport.workflow_graph(workflow)

    def node_data(self, ref: ExecutionRef, node_id: str) -> NodeData:
        """GetNodeExecutionData: one node's recorded inputs and outputs."""
        return self._transport.node_data(ref, node_id)

    def execution_outputs(self, ref: ExecutionRef) -> Literals:
        """GetExecutionData: an execution's outputs (a single-task execution's: its task's)."""
        return self._transport.execution_outputs(ref)

    def reruns_of(self, project: str, domain: str, since: datetime) -> Reruns:
        """The RELAUNCH and RECOVERED executions created at or after `since`, in one listing
        (`rerun_filters`, `reruns_from`)."""
        return reruns_from(self.list_executions(project, domain, filters=rerun_filters(since)))

    def relaunches_of(
        self, project: str, domain: str, since: datetime
    ) -> dict[ExecutionRef, ExecutionRef]:
        """Existing relaunches created at or after `since`: original -> its first relaunch."""
        return self.reruns_of(project, domain, since).relaunches


RERUN_MODES = ("RELAUNCH", "RECOVERED")


def rerun_filters(since: datetime) -> list[str]:
    """The filters of the one listing of relaunches and recoveries since `since`: `mode` is a
    filterable executions column holding the enum number (RELAUNCH = 3, RECOVERED = 5); an
    archived relaunch is still a relaunch (flyteadmin lists only active executions unless the
    filters name `state`, `execution_manager.go` addStateFilter)."""
    modes = admin_filter("value_in", "mode", [EXECUTION_MODES[m] for m in RERUN_MODES])
    return [modes, created_since(since), any_state()]


def reruns_from(records: Iterable[ExecutionRecord]) -> Reruns:
    """Original -> first relaunch, and original -> recoveries, from a listing's records; the
    mode and reference are checked again so a server ignoring the filter cannot mislead."""
    relaunches: dict[ExecutionRef, ExecutionRef] = {}
    recoveries: dict[ExecutionRef, tuple[ExecutionRef, ...]] = {}
    for rec in records:
        original = rec.reference_execution
        if original is None:
            continue
        if rec.mode == "RELAUNCH":
            relaunches.setdefault(original, rec.ref)
        elif rec.mode == "RECOVERED":
            recoveries[original] = (*recoveries.get(original, ()), rec.ref)
    return Reruns(relaunches, recoveries)


def subtask_records(
    own: AttemptRecord, node: NodeRecord, run: TaskRun, task_type: str
) -> list[AttemptRecord]:
    """The subtasks of an array (map) node, one attempt record each (judged per subtask:
    docs/verdicts.md; how propeller names and places them: docs/upstream.md, "Array subtasks").

    Admin records no per-subtask times: the array attempt's end (while it runs, its last update)
    bounds each subtask's end from above.
    """
    if not node.is_array or not run.subtasks:
        return []
    execution = own.ref.execution
    array_attempt = _dir_attempt(own.output_dir)
    ended, end_from = own.ended_at, own.end_from
    if ended is None:
        ended, end_from = run.updated_at, "updated_at"
    out = []
    for r in run.subtasks:
        unique = unique_node_id(own.ref.node_id, array_attempt, f"n{r.index}")
        pods = [generated_name([execution.name, unique, r.retry_attempt]), r.external_id]
        sub_dir = sub_unknown = None
        if own.output_dir is not None:
            sub_dir = f"{own.output_dir}{r.index}/{r.retry_attempt}/"
        else:
            sub_unknown = own.outputs_unknown or "Admin records no output location for the array"
        done = r.phase in TERMINAL_TASK_PHASES
        out.append(
            dataclasses.replace(
                own,
                ref=AttemptRef(execution, unique, r.retry_attempt),
                phase=r.phase,
                task_type=task_type,  # the mapped task's (the array's own is `container_array`)
                is_array=False,
                ended_at=ended if done else None,
                end_from=end_from if done else None,
                output_dir=sub_dir,
                outputs_unknown=sub_unknown,
                pods=tuple(dict.fromkeys(p for p in pods if p)),
                checkpoint_uri=None,  # propeller reports no per-subtask checkpoint to Admin
                node_phase=None,
                array_node=own.ref.node_id,
                array_index=r.index,
            )
        )
    return out


def _dir_attempt(directory: str | None) -> int:
    """The attempt number that ends `<node data dir>/<attempt>/` (0 when it cannot be read)."""
    tail = (directory or "").rstrip("/").rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0
