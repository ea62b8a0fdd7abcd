"""The emulator apart from the product (docs/architecture.md).

- No module of forensics/ outside forensics/sandbox/ imports the sandbox, except `demo`
  (forensics/cli/demo.py), which starts it.
- The sandbox uses the product only through pure shared parts (SHARED): model types, time
  parsing, LogQL quoting, Flyte's generated names.
- The parsers the in-process fakes share with it (PURE_PARSERS) start no server and hold no state.

Every import counts, at module level or in a function, relative or absolute, and a module
named to importlib; a violation is reported as file:line and what it imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "forensics"
SANDBOX = "forensics.sandbox"
STARTS_THE_SANDBOX = {"forensics/cli/demo.py"}
SHARED = {
    "forensics.model",
    "forensics.timeutil",
    "forensics.sources.logql",
    "forensics.evidence.flyte_names",
}
PURE_PARSERS = ("admin_query", "loki_logql", "loki_params")
# What a module that holds state or talks to the network imports.
STATEFUL = {"socket", "socketserver", "http", "threading", "subprocess", "concurrent", "asyncio"}


def _module_name(path: Path) -> list[str]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported(path: Path, module: list[str] | None = None) -> list[tuple[int, str]]:
    """(line, dotted name) of everything `path` imports; `from a import b` gives a and a.b.
    Relative imports resolve from `module` (default: the module `path` is in the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = module or _module_name(path)
    package = here if path.name == "__init__.py" else here[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            out.append((node.lineno, source))
            out += [(node.lineno, f"{source}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                if isinstance(arg.value, str):
                    out.append((node.lineno, arg.value))
    return out


def _within(name: str, modules: set[str] | str) -> bool:
    names = {modules} if isinstance(modules, str) else modules
    return any(name == m or name.startswith(m + ".") for m in names)


def _product_files() -> list[Path]:
    sandbox = PACKAGE / "sandbox"
    return [p for p in sorted(PACKAGE.rglob("*.py")) if sandbox not in p.parents]


def sandbox_imports(path: Path, module: list[str] | None = None) -> list[str]:
    found = imported(path, module)
    return [f"{line}: imports {name}" for line, name in found if _within(name, SANDBOX)]


def product_imports(path: Path, module: list[str] | None = None) -> list[str]:
    """What a sandbox module imports from the product beyond the shared pure parts."""
    return [
        f"{line}: imports {name}"
        for line, name in imported(path, module)
        if _within(name, "forensics")
        and not _within(name, SANDBOX)
        and not _within(name, SHARED)
        and name != "forensics"  # `from forensics import x` is judged by its `forensics.x`
    ]


def test_no_product_module_but_demo_imports_the_sandbox():
    bad = []
    for path in _product_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel not in STARTS_THE_SANDBOX:
            bad += [f"{rel}:{v}" for v in sandbox_imports(path)]
    assert not bad, "the product imports the emulator:\n" + "\n".join(bad)
    assert all(sandbox_imports(ROOT / rel) for rel in STARTS_THE_SANDBOX)  # still starts it


def test_the_sandbox_uses_only_the_shared_pure_parts_of_the_product():
    bad = []
    for path in sorted((PACKAGE / "sandbox").glob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        bad += [f"{rel}:{v}" for v in product_imports(path)]
    assert not bad, f"the sandbox imports the product beyond {sorted(SHARED)}:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", PURE_PARSERS)
def test_the_parsers_the_fakes_share_start_no_server_and_hold_no_state(name):
    path = PACKAGE / "sandbox" / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        f"{line}: imports {n}"
        for line, n in imported(path)
        if n.split(".")[0] in STATEFUL
        or (_within(n, SANDBOX) and n.split(".")[2] not in PURE_PARSERS)
    ]
    found += [f"{n.lineno}: global" for n in ast.walk(tree) if isinstance(n, ast.Global)]
    assert not found, f"{name} is no pure parser:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from forensics.sandbox.stack import sandbox",
        "import forensics.sandbox.incident as incident",
        "from forensics import sandbox",
        "def f():\n    from forensics.sandbox import live",
        "from ..sandbox import stack",
        "import importlib\nimportlib.import_module('forensics.sandbox.stack')",
    ],
)
def test_each_way_of_importing_the_sandbox_is_caught(tmp_path, source):
    path = tmp_path / "m.py"
    path.write_text(source + "\n")
    assert sandbox_imports(path, ["forensics", "cli", "m"]), source


def test_what_only_looks_like_the_sandbox_is_not_caught(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import forensics.sandboxes\nfrom forensics.cli import sandbox_help\n")
    assert sandbox_imports(path, ["forensics", "cli", "m"]) == []


@pytest.mark.parametrize(
    "source, caught",
    [
        ("from forensics.relaunch import relaunch_name", True),
        ("from forensics import errors", True),
        ("from forensics.model import UTC", False),
        ("from forensics.evidence.flyte_names import generated_name", False),
    ],
)
def test_the_sandbox_rule_tells_shared_parts_from_the_rest(tmp_path, source, caught):
    path = tmp_path / "m.py"
    path.write_text(source + "\n")
    assert bool(product_imports(path, ["forensics", "sandbox", "m"])) is caught
