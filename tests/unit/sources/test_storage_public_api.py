"""The product reaches S3 through boto3's and botocore's public API only, so that a user's
`pip install -U botocore boto3` cannot break it: documented modules, no `_private` name of
theirs, and handlers on documented events only (docs/performance.md, "S3 through the public
API"). Each module under forensics/ (but the sandbox's emulator) is read as an AST; a violation
is reported as file:line and what it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import ROOT

PACKAGE = ROOT / "forensics"

# botocore modules with a documented public API (botocore's and boto3's reference and guides).
PUBLIC_MODULES = {
    "boto3",
    "boto3.session",
    "botocore",
    "botocore.client",
    "botocore.config",
    "botocore.exceptions",
    "botocore.session",
}
# Events documented for handlers: botocore's `before-send.<service>.<operation>`
# (docs/source/topics/events.rst) and boto3's `provide-client-params.<service>.<operation>`
# (docs/source/guide/events.rst).
DOCUMENTED_EVENTS = ("before-send.", "provide-client-params.")
REGISTER = {"register", "register_first", "register_last"}


def _aws_modules() -> list[tuple[Path, ast.Module]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "sandbox" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        names = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        } | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if any(n.split(".")[0] in ("boto3", "botocore") for n in names):
            found.append((path, tree))
    return found


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _event_prefix(arg: ast.expr) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value)
    return None


def _imports(where: str, tree: ast.Module) -> tuple[list[str], set[str]]:
    """Imports of boto3/botocore modules that are not public, and the names they bind."""
    out, names = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] not in ("boto3", "botocore"):
                continue
            if node.module not in PUBLIC_MODULES:
                out.append(f"{where}:{node.lineno}: imports {node.module}")
            for alias in node.names:
                names.add(alias.asname or alias.name)
                full = f"{node.module}.{alias.name}"
                submodule = node.module in ("boto3", "botocore") and alias.name.islower()
                if alias.name.startswith("_") or (submodule and full not in PUBLIC_MODULES):
                    out.append(f"{where}:{node.lineno}: imports {full}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ("boto3", "botocore"):
                    continue
                if alias.name not in PUBLIC_MODULES:
                    out.append(f"{where}:{node.lineno}: imports {alias.name}")
                names.add((alias.asname or alias.name).split(".")[0])
    return out, names


def _private(node: ast.AST, aws_names: set[str]) -> str | None:
    """The private name `node` reads from a boto3/botocore object, if any."""
    if isinstance(node, ast.Attribute):
        name, base = node.attr, node
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "setattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
    ):
        name, base = str(node.args[1].value), node.args[0]
    else:
        return None
    if name.startswith("_") and not name.startswith("__") and _root(base) in aws_names:
        return name
    return None


def _violations(path: Path, tree: ast.Module) -> list[str]:
    where = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name)
    out, aws_names = _imports(where, tree)
    for node in ast.walk(tree):
        name = _private(node, aws_names)
        if name:
            out.append(f"{where}:{node.lineno}: private attribute .{name}")  # type: ignore[attr-defined]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in REGISTER | {"unregister", "register_component"}
            and node.args
        ):
            event = _event_prefix(node.args[0])
            if node.func.attr not in REGISTER or not (event or "").startswith(DOCUMENTED_EVENTS):
                out.append(f"{where}:{node.lineno}: .{node.func.attr}({event!r}, ...)")
    return out


def test_the_product_uses_only_the_public_api_of_boto3_and_botocore():
    modules = _aws_modules()
    assert any(p.name == "storage.py" for p, _ in modules)  # the check reads the S3 client
    violations = [v for path, tree in modules for v in _violations(path, tree)]
    assert violations == []


def test_the_check_finds_what_the_s3_client_once_did(tmp_path):
    # The tricks this client used before issue 44, each one caught.
    old = tmp_path / "forensics" / "old.py"
    old.parent.mkdir()
    old.write_text(
        "from botocore import handlers\n"
        "from botocore.parsers import RestXMLParser\n"
        "from botocore.utils import parse_timestamp\n"
        "_STRING = RestXMLParser._handle_string\n"
        '_CHECK = getattr(handlers, "_looks_like_special_case_error", None)\n'
        "def wire(session, client):\n"
        '    session.unregister("before-parse.s3.*", handlers._handle_200_error)\n'
        '    session.register_component("response_parser_factory", None)\n'
        '    client.meta.events.register("before-parse.s3.HeadObject", print)\n'
        '    client.meta.events.register(f"before-send.s3.{1}", print)\n'
    )
    found = _violations(old, ast.parse(old.read_text()))
    relative = lambda v: v.split(": ", 1)[1]  # noqa: E731
    assert sorted(map(relative, found)) == sorted(
        [
            "imports botocore.handlers",
            "imports botocore.parsers",
            "imports botocore.utils",
            "private attribute ._handle_string",
            "private attribute ._handle_200_error",
            "private attribute ._looks_like_special_case_error",
            ".unregister('before-parse.s3.*', ...)",
            ".register_component('response_parser_factory', ...)",
            ".register('before-parse.s3.HeadObject', ...)",
        ]
    )
