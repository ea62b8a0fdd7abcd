"""Flyte's generated names: pod and node ids propeller derives, and project/domain namespaces."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_DOMAINS",
    "GENERATED_NAME_MAX_LENGTH",
    "UNIQUE_NODE_ID_MAX_LENGTH",
    "PodName",
    "generated_name",
    "hash_id",
    "namespace_for",
    "namespace_to_project_domain",
    "parse_pod_name",
    "pod_name_for",
    "unique_node_id",
]

# Generated names (flyteplugins encoding.FixedLengthUniqueIDForParts)
# ---------------------------------------------------------------------------------------------

GENERATED_NAME_MAX_LENGTH = 50  # propeller's task.IDMaxLength
UNIQUE_NODE_ID_MAX_LENGTH = 20  # propeller's nodes/common maxUniqueIDLength

_B32_STD = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_FLYTE = b"abcdefghijklmnopqrstuvwxyz123456"
_B32_TABLE = bytes.maketrans(_B32_STD, _B32_FLYTE)
_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def hash_id(value: str) -> str:
    """`"f"` + unpadded base32 (alphabet `a-z1-6`) of FNV-32a over the UTF-8 bytes: 8 chars."""
    h = _FNV32_OFFSET
    for byte in value.encode("utf-8"):
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    encoded = base64.b32encode(h.to_bytes(4, "big")).translate(_B32_TABLE)
    return "f" + encoded.decode("ascii").rstrip("=")


def generated_name(parts: Sequence[str | int], max_length: int = GENERATED_NAME_MAX_LENGTH) -> str:
    """A faithful port of flyteplugins' `encoding.FixedLengthUniqueIDForParts` (FNV-32a).

    Parts are joined with `-` (no separator while the result is still empty, as upstream); a
    result longer than `max_length` bytes is replaced by `hash_id` of it. Raises ValueError
    where upstream returns an error: when even the 8-char hash exceeds `max_length`.
    """
    joined = ""
    for i, part in enumerate(parts):
        if i > 0 and joined:
            joined += "-"
        joined += str(part)
    if len(joined.encode("utf-8")) <= max_length:
        return joined
    hashed = hash_id(joined)
    if len(hashed) > max_length:
        raise ValueError(f"max length {max_length} is too small for an encoded id ({hashed})")
    return hashed


def unique_node_id(parent_unique_id: str | None, parent_attempt: int | None, node_id: str) -> str:
    """Admin's node id for a node (propeller `GenerateUniqueID`); top-level: both parents None."""
    parent_attempt_part = "" if parent_attempt is None else str(parent_attempt)
    return generated_name(
        [parent_unique_id or "", parent_attempt_part, node_id], UNIQUE_NODE_ID_MAX_LENGTH
    )


def pod_name_for(
    execution: str, node_id: str, attempt: int, max_length: int = GENERATED_NAME_MAX_LENGTH
) -> str:
    """The pod (or PyTorchJob) name propeller generates for one task attempt."""
    return generated_name([execution, node_id, attempt], max_length)


# ---------------------------------------------------------------------------------------------
# Pod names -> attempts
# ---------------------------------------------------------------------------------------------

_EXEC_RE = re.compile(r"[a-z][a-z0-9-]{0,62}")  # flyteadmin: ^[a-z][a-z\-0-9]*$, <= 63 chars
_GENERATED_EXEC_RE = re.compile(r"[a-z][a-z0-9]{19}")  # flyteadmin's generated names
_NODE_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_ATTEMPT_RE = re.compile(r"0|[1-9][0-9]{0,9}")
_HASHED_RE = re.compile(r"f[a-z1-6]{7}")
_ID = r"(?:[a-z]*n[0-9]+|f[a-z1-6]{7})"  # flytekit's n0 / dn0, or a hashed unique id
_CANONICAL_NODE_RE = re.compile(rf"{_ID}(?:-(?:0|[1-9][0-9]*)-{_ID})*")
_STRUCTURED_NODE_RE = re.compile(r"[a-z0-9]+(?:-(?:0|[1-9][0-9]*)-[a-z0-9]+)*")
_REPLICA_RE = re.compile(r"(?P<job>.+)-(?P<role>worker|master)-(?P<index>0|[1-9][0-9]{0,5})")
_DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")


@dataclass(frozen=True)
class PodName:
    """What a pod name says about its task attempt.

    `candidates` are the (execution, node_id, attempt) splits consistent with Flyte's naming,
    most likely first; each regenerates the name exactly (`pod_name_for`, plus the replica
    suffix for splits of `generated`). `replica` is the PyTorchJob `(role, index)` suffix when the
    name has one: candidates assuming it come first, then any reading of the whole name as a plain
    task pod. `hashed` says the generated name is the `f` + base32 form, which cannot be split:
    resolve it through Admin's task-execution pod names.
    """

    pod: str
    generated: str  # the Flyte generated name (the PyTorchJob name when `replica` is set)
    candidates: tuple[tuple[str, str, int], ...]
    replica: tuple[str, int] | None
    hashed: bool


