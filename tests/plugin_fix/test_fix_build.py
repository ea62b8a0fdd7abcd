"""`elastic-audit fix build VERSION`: a fixed `+elasticaudit.1` wheel, fetched and built with pip."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from support.fix import (
    cache_dir,
    cli_json,
    download_sdist,
    new_venv,
    pip_install,
    run_cli,
    unpack,
)

from forensics.plugin_fix.layout import TASK_PY
from forensics.plugin_fix.patch import apply

pytestmark = pytest.mark.e2e

SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _assert_refused(proc: subprocess.CompletedProcess[str], words: str, out: Path) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr  # one clear line, no traceback
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(
    "version,words",
    [
        ("1.10.2", "does not have the bug"),
        ("1.9.0", "does not have the bug"),
        ("latest", "is not a version"),
        ("1.13.15+mine", "no local label"),
    ],
)
def test_fix_build_refuses_releases_without_the_bug_and_non_versions(
    version: str, words: str, tmp_path: Path
) -> None:
    _assert_refused(
        run_cli("fix", "build", version, "--out", tmp_path / "out"), words, tmp_path / "out"
    )


def _local_index(tmp_path: Path, sdist: Path, version: str, fixed: bool) -> dict[str, str]:
    """pip configured (through its own environment variables) for a private index of one sdist."""
    tree = unpack(sdist, tmp_path / "src")
    if fixed:
        assert apply(tree).status == "applied"
    old = re.search(r'__version__ = "([^"]+)"', (tree / "setup.py").read_text())
    assert old is not None
    for name in ("setup.py", "PKG-INFO"):
        path = tree / name
        path.write_text(path.read_text().replace(old.group(1), version))
    index = tmp_path / "index"
    index.mkdir()
    top = f"flytekitplugins_kfpytorch-{version}"
    with tarfile.open(index / f"{top}.tar.gz", "w:gz") as tar:
        tar.add(tree, arcname=top)
    # Only pip's own configuration (here PIP_FIND_LINKS) can lead `fix build` to this release:
    # no public index has 1.99.0. The index still serves pip's build dependencies (setuptools).
    return {"PIP_FIND_LINKS": f"{index} {os.environ.get('PIP_FIND_LINKS', '')}".strip()}


def test_fix_build_refuses_a_release_that_already_has_the_fix(
    kfpytorch_sdist: Path, tmp_path: Path
) -> None:
    env = _local_index(tmp_path, kfpytorch_sdist, "1.99.0", fixed=True)
    out = tmp_path / "out"
    proc = run_cli("fix", "build", "1.99.0", "--out", out, env=env)
    _assert_refused(proc, "does not have the known bug (fixed:", out)


def test_fix_build_refuses_a_version_the_index_does_not_have(
    kfpytorch_sdist: Path, tmp_path: Path
) -> None:
    env = _local_index(tmp_path, kfpytorch_sdist, "1.99.0", fixed=False)
    out = tmp_path / "out"
    proc = run_cli("fix", "build", "1.99.1", "--out", out, env=env)
    _assert_refused(proc, "1.99.1 is not on the package index pip is configured for", out)


def _venv_with_wheel(wheel: Path, where: Path) -> Path:
    """A fresh venv with the wheel installed by pip; flytekit and torch come from this one's."""
    python = new_venv(where)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # Our site-packages after the venv's own: the venv's wheel wins over the installed stock plugin.
    (Path(purelib) / "zz-elastic-audit-deps.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    pip_install(python, "--no-deps", str(wheel), what=wheel.name)
    return python


@pytest.mark.parametrize("release", ["1.13.15", "1.16.31"])  # one of each flytekit era
def test_fix_build_wheel_installs_with_pip_and_probes_fixed(
    release: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
) -> None:
    # The release comes from the index pip is configured for; serve it from the test cache so CI
    # downloads it once.
    sdist = download_sdist(cache_dir(request.config, tmp_path_factory), release)
    index = tmp_path / "index"
    index.mkdir()
    shutil.copy(sdist, index)
    env = {"PIP_FIND_LINKS": f"{index} {os.environ.get('PIP_FIND_LINKS', '')}".strip()}
    data = cli_json("fix", "build", release, "--out", tmp_path / "dist", expect=0, env=env)
    wheel = Path(data["wheel"])
    assert data["version"] == f"{release}+elasticaudit.1"
    assert wheel.parent == (tmp_path / "dist").resolve()
    assert wheel.name == f"flytekitplugins_kfpytorch-{release}+elasticaudit.1-py3-none-any.whl"
    assert SHA256.match(data["sha256"])
    import hashlib

    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == data["sha256"]
    with zipfile.ZipFile(wheel) as zf:
        assert "raise FlyteRecoverableException(" in zf.read(TASK_PY).decode()

    python = _venv_with_wheel(wheel, tmp_path / "venv")
    probe = cli_json("fix", "check", "--python", python, expect=0)
    assert probe["status"] == "fixed"
    assert probe["plugin_version"] == f"{release}+elasticaudit.1"
    assert probe["path"].startswith(str(tmp_path / "venv"))
