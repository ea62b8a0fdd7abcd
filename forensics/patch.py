"""The bundled kfpytorch plugin fix: the patch, applying it to a source tree, checking trees and envs."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from forensics.errors import UsageError

PATCH_NAME = "0001-kfpytorch-signal-recoverable.patch"
PLUGIN_DIR = "plugins/flytekit-kf-pytorch"
TASK_PY = "flytekitplugins/kfpytorch/task.py"
PLUGIN_DIST = "flytekitplugins-kfpytorch"
TEST_FILE = "tests/test_elastic_task.py"
PROBE_TIMEOUT_S = 300.0

_DATA = "data"
_PATCH_RESOURCE = "kfpytorch-signal.patch"
_PROBE_RESOURCE = "kfpytorch_probe.py"
_SILENT_OUTCOMES = ("ignore-outputs", "returned", "clean-exit")

# ----------------------------------------------------------------------------- the patch


def load_patch() -> str:
    """The bundled patch (git format, paths as in the flytekit repository)."""
    return _data_text(_PATCH_RESOURCE)


def _data_text(name: str) -> str:
    # importlib.resources works for editable installs, wheels and zipped packages alike.
    return resources.files("forensics").joinpath(_DATA, name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Hunk:
    """One `@@` block: the lines it expects (`old`) and the lines it leaves (`new`)."""

    old_start: int
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    """The hunks of one file; `path` is relative to the flytekit repository root."""

    path: str
    hunks: tuple[Hunk, ...]


_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_patch(text: str) -> tuple[FilePatch, ...]:
    """Parse a git-format patch of modified text files (no renames, modes or binaries)."""
    lines = text.splitlines(keepends=True)
    files: list[FilePatch] = []
    i = 0
    path: str | None = None
    hunks: list[Hunk] = []
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            if path is not None:
                files.append(FilePatch(path, tuple(hunks)))
            path, hunks = None, []
        elif line.startswith("+++ "):
            target = line[4:].rstrip("\n")
            if not target.startswith("b/"):
                raise ValueError(f"unsupported patch target {target!r}")
            path = target[2:]
        elif line.startswith("@@"):
            m = _HUNK_HEADER.match(line)
            if m is None or path is None:
                raise ValueError(f"malformed hunk header {line!r}")
            old_count = int(m.group(2) or 1)
            new_count = int(m.group(4) or 1)
            old: list[str] = []
            new: list[str] = []
            # Counts drive the parse, so a removed line that starts with "-- " is never taken
            # for the signature separator that ends a format-patch mail.
            while len(old) < old_count or len(new) < new_count:
                i += 1
                body = lines[i]
                tag, content = body[:1], body[1:]
                if body.startswith("\\"):  # "\ No newline at end of file": not in our patch
                    raise ValueError("patches without a final newline are not supported")
                if tag in (" ", "\n"):
                    content = content if tag == " " else "\n"
                    old.append(content)
                    new.append(content)
                elif tag == "-":
                    old.append(content)
                elif tag == "+":
                    new.append(content)
                else:
                    raise ValueError(f"malformed hunk line {body!r}")
            hunks.append(Hunk(int(m.group(1)), tuple(old), tuple(new)))
        i += 1
    if path is not None:
        files.append(FilePatch(path, tuple(hunks)))
    if not files:
        raise ValueError("the patch modifies no file")
    return tuple(files)


# ----------------------------------------------------------------------------- targets

_KIND_TEXT = {
    "checkout": "flytekit checkout",
    "plugin": "flytekit-kf-pytorch plugin directory",
    "sdist": "unpacked flytekitplugins-kfpytorch sdist",
}


@dataclass(frozen=True)
class Target:
    """A source tree the patch can apply to: a flytekit checkout, the plugin dir, or an sdist.

    `prefix` is what the patch's repository paths lose to become paths under `root`.
    """

    root: Path
    kind: str
    prefix: str
    version: str | None = None

    @property
    def description(self) -> str:
        version = f" {self.version}" if self.version else ""
        return f"{_KIND_TEXT[self.kind]}{version}"

    def path_of(self, repo_path: str) -> Path:
        if not repo_path.startswith(self.prefix):
            raise UsageError(f"the patch touches {repo_path}, outside the plugin directory")
        return self.root / repo_path[len(self.prefix) :]


def _sdist_version(root: Path) -> str | None:
    """Version from PKG-INFO when it names the kfpytorch plugin, else None."""
    info = root / "PKG-INFO"
    if not info.is_file():
        return None
    fields: dict[str, str] = {}
    for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            break  # the description body follows the headers
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    if re.sub(r"[-_.]+", "-", fields.get("name", "")).lower() != PLUGIN_DIST:
        return None
    return fields.get("version")


def _setup_py_version(root: Path) -> str | None:
    setup = root / "setup.py"
    if not setup.is_file():
        return None
    m = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", setup.read_text(), re.MULTILINE)
    return m.group(1) if m else None


def _classify(root: Path) -> Target | None:
    if (root / PLUGIN_DIR / TASK_PY).is_file():
        return Target(root, "checkout", "", None)
    if not (root / TASK_PY).is_file():
        return None
    prefix = PLUGIN_DIR + "/"
    version = _sdist_version(root)
    if version is not None:
        return Target(root, "sdist", prefix, version)
    if (root / "setup.py").is_file() or (root / "pyproject.toml").is_file():
        return Target(root, "plugin", prefix, _setup_py_version(root))
    return None


def detect_target(directory: Path | str) -> Target:
    """Which kind of source tree `directory` is; UsageError (exit 2) when it is none of them."""
    root = Path(directory)
    if not root.exists():
        raise UsageError(f"{root}: no such directory")
    if not root.is_dir():
        hint = " (unpack the sdist first: tar xzf FILE)" if root.name.endswith(".tar.gz") else ""
        raise UsageError(f"{root}: not a directory{hint}")
    target = _classify(root)
    if target is not None:
        return target
    if (root / TASK_PY).is_file():
        raise UsageError(
            f"{root} holds flytekitplugins/kfpytorch but no setup.py, pyproject.toml or PKG-INFO: "
            "it looks like an installed package; patch a source tree and reinstall from it"
        )
    nested = sorted(p for p in root.iterdir() if p.is_dir() and _classify(p) is not None)
    hint = f"; did you mean {nested[0]}?" if len(nested) == 1 else ""
    raise UsageError(
        f"{root} is not a flytekit checkout, the flytekit-kf-pytorch plugin directory or an "
        f"unpacked flytekitplugins-kfpytorch sdist (no {PLUGIN_DIR}/{TASK_PY} or {TASK_PY}){hint}"
    )


# ----------------------------------------------------------------------------- applying


@dataclass(frozen=True)
class ApplyResult:
    """What `apply` found or did: applied, already-applied, would-apply or cannot-apply.

    `adapted` says how the fix was fitted to the release (see forensics.rewrite.Era).
    """

    target: Target
    status: str
    files: tuple[str, ...]
    reason: str
    adapted: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 2 if self.status == "cannot-apply" else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "target": str(self.target.root),
            "kind": self.target.kind,
            "version": self.target.version,
            "files": list(self.files),
            "reason": self.reason,
            "adapted": list(self.adapted),
        }


@dataclass
class _FilePlan:
    path: Path
    original: str
    patched: str = ""


def _read_exact(path: Path) -> str | None:
    """The file's text as it is on disk (newline="": no silent CRLF conversion); None: not UTF-8."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return fh.read()
    except UnicodeDecodeError:
        return None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def apply(directory: Path | str, check_only: bool = False) -> ApplyResult:
    """Fix the plugin in a checkout, plugin dir or unpacked sdist of any affected release.

    By syntax (forensics.rewrite): the `except SignalException` handler must be exactly the known
    bug, wherever it sits, and the fix written is the one the release's flytekit can run. The
    plugin's test module gets the signal tests fitted to the same release. Idempotent; with
    `check_only` nothing is written; otherwise all files are written or none.
    """
    # libcst costs ~1 s to import: only `apply` needs it, not `fix check` or pin-bump.
    from forensics.rewrite import RewriteError, rewrite_task, rewrite_tests

    target = detect_target(directory)
    task_path = target.path_of(f"{PLUGIN_DIR}/{TASK_PY}")
    tests_path = target.path_of(f"{PLUGIN_DIR}/{TEST_FILE}")
    rel = tuple(str(p.relative_to(target.root)) for p in (task_path, tests_path))
    if not tests_path.is_file():
        return ApplyResult(target, "cannot-apply", rel, f"{rel[1]} is missing")
    task_text, tests_text = _read_exact(task_path), _read_exact(tests_path)
    if task_text is None or tests_text is None:
        bad = rel[0] if task_text is None else rel[1]
        return ApplyResult(target, "cannot-apply", rel, f"{bad} is not UTF-8 text")
    try:
        task = rewrite_task(task_text, analyze_task_source(task_text)[0] == "fixed")
        tests_state, tests_new = rewrite_tests(tests_text, task.era)
    except RewriteError as e:
        return ApplyResult(target, "cannot-apply", rel, f"the source differs from the fix: {e}")
    adapted = task.era.notes()
    if (task.state, tests_state) == ("applied", "applied"):
        return ApplyResult(target, "already-applied", rel, "the fix is already in place", adapted)
    if task.state != tests_state:
        done = rel[0] if task.state == "applied" else rel[1]
        return ApplyResult(
            target,
            "cannot-apply",
            rel,
            f"the fix is partly applied ({done} only); restore the files first",
            adapted,
        )
    if check_only:
        return ApplyResult(target, "would-apply", rel, "the fix applies", adapted)
    plans = [
        _FilePlan(task_path, task_text, task.text),
        _FilePlan(tests_path, tests_text, tests_new),
    ]
    try:
        _write_all(plans)
    except OSError as e:
        raise UsageError(f"cannot write in {target.root}: {e.strerror}; nothing written") from None
    return ApplyResult(target, "applied", rel, "patched", adapted)


