"""The package root is the library: every exported name resolves, and importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import pytest
from support.fakes import (
    WINDOW,
    FakeAdmin,
    FakeLoki,
    FakeStore,
    attempt,
    execution,
    fake_sources,
    wrote_outputs,
)

import forensics
import forensics.guard
from forensics.config import Settings


def test_every_exported_name_resolves():
    names = list(forensics.__all__)
    assert names and all(getattr(forensics, n) is not None for n in names)
    assert set(forensics.__all__) == {"TOOL", "__version__", *forensics._EXPORTS}
    assert set(forensics.__all__) <= set(dir(forensics))


def test_run_guard_is_the_guard_packages_own():
    assert forensics.run_guard is forensics.guard.run_guard


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        forensics.nonesuch  # noqa: B018


def test_the_scan_package_and_the_scan_function_are_both_reachable():
    import forensics.scan.run

    assert forensics.scan.scan is forensics.run_scan is forensics.scan.run.scan
    assert forensics.scan.ScanScope is forensics.ScanScope


@pytest.mark.e2e
def test_importing_the_package_imports_none_of_the_library():
    code = (
        "import sys, forensics; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('forensics', 'flytekit', 'boto3', 'botocore', 'requests', 'grpc', 'typing')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['forensics']"


def test_scan_window_is_the_scan_of_the_window_it_parses():
    admin, store = FakeAdmin(), FakeStore()
    ex = execution("azvg5f9v9974m78fvlf7")
    admin.add(ex, [attempt(ex)])
    wrote_outputs(store, attempt(ex), outputs=False)  # suspected: no outputs.pb, no signal
    sources = fake_sources(loki=FakeLoki(), admin=admin, store=store)
    report = forensics.scan_window(Settings(), "2026-09-10", "2026-09-11", sources=sources)
    assert report.window == WINDOW
    assert [str(f.attempt) for f in report.findings] == [str(attempt(ex).ref)]
    assert forensics.window_of(WINDOW.start, WINDOW.end) == WINDOW
    assert forensics.window_of("1d", datetime(2026, 9, 11, tzinfo=WINDOW.end.tzinfo)) == WINDOW
    with pytest.raises(forensics.UsageError, match="must be before"):
        forensics.window_of("2026-09-11", "2026-09-10")


def test_execution_of_reads_the_forms_the_cli_reads():
    ref = forensics.ExecutionRef("gs1", "production", "azvg5f9v9974m78fvlf7")
    assert forensics.execution_of("gs1:production:azvg5f9v9974m78fvlf7") == ref
    assert forensics.execution_of("gs1/production/azvg5f9v9974m78fvlf7") == ref
    assert forensics.execution_of(ref) is ref
