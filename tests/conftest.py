"""Fixtures shared by the test modules: the reference sandbox, a webhook receiver, the plugin's
sdist; and the fast level's guard: a test with none of the markers `integration`, `e2e`,
`install` fails if it starts a process or a server (tests/README.md, the test levels).

Helpers are in tests/support/, imported as `support.*`: pytest puts this directory on sys.path
(its default `prepend` import mode, tests/ being no package).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.guard import HTTPRecorder
from support.levels import LEVELS, SERVING_FIXTURES, guard

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


# -- the fast level stays in-process (support/levels.py) -----------------------------------


def _fast(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(m) for m in LEVELS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A fast-level test runs guarded, its fixtures' set-up and tear-down included: a module- or
    session-scoped server starts inside the first test asking for it, before any function-scoped
    (autouse) fixture of that test."""
    if not _fast(item):
        return (yield)
    guard.active, guard.seen = item.nodeid, []
    try:
        return (yield)
    finally:
        guard.active = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    serving = sorted(SERVING_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if serving and _fast(item):
        guard.refuse(
            f"uses the fixture {', '.join(serving)} (a server or a download)", "integration"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if guard.seen and _fast(item):
        if report.passed:
            report.outcome = "failed"
            report.longrepr = "\n".join(guard.seen)
        elif report.failed:
            report.sections.append(("fast level", "\n".join(guard.seen)))
        guard.seen = []  # one report per refusal, not one per phase
    return report
