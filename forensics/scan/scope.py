"""What a scan covers (projects, domains) and the LogQL queries that read its death signals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from forensics.arguments import names_of
from forensics.config import Settings
from forensics.evidence.flyte_names import namespace_for
from forensics.evidence.logs import SIGNAL_LINE_REGEX
from forensics.sources.logql import build_query, label_filter, matcher, regex_escape, selector


@dataclass(frozen=True)
class ScanScope:
    """Which projects and domains a scan covers (empty: every project, the configured domains)."""

    projects: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A library caller's `projects="gs1"` is one project, never its letters.
        object.__setattr__(self, "projects", names_of(self.projects, param="projects"))
        object.__setattr__(self, "domains", names_of(self.domains, param="domains"))

    def covers(self, project: str, domain: str) -> bool:
        """Whether an attempt of `project`/`domain` is in scope."""
        return (not self.projects or project in self.projects) and (
            not self.domains or domain in self.domains
        )


def task_selector(
    settings: Settings, scope: ScanScope, domains: Sequence[str] | None = None
) -> str:
    """The configured task selector, narrowed to the scope's namespaces when one is given.

    `domains`: the scope's projects' domains (from Admin unless configured; default: the
    configured ones). Values are RE2-escaped and LogQL-quoted, so a project name can never
    inject LogQL.
    """
    sel = settings.loki.task_selector.strip()
    if not scope.projects and not scope.domains:
        return sel
    domains = scope.domains or domains or settings.flyte.domains
    template = settings.flyte.namespace_template
    alternatives = []
    for d in domains:
        if scope.projects:
            alternatives += [regex_escape(namespace_for(p, d, template)) for p in scope.projects]
        else:
            head, _, tail = template.partition("{project}")
            lit = [regex_escape(part.replace("{domain}", d)) for part in (head, tail)]
            alternatives.append(lit[0] + ".+" + lit[1])
    extra = matcher(settings.loki.namespace_label, "=~", "(" + "|".join(alternatives) + ")")
    return sel[:-1].rstrip().rstrip(",") + ", " + extra + "}"


def signal_query(settings: Settings, scope: ScanScope, domains: Sequence[str] | None = None) -> str:
    """The LogQL query that finds death-signal lines: the task selector (see `task_selector`)
    and one line filter, `|~ SIGNAL_LINE_REGEX`, which matches every line `parse_signal` accepts
    (a superset)."""
    return build_query(task_selector(settings, scope, domains), [("|~", SIGNAL_LINE_REGEX)])


# A PyTorchJob's pods are its replicas, `<job>-worker-N` / `<job>-master-N`: the attempt
# records the job's name (docs/upstream.md, "Pod names, namespaces, checkpoints").
_REPLICA = "(-(worker|master)-[0-9]+)?"


def pod_query(settings: Settings, namespace: str, pods: set[str], regex: str) -> str:
    """A Loki query for the lines of some pods (PyTorchJob replicas included) matching `regex`.

    The pod is matched by a label filter after the line filter, not in the stream selector: it
    then finds the pod whether its name is an index label or structured metadata (OTLP ingestion
    keeps `k8s.pod.name` there; docs/upstream.md), as the scan's own reading does.
    """
    lk = settings.loki
    pods_re = "(" + "|".join(regex_escape(p) for p in sorted(pods)) + ")"
    sel = selector([(lk.namespace_label, "=", namespace)])
    return (
        build_query(sel, [("|~", regex)])
        + " "
        + label_filter(lk.pod_label, "=~", pods_re + _REPLICA)
    )