def _write_all(plans: list[_FilePlan]) -> None:
    staged: list[tuple[_FilePlan, str]] = []
    try:
        for plan in plans:
            fd, tmp = tempfile.mkstemp(prefix=f".{plan.path.name}.", dir=plan.path.parent)
            staged.append((plan, tmp))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(plan.patched or "")
            shutil.copymode(plan.path, tmp)
        done: list[_FilePlan] = []
        try:
            for plan, tmp in staged:
                os.replace(tmp, plan.path)
                done.append(plan)
        except OSError:
            for plan in done:
                plan.path.write_text(plan.original, encoding="utf-8", newline="")
            raise
    finally:
        for _, tmp in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)


# ----------------------------------------------------------------------------- checking


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
    def exit_code(self) -> int:
        return {"fixed": 0, "vulnerable": 1}.get(self.status, 2)

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


def _walk_same_scope(nodes: list[ast.stmt]):  # noqa: ANN202
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
    cls = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef) and n.name == "PytorchElasticFunctionTask"
        ),
        None,
    )
    if cls is None:
        return "unknown", "no class PytorchElasticFunctionTask in task.py"
    signal_names = _aliases(tree, "SignalException")
    names = (_aliases(tree, "IgnoreOutputs"), _aliases(tree, "FlyteRecoverableException"))
    handlers: list[tuple[str, ast.ExceptHandler]] = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(method):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                types = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
                if any((_dotted(t) or (None, ""))[1] in signal_names for t in types):
                    handlers.append((method.name, node))
    if not handlers:
        return "unknown", (
            "PytorchElasticFunctionTask has no `except SignalException` handler: "
            "neither the known bug nor the fix"
        )
    fixed: list[str] = []
    for method, handler in handlers:
        where = f"PytorchElasticFunctionTask.{method} (line {handler.lineno})"
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
        fixed.append(f"the `except SignalException` handler in {where} raises {raised}")
    return "fixed", "; ".join(fixed) + ", never IgnoreOutputs"


