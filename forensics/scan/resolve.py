"""From a signalled pod to its attempt, and from a namespace to its Flyte project and domain."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from forensics.config import Settings
from forensics.detect import Cleared
from forensics.errors import FailureKind, SourceError
from forensics.evidence.flyte_names import (
    namespace_for,
    namespace_to_project_domain,
    parse_pod_name,
)
from forensics.model import AttemptRecord, ExecutionRecord, ExecutionRef
from forensics.params import Param, ParamError
from forensics.scan.lookups import Lookups
from forensics.scan.scope import ScanScope
from forensics.sources.admin_filters import attempts_may_end_during
from forensics.sources.interfaces import AdminReader


@dataclass(frozen=True)
class Unowned:
    """A signalled pod that is evidently Flyte's but that no attempt owns, and why
    (docs/verdicts.md, "From pod to attempt")."""

    reason: str


@dataclass(frozen=True)
class OutOfScope:
    """A signalled pod of a project or domain the scan's scope leaves out: not counted."""


Resolved = tuple[ExecutionRecord, AttemptRecord]

T = TypeVar("T")


def pod_keys(pod: str) -> tuple[str, ...]:
    """The names an attempt may record a pod under: its own, and a PyTorchJob replica's job name."""
    parsed = parse_pod_name(pod)
    return tuple(dict.fromkeys([pod, parsed.generated if parsed else pod]))


def owner_of(owners: Mapping[str, T], pod: str) -> T | None:
    """Whose pod `pod` is among `owners` (pod name -> owner), replicas found by their job."""
    return next((owners[k] for k in pod_keys(pod) if k in owners), None)


class Projects:
    """Each project's domains: `[flyte] domains` when configured, else Admin's
    (docs/configuration.md). `domains_of` is None when ListProjects failed (`error` says why):
    the configured domains stand in."""

    def __init__(self, settings: Settings) -> None:
        self._flyte = settings.flyte
        self.domains_of: dict[str, tuple[str, ...]] | None = None
        self.error: str | None = None
        self.failure: FailureKind | None = None  # what the error means

    def load(self, admin: AdminReader, scope: ScanScope, slots: threading.BoundedSemaphore) -> None:
        """One ListProjects; a scope naming a project Admin does not know, or a domain that
        project does not have, is a usage error (flyteadmin answers an unknown domain with an
        empty page, so a typo would read as "coverage complete")."""
        flyte = self._flyte
        self.domains_of, self.error, self.failure = None, None, None
        try:
            with slots:
                listed = admin.project_domains()
        except SourceError as e:
            self.error, self.failure = e.cause, e.kind
            return
        if flyte.domains_configured:
            listed = {p: tuple(flyte.domains) for p in listed}
        projects = {p: d or tuple(flyte.domains) for p, d in listed.items()}
        _check_scope(scope, projects)
        self.domains_of = projects

    def all_domains(self) -> tuple[str, ...]:
        """Every domain of every known project (the configured ones if Admin's are unknown)."""
        if not self.domains_of:
            return tuple(self._flyte.domains)
        return tuple(dict.fromkeys(d for ds in self.domains_of.values() for d in ds))

    def scope_domains(self, scope: ScanScope) -> tuple[str, ...]:
        """The domains the scope's projects have (every known domain without a project scope)."""
        if scope.projects and self.domains_of:
            return tuple(dict.fromkeys(d for p in scope.projects for d in self.domains_of[p]))
        return self.all_domains()

    def project_domain(self, namespace: str) -> tuple[str, str] | None:
        """The (project, domain) whose Flyte namespace `namespace` is, or None."""
        template = self._flyte.namespace_template
        pd = namespace_to_project_domain(namespace, template, self.all_domains())
        if pd is not None and self.domains_of is not None:
            if pd[1] not in self.domains_of.get(pd[0], ()):
                return None  # no such project, or a domain only other projects have
        return pd

    def known_project_of(self, namespace: str) -> str | None:
        """A known project whose namespace `namespace` is in shape, whatever its domain part."""
        template = self._flyte.namespace_template
        for p in sorted(self.domains_of or {}, key=len, reverse=True):
            head, _, tail = namespace_for(p, "\0", template).partition("\0")
            if (
                len(namespace) > len(head) + len(tail)
                and namespace.startswith(head)
                and namespace.endswith(tail)
            ):
                return p
        return None


