"""What a relaunch plan says about the bug and the cache, read from Admin's task templates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # flytekit is heavy; only the client module imports it
    from forensics.sources.admin_types import TaskFacts, WorkflowFacts


# flytekitplugins-kfpytorch turns SignalException into IgnoreOutputs in every release from
# 1.10.3 through 1.16.31 (docs/upstream.md, "The fix and releases"); the plugin moves with flytekit (same release train).
BUGGY_RUNTIMES = ("1.10.3", "1.16.31")


def _runtime_in_buggy_range(runtime: str | None) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(runtime or "")
    except InvalidVersion:
        return False
    return Version(BUGGY_RUNTIMES[0]) <= v <= Version(BUGGY_RUNTIMES[1])


def _task_words(t: TaskFacts) -> str:
    words = [f"image {t.image or '(none in the template)'}", f"flytekit {t.runtime or '?'}"]
    if t.interruptible:
        words.append("interruptible")
    return ", ".join(words)


def assess_bug(
    lying: Iterable[TaskFacts], facts: WorkflowFacts | None, why_unknown: str | None = None
) -> str:
    """Whether the tasks a relaunch re-runs still carry the bug, from their templates.

    `lying` are the templates of the tasks whose attempts died silently green; `facts` is the
    launch plan version the relaunch runs. The same task version is the same code: it carries
    the bug. A new version with the same image and flytekit: likely. A new image: unknown — a
    task template records flytekit's version (`metadata.runtime`) but not the kfpytorch
    plugin's, so whether the image holds the fix cannot be read from Admin.
    """
    lying = list(lying)
    if not lying:
        return "nothing to compare: no attempt was found lying"
    if facts is None:
        return f"unknown: the launch plan's workflow could not be read ({why_unknown})"
    parts = []
    for old in lying:
        name, version = old.id[2], old.id[3]
        same = facts.tasks.get(old.id)
        if same is not None:
            parts.append(
                f"YES - re-runs {name} version {version} itself, the code that died silently "
                f"green ({_task_words(same)})"
            )
            continue
        new = [t for t in facts.tasks.values() if t.id[2] == name]
        if not new:
            parts.append(
                f"unknown - {name} is not in the workflow of launch plan "
                f"{':'.join(facts.launch_plan[2:])} (launched dynamically or by a child "
                "launch plan): its template cannot be read before it runs"
            )
            continue
        t = new[0]
        if t.image == old.image and t.runtime == old.runtime:
            parts.append(
                f"LIKELY - {name} is version {t.id[3]} now, but in the same image and flytekit "
                f"as the run that died ({_task_words(t)})"
            )
        else:
            parts.append(
                f"unknown - {name} version {t.id[3]} runs {_task_words(t)} (was {old.image}, "
                f"flytekit {old.runtime}); a task template does not record the kfpytorch "
                "plugin's version: check the image with `elastic-audit fix check`"
            )
        if _runtime_in_buggy_range(t.runtime):
            parts[-1] += (
                f"; flytekit {t.runtime} is a release with the bug "
                f"({BUGGY_RUNTIMES[0]}-{BUGGY_RUNTIMES[1]}) unless the plugin was patched"
            )
    return "; ".join(parts)


def describe_cache(facts: WorkflowFacts | None, overwrite: bool, why_unknown: str | None) -> str:
    """The cacheable nodes a relaunch recomputes (overwrite_cache) or reuses (opt-out)."""
    if facts is None:
        return f"unknown: the launch plan's workflow could not be read ({why_unknown})"
    nodes = []
    for node_id, task_id in facts.task_nodes:
        t = facts.tasks.get(task_id)
        if t is not None and t.cacheable:
            nodes.append(f"{node_id} ({t.id[2]}, cache version {t.cache_version or '-'})")
    if overwrite:
        text = (
            f"overwrite_cache recomputes {len(nodes)} cacheable node(s) and overwrites their "
            f"shared cache entries: {', '.join(nodes)}"
            if nodes
            else "overwrite_cache costs nothing here: no node of the workflow is cacheable"
        )
        text += " (the silent node itself was never cached: tasks without outputs are not)"
    else:
        text = (
            f"--no-overwrite-cache: {len(nodes)} cacheable node(s) reuse their cached results: "
            f"{', '.join(nodes)}"
            if nodes
            else "--no-overwrite-cache: no node of the workflow is cacheable"
        )
    if facts.launch_plan_nodes:
        text += (
            "; child launch plans of nodes "
            + ", ".join(facts.launch_plan_nodes)
            + " have caches of their own, not read here"
        )
    return text