def source_has_fix(task_py_text: str) -> bool:
    """True when the plugin's task.py carries the fix (see `analyze_task_source`)."""
    return analyze_task_source(task_py_text)[0] == "fixed"


def find_task_py(directory: Path | str) -> Path | None:
    """The plugin's task.py in a checkout, plugin dir or archive (also one directory down)."""
    root = Path(directory)
    for base in [root, *sorted(p for p in root.iterdir() if p.is_dir())]:
        for rel in (f"{PLUGIN_DIR}/{TASK_PY}", TASK_PY):
            if (base / rel).is_file():
                return base / rel
    return None


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
    version = _sdist_version(task_py.parents[2]) or _setup_py_version(task_py.parents[2])
    return CheckResult(status, reason, "source", path=str(task_py), plugin_version=version)


def _resolve_python(python: str | None) -> str:
    if python is None:
        return sys.executable
    found = shutil.which(python)
    if found is None:
        raise UsageError(f"--python {python}: no such executable")
    # Absolute: the probe runs in a temporary directory, where `./python` would name nothing.
    return str(Path(found).absolute())


def check_environment(python: str | None = None) -> CheckResult:
    """Run the probe in `python` (default: this interpreter): does its plugin turn a death signal
    into a clean exit? No cluster and no GPU: `elastic_launch` is replaced by one that raises a
    real torch `SignalException(SIGTERM)`, the way the agent raises it on pod preemption.
    """
    exe = _resolve_python(python)
    probe = _data_text(_PROBE_RESOURCE)
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
            raise UsageError(f"--python {exe}: cannot run it ({e.strerror})") from None
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
