"""Is a plugin safe? A static check of its task.py, or the probe run in an interpreter.

`fix check` and `pin-bump --require-fix` use it; the verdicts are explained in docs/commands.md
(fix) and docs/verdicts.md (the bug).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.errors import UsageError
from forensics.params import Param, ParamError
from forensics.plugin_fix.layout import (
    PLUGIN_DIR,
    TASK_PY,
    data_text,
    find_task_py,
    sdist_version,
    setup_py_version,
)

PROBE_TIMEOUT_S = 300.0

_PROBE_RESOURCE = "kfpytorch_probe.py"
_SILENT_OUTCOMES = ("ignore-outputs", "returned", "clean-exit")


@dataclass(frozen=True)
class Scenario:
    """One way the probe drove the plugin, and what the agent's death signal turned into."""

    name: str
    outcome: str
    detail: str

    @property
    def silent(self) -> bool:
        return self.outcome in _SILENT_OUTCOMES


@dataclass(frozen=True)
class CheckResult:
    """Is a plugin safe? `fixed`, `vulnerable`, `not-installed` or `unknown`, and why.

    `mode` is `source` (static check of a tree) or `environment` (probe run in an interpreter).
    """

    status: str
    reason: str
    mode: str
    path: str | None = None
    python: str | None = None
    plugin_version: str | None = None
    flytekit_version: str | None = None
    torch_version: str | None = None
    scenarios: tuple[Scenario, ...] = ()

    @property
    def detail(self) -> str:
        return self.reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "mode": self.mode,
            "path": self.path,
            "python": self.python,
            "plugin_version": self.plugin_version,
            "flytekit_version": self.flytekit_version,
            "torch_version": self.torch_version,
            "scenarios": [
                {"name": s.name, "outcome": s.outcome, "detail": s.detail} for s in self.scenarios
            ],
        }


_EXIT_CALLS = {("sys", "exit"), ("os", "_exit"), (None, "exit"), (None, "quit")}


def _dotted(node: ast.expr) -> tuple[str | None, str] | None:
    """`(module, name)` of `name` or `module.name` (the last two parts of a dotted name)."""
    if isinstance(node, ast.Name):
        return None, node.id
    if isinstance(node, ast.Attribute):
        inner = node.value
        owner = inner.id if isinstance(inner, ast.Name) else getattr(inner, "attr", None)
        return owner, node.attr
    return None


def _aliases(tree: ast.Module, name: str) -> set[str]:
    names = {name}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.name == name and a.asname)
    return names


def _is_zero(node: ast.expr | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value in (0, None, False))


