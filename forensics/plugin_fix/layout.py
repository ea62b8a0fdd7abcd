"""Where the kfpytorch plugin's files are: flytekit's repository, an sdist, this package's data/."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

PLUGIN_DIR = "plugins/flytekit-kf-pytorch"
TASK_PY = "flytekitplugins/kfpytorch/task.py"
PLUGIN_DIST = "flytekitplugins-kfpytorch"
TEST_FILE = "tests/test_elastic_task.py"


def data_text(name: str) -> str:
    """A file bundled in forensics/plugin_fix/data/ (the patch, the probe, the signal tests)."""
    # importlib.resources works for editable installs, wheels and zipped packages alike.
    return (
        resources.files("forensics.plugin_fix").joinpath("data", name).read_text(encoding="utf-8")
    )


def sdist_version(root: Path) -> str | None:
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


def setup_py_version(root: Path) -> str | None:
    """The `__version__` the plugin's setup.py declares, if any."""
    setup = root / "setup.py"
    if not setup.is_file():
        return None
    m = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", setup.read_text(), re.MULTILINE)
    return m.group(1) if m else None


def find_task_py(directory: Path | str) -> Path | None:
    """The plugin's task.py in a checkout, plugin dir or archive (also one directory down)."""
    root = Path(directory)
    for base in [root, *sorted(p for p in root.iterdir() if p.is_dir())]:
        for rel in (f"{PLUGIN_DIR}/{TASK_PY}", TASK_PY):
            if (base / rel).is_file():
                return base / rel
    return None
