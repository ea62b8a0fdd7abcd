"""Fixtures of the plugin-fix tests (loaded with `pytest_plugins = ["fix_fixtures"]`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fix_support import cache_dir, download_sdist, unpack


@pytest.fixture(scope="session")
def kfpytorch_sdist(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The downloaded sdist tarball (cached across runs in pytest's cache directory)."""
    return download_sdist(cache_dir(request.config, tmp_path_factory))


@pytest.fixture
def sdist_tree(kfpytorch_sdist: Path, tmp_path: Path) -> Path:
    """A fresh, unpatched, unpacked sdist: `flytekitplugins_kfpytorch-X.Y.Z/`."""
    return unpack(kfpytorch_sdist, tmp_path / "sdist")