# The scope's parameters, as errors name them.
PROJECT, DOMAIN = Param("project"), Param("domain")


def _check_scope(scope: ScanScope, projects: dict[str, tuple[str, ...]]) -> None:
    for p in scope.projects:
        if p not in projects:
            known = ", ".join(sorted(projects)) or "none"
            raise ParamError(PROJECT, f" {p!r}: Flyte Admin has no such project (known: {known})")
    for d in scope.domains:
        lacking = [p for p in scope.projects if d not in projects[p]]
        if lacking:
            raise ParamError(
                DOMAIN,
                f" {d!r}: project {lacking[0]!r} has no such domain "
                f"(its domains: {', '.join(projects[lacking[0]])})",
            )
        if not any(d in ds for ds in projects.values()):
            every = dict.fromkeys(x for ds in projects.values() for x in ds)
            raise ParamError(
                DOMAIN, f" {d!r}: no project has such a domain (domains: {', '.join(every)})"
            )


def resolve(
    lookups: Lookups,
    projects: Projects,
    namespace: str,
    pod: str,
    at: datetime,
    scope: ScanScope,
    *,
    swept: Callable[[ExecutionRef], bool] = lambda ref: False,
) -> Resolved | Unowned | Cleared | OutOfScope:
    """The attempt a pod belongs to, or why it is none: a cleared class, `OutOfScope`, or
    `Unowned` for a pod that is evidently Flyte's yet no attempt owns.

    Executions `swept` says the current run has read already are skipped: their attempts were
    matched against every signalled pod when they were read.
    """
    pd = projects.project_domain(namespace)
    if pd is None:
        return Cleared.SIGNAL_NOT_FLYTE_POD
    project, domain = pd
    if not scope.covers(project, domain):
        return OutOfScope()
    parsed = parse_pod_name(pod)
    names = {pod, parsed.generated} if parsed is not None else {pod}
    found = None
    if parsed is not None:
        refs = (ExecutionRef(project, domain, name) for name, _, _ in parsed.candidates)
        found = _by_name(lookups, refs, names, swept)
    # Hashed (or otherwise unparseable) names: look among the executions live at `at`.
    found = found or _among_live(lookups, project, domain, at, names, swept)
    if found is not None:
        return found
    if parsed is not None:
        # A task pod's name in a Flyte namespace that no attempt owns: evidently Flyte's, so a
        # configuration problem to show, not a pod to clear.
        return Unowned(
            f"a task pod's name in {project}/{domain}'s namespace, but no attempt of "
            f"{project}/{domain} owns it (check [flyte] namespace_template and domains)",
        )
    return Cleared.SIGNAL_NOT_FLYTE_POD


def _owning(lookups: Lookups, ex: ExecutionRecord, names: set[str]) -> Resolved | None:
    """The attempt of `ex` that records one of the pod's `names`."""
    for a in lookups.attempts(ex.ref):
        if not names.isdisjoint(a.pods):
            return ex, a
    return None


def _by_name(
    lookups: Lookups,
    refs: Iterable[ExecutionRef],
    names: set[str],
    swept: Callable[[ExecutionRef], bool],
) -> Resolved | None:
    """The attempt among the executions the pod's name may belong to (GetExecution each)."""
    for ref in refs:
        if swept(ref):
            continue
        ex = lookups.execution(ref)
        found = _owning(lookups, ex, names) if ex is not None else None
        if found is not None:
            return found
    return None


def _among_live(
    lookups: Lookups,
    project: str,
    domain: str,
    at: datetime,
    names: set[str],
    swept: Callable[[ExecutionRef], bool],
) -> Resolved | None:
    """The attempt among the executions live at `at`, including those still running with an
    old `updated_at` (flyteadmin moves it only on workflow-level events; see
    `attempts_may_end_during`)."""
    skew = lookups.sources.settings.flyte.clock_skew
    for filters in attempts_may_end_during(at, at + timedelta(seconds=1), skew):
        for ex in lookups.live(project, domain, filters):
            if swept(ex.ref):
                continue
            lookups.remember(ex)
            found = _owning(lookups, ex, names)
            if found is not None:
                return found
    return None