def _walk_same_scope(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node under `nodes` that runs in this scope (not in nested functions or classes)."""
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            ):
                stack.append(child)


@dataclass(frozen=True)
class _Exit:
    """A statement that ends the handler: a raise, or an exit call.

    `kind`: `silent` (the bug: a clean exit without outputs), `recoverable` (the fix's
    FlyteRecoverableException), `exit` (a non-zero exit without an error file, the fix's
    multi-node path) or `fatal` (any other raise: the attempt fails for good, never retried).
    """

    what: str
    kind: str


def _exit_code_kind(code: ast.expr | None) -> str:
    return "silent" if _is_zero(code) else "exit"


def _exit_of(node: ast.AST, ignore_outputs: set[str], recoverable: set[str]) -> _Exit | None:
    if isinstance(node, ast.Raise):
        if node.exc is None:
            return _Exit("a bare re-raise of the SignalException", "fatal")
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        named = _dotted(exc)
        name = named[1] if named else ast.unparse(exc)
        if name in ignore_outputs:
            return _Exit("IgnoreOutputs", "silent")
        if name in recoverable:
            return _Exit(name, "recoverable")
        if name == "SystemExit":
            code = node.exc.args[0] if isinstance(node.exc, ast.Call) and node.exc.args else None
            return _Exit(f"SystemExit({ast.unparse(code) if code else ''})", _exit_code_kind(code))
        return _Exit(name, "fatal")
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        named = _dotted(node.value.func)
        if named in _EXIT_CALLS:
            code = node.value.args[0] if node.value.args else None
            call = f"{'.'.join(p for p in named if p)}({ast.unparse(code) if code else ''})"
            return _Exit(call, _exit_code_kind(code))
    return None


def _always_exits(body: list[ast.stmt], names: tuple[set[str], set[str]]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.If):
        return _always_exits(last.body, names) and _always_exits(last.orelse, names)
    return _exit_of(last, *names) is not None


def _elastic_class(tree: ast.Module) -> ast.ClassDef | None:
    return next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef) and n.name == "PytorchElasticFunctionTask"
        ),
        None,
    )


def _catches(handler: ast.ExceptHandler, signal_names: set[str]) -> bool:
    """Whether an `except` clause names SignalException (alone or in a tuple)."""
    if handler.type is None:
        return False
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((_dotted(t) or (None, ""))[1] in signal_names for t in types)


def _signal_handlers(
    cls: ast.ClassDef, signal_names: set[str]
) -> list[tuple[str, ast.ExceptHandler]]:
    """(method name, handler) of every `except SignalException` in the class's methods."""
    return [
        (method.name, node)
        for method in cls.body
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(method)
        if isinstance(node, ast.ExceptHandler) and _catches(node, signal_names)
    ]


def _handler_verdict(
    where: str, handler: ast.ExceptHandler, names: tuple[set[str], set[str]]
) -> tuple[str, str]:
    """(`fixed`|`vulnerable`|`unknown`, reason) for one `except SignalException` handler."""
    exits = [e for n in _walk_same_scope(handler.body) if (e := _exit_of(n, *names))]
    silent = [e.what for e in exits if e.kind == "silent"]
    if silent:
        return "vulnerable", (
            f"the `except SignalException` handler in {where} ends in {', '.join(silent)}: "
            "a preempted attempt exits cleanly without outputs"
        )
    fatal = sorted({e.what for e in exits if e.kind == "fatal"})
    if fatal:
        # Not silent, but not the fix either: flytekit turns any other exception into a
        # non-recoverable user error, so every preemption fails the run for good.
        return "vulnerable", (
            f"the `except SignalException` handler in {where} raises {', '.join(fatal)}: "
            "a preempted attempt fails non-recoverably and is never retried (the fix raises "
            "FlyteRecoverableException or exits 128+signal)"
        )
    if not _always_exits(handler.body, names):
        if not exits:
            return "vulnerable", (
                f"the `except SignalException` handler in {where} swallows the signal"
            )
        return "unknown", f"the `except SignalException` handler in {where} may fall through"
    raised = ", ".join(sorted({e.what for e in exits}))
    return "fixed", f"the `except SignalException` handler in {where} raises {raised}"


def analyze_task_source(text: str) -> tuple[str, str]:
    """Static verdict on the plugin's task.py: (`fixed`|`vulnerable`|`unknown`, reason).

    Looks, with `ast` (comments and strings cannot fool it), at every `except SignalException`
    handler in `PytorchElasticFunctionTask`: vulnerable when one raises `IgnoreOutputs`, ends
    the process with status 0, swallows the signal, or raises anything but the recoverable
    error (a bare `raise` included: a non-recoverable failure is never retried); fixed when each
    one always raises `FlyteRecoverableException` or exits non-zero without an error file.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return "unknown", f"task.py does not parse: {e.msg} (line {e.lineno})"
    cls = _elastic_class(tree)
    if cls is None:
        return "unknown", "no class PytorchElasticFunctionTask in task.py"
    names = (_aliases(tree, "IgnoreOutputs"), _aliases(tree, "FlyteRecoverableException"))
    handlers = _signal_handlers(cls, _aliases(tree, "SignalException"))
    if not handlers:
        return "unknown", (
            "PytorchElasticFunctionTask has no `except SignalException` handler: "
            "neither the known bug nor the fix"
        )
    fixed: list[str] = []
    for method, handler in handlers:
        where = f"PytorchElasticFunctionTask.{method} (line {handler.lineno})"
        status, reason = _handler_verdict(where, handler, names)
        if status != "fixed":
            return status, reason
        fixed.append(reason)
    return "fixed", "; ".join(fixed) + ", never IgnoreOutputs"


def source_has_fix(task_py_text: str) -> bool:
    """True when the plugin's task.py carries the fix (see `analyze_task_source`)."""
    return analyze_task_source(task_py_text)[0] == "fixed"


def check_source(dir: Path) -> CheckResult:
    """Static check of a checkout or unpacked archive (the check behind `pin-bump --require-fix`)."""
    root = Path(dir)
    if not root.is_dir():
        raise UsageError(f"{root}: no such directory")
    task_py = find_task_py(root)
    if task_py is None:
        return CheckResult(
            "unknown", f"no {PLUGIN_DIR}/{TASK_PY} or {TASK_PY} under {root}", "source"
        )
    status, reason = analyze_task_source(task_py.read_text(encoding="utf-8", errors="replace"))
    version = sdist_version(task_py.parents[2]) or setup_py_version(task_py.parents[2])
    return CheckResult(status, reason, "source", path=str(task_py), plugin_version=version)


def _resolve_python(python: str | None) -> str:
    if python is None:
        return sys.executable
    found = shutil.which(python)
    if found is None:
        raise ParamError(Param("python"), f" {python}: no such executable")
    # Absolute: the probe runs in a temporary directory, where `./python` would name nothing.
    return str(Path(found).absolute())


def check_environment(python: str | None = None) -> CheckResult:
    """Run the probe in `python` (default: this interpreter): does its plugin turn a death signal
    into a clean exit? No cluster and no GPU: `elastic_launch` is replaced by one that raises a
    real torch `SignalException(SIGTERM)`, the way the agent raises it on pod preemption.
    """
    exe = _resolve_python(python)
    probe = data_text(_PROBE_RESOURCE)
    with tempfile.TemporaryDirectory(prefix="elastic-audit-probe-") as tmp:
        out = Path(tmp) / "result.json"
        try:
            proc = subprocess.run(
                [exe, "-c", probe, str(out)],
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return CheckResult(
                "unknown",
                f"the probe did not finish in {PROBE_TIMEOUT_S:.0f}s",
                "environment",
                python=exe,
            )
        except OSError as e:
            raise ParamError(Param("python"), f" {exe}: cannot run it ({e.strerror})") from None
        if not out.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return CheckResult(
                "unknown",
                f"the probe failed (exit {proc.returncode}): {tail[0]}",
                "environment",
                python=exe,
            )
        data = json.loads(out.read_text(encoding="utf-8"))
    return CheckResult(
        status=data["status"],
        reason=data["reason"],
        mode="environment",
        path=data.get("plugin_file"),
        python=data.get("python") or exe,
        plugin_version=data.get("plugin_version"),
        flytekit_version=data.get("flytekit_version"),
        torch_version=data.get("torch_version"),
        scenarios=tuple(
            Scenario(s["name"], s["outcome"], s["detail"]) for s in data.get("scenarios", [])
        ),
    )