def _split_rank(split: tuple[str, str, int]) -> tuple[bool, bool, bool, int]:
    execution, node, _ = split
    return (
        not _GENERATED_EXEC_RE.fullmatch(execution),
        not _CANONICAL_NODE_RE.fullmatch(node),
        not _STRUCTURED_NODE_RE.fullmatch(node),
        len(node),
    )


def _plain_splits(name: str, max_length: int) -> list[tuple[str, str, int]]:
    """Every (execution, node, attempt) whose generated name is exactly `name`, best first."""
    if len(name.encode("utf-8")) > max_length:
        return []
    rest, dash, attempt = name.rpartition("-")
    if not dash or not _ATTEMPT_RE.fullmatch(attempt):
        return []
    splits: list[tuple[str, str, int]] = []
    for i, ch in enumerate(rest):
        if ch != "-":
            continue
        execution, node = rest[:i], rest[i + 1 :]
        if (
            _EXEC_RE.fullmatch(execution)
            and len(node) <= UNIQUE_NODE_ID_MAX_LENGTH
            and _NODE_RE.fullmatch(node)
        ):
            splits.append((execution, node, int(attempt)))
    return sorted(splits, key=_split_rank)


def parse_pod_name(pod: str, *, max_length: int = GENERATED_NAME_MAX_LENGTH) -> PodName | None:
    """Split a pod name into its possible task attempts; None if it cannot be a Flyte task pod.

    Forms: `<exec>-<unique node id>-<attempt>` (node ids of nested nodes contain dashes, e.g.
    `n0-0-dn1`; user-named executions may too, so several splits can fit), PyTorchJob replicas
    `<generated>-worker-N` / `-master-N`, and hashed names `f` + 7 base32 chars.
    """
    if len(pod) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(pod):
        return None
    plain = _plain_splits(pod, max_length)
    replica_m = _REPLICA_RE.fullmatch(pod)
    if replica_m:
        job = replica_m.group("job")
        job_splits = _plain_splits(job, max_length)
        job_hashed = bool(_HASHED_RE.fullmatch(job))
        if job_splits or job_hashed:
            candidates = tuple(dict.fromkeys([*job_splits, *plain]))
            replica = (replica_m.group("role"), int(replica_m.group("index")))
            return PodName(pod, job, candidates, replica, job_hashed)
    hashed = bool(_HASHED_RE.fullmatch(pod))
    if not plain and not hashed:
        return None
    return PodName(pod, pod, tuple(plain), None, hashed)


# ---------------------------------------------------------------------------------------------
# Namespaces
# ---------------------------------------------------------------------------------------------

DEFAULT_DOMAINS: tuple[str, ...] = ("development", "staging", "production")

# flyteadmin's own placeholders (`namespaceutils.GetNamespaceName`) are accepted as well, so a
# template copied from its config works unchanged. OSS Flyte has no org: it renders empty.
_ADMIN_PLACEHOLDERS = (("{{ project }}", "{project}"), ("{{ domain }}", "{domain}"))
_ORG_PLACEHOLDERS = ("{{ org }}", "{org}")


def _normalise_template(template: str) -> str:
    for admin, ours in _ADMIN_PLACEHOLDERS:
        template = template.replace(admin, ours)
    for org in _ORG_PLACEHOLDERS:
        template = template.replace(org, "")
    return template


def namespace_for(project: str, domain: str, template: str = "{project}-{domain}") -> str:
    """The Kubernetes namespace flyteadmin maps a project and domain to.

    `[flyte] namespace_template` is a str.format template (config.py checks its fields), and
    is filled as one: a value is never read as a placeholder, so a project named `{domain}`
    (no valid Flyte name, but the library takes any string) stays literal."""
    return _normalise_template(template).format(project=project, domain=domain)


def namespace_to_project_domain(
    ns: str,
    template: str = "{project}-{domain}",
    domains: Sequence[str] = DEFAULT_DOMAINS,
) -> tuple[str, str] | None:
    """The (project, domain) a namespace belongs to, or None when none or several fit.

    Domains must be one of `domains`; projects may contain dashes. When more than one pair
    renders to `ns` (e.g. domains `dev` and `x-dev` for `a-x-dev`) the answer is None: a
    namespace is never attributed to a project by guesswork.
    """
    tpl = _normalise_template(template)
    if "{project}" not in tpl or "{domain}" not in tpl or len(ns) > 253:
        return None
    found: set[tuple[str, str]] = set()
    for domain in dict.fromkeys(d for d in domains if d):
        pattern = _template_regex(tpl.replace("{domain}", domain))
        m = pattern.fullmatch(ns)
        if m and m.group("project"):
            found.add((m.group("project"), domain))
    return found.pop() if len(found) == 1 else None


def _template_regex(template: str) -> re.Pattern[str]:
    pieces = template.split("{project}")
    # Repeated {project} placeholders must all hold the same project.
    body = "(?P<project>.+?)".join([re.escape(pieces[0]), re.escape(pieces[1])])
    for piece in pieces[2:]:
        body += "(?P=project)" + re.escape(piece)
    return re.compile(body, re.DOTALL)
