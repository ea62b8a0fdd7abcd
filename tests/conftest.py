"""Fixtures shared by the test modules: the reference sandbox, a webhook receiver, the plugin's
sdist.

Helpers are in tests/support/, imported as `support.*`: pytest puts this directory on sys.path
(its default `prepend` import mode, tests/ being no package).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.guard import HTTPRecorder

from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import Sandbox, sandbox


@pytest.fixture(autouse=True)
def _collector_thresholds() -> Iterator[None]:
    """A command run in this process turns its garbage collector's full passes off
    (`process.no_full_collections`, for the command's one scan); the next test gets them back."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    """The loopback sandbox seeded with the reference incident, once per module (a module that
    needs another scenario defines its own `box`)."""
    with sandbox(reference_scenario()) as b:
        yield b


@pytest.fixture
def hook() -> Iterator[HTTPRecorder]:
    """A loopback webhook receiver (Slack-like secret path) recording what it is sent."""
    r = HTTPRecorder()
    yield r
    r.close()


@pytest.fixture(scope="session")
def kfpytorch_sdist(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The plugin's downloaded sdist tarball (cached across runs in pytest's cache directory)."""
    # Imported here: support.fix needs the installed plugin, which test_install's fresh venvs,
    # running the unit tests with this conftest, do not have.
    from support.fix import cache_dir, download_sdist

    return download_sdist(cache_dir(request.config, tmp_path_factory))


@pytest.fixture
def sdist_tree(kfpytorch_sdist: Path, tmp_path: Path) -> Path:
    """A fresh, unpatched, unpacked sdist: `flytekitplugins_kfpytorch-X.Y.Z/`."""
    from support.fix import unpack

    return unpack(kfpytorch_sdist, tmp_path / "sdist")
