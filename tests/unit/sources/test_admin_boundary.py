"""Only the Admin transport speaks gRPC: flytekit, flyteidl, grpc and protobuf are imported by
`admin_transport.py` and the helpers only it imports, and by nothing the scan, `show` or the
relauncher import (issue 44: sources in our own types; a client is what imports flytekit)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import forensics

SOURCES = Path(forensics.__file__).parent / "sources"
TRANSPORT = {"admin_transport.py", "admin_channel.py", "admin_records.py", "task_resources.py"}
WIRE = ("grpc", "flyteidl", "flytekit", "google.protobuf")


def _imports(path: Path) -> set[str]:
    """The modules `path` imports outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text())
    checking = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in node.body
        for n in ast.walk(child)
    }
    out = set()
    for node in ast.walk(tree):
        if id(node) in checking:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_only_the_transport_imports_the_wire():
    speaking = {
        path.name
        for path in SOURCES.glob("*.py")
        if any(m == w or m.startswith(w + ".") for m in _imports(path) for w in WIRE)
    }
    assert speaking == TRANSPORT


def test_only_the_client_imports_the_transport():
    importers = {
        path.name
        for path in SOURCES.glob("*.py")
        if {f"forensics.sources.{m[:-3]}" for m in TRANSPORT} & _imports(path)
    }
    assert importers <= TRANSPORT | {"admin.py"}


@pytest.mark.e2e
def test_the_scan_show_and_relaunch_import_no_grpc():
    code = (
        "import sys, forensics.scan.run, forensics.scan.examine, forensics.timeline, "
        "forensics.relaunch.relauncher, forensics.sources.admin, forensics.sources.loki; "
        f"print(sorted(m for m in {WIRE!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
