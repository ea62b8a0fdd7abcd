"""The library takes what a Python user passes (docs/library.md, "What each argument takes"):
an execution as text wherever an ExecutionRef goes, a timedelta or `7d` where the CLI takes
`--since`, one project as a str, a Report where a report's document goes; and a Sources used
after its `with` block raises SourcesClosed instead of returning a report of gaps.

Against the reference sandbox, through `forensics`' public names only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from support.cli import use_sandbox

import forensics
from forensics.params import ParamError

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
START, END = "2026-09-04", "2026-09-11"


@pytest.fixture
def settings(box, tmp_path, monkeypatch):
    use_sandbox(box, monkeypatch)
    monkeypatch.chdir(tmp_path)  # no config file: the environment only
    return forensics.load_settings()


def _verdicts(report: forensics.Report) -> list[tuple[str, str]]:
    return sorted((str(f.attempt), str(f.verdict)) for f in report.findings)


@pytest.mark.integration
def test_relauncher_plans_an_execution_given_as_text(settings, tmp_path):
    audit = tmp_path / "audit.jsonl"
    with forensics.Sources.from_settings(settings) as sources:
        relauncher = forensics.Relauncher.over(sources, forensics.AuditLog(audit))
        as_text = relauncher.plan(INCIDENT)
        as_ref = relauncher.plan(forensics.execution_of(INCIDENT))
    assert as_text == as_ref
    assert as_text.verdict == "affected" and as_text.refusal is None


@pytest.mark.integration
def test_a_malformed_execution_is_a_usage_error_and_a_wrong_type_a_type_error(settings, tmp_path):
    with forensics.Sources.from_settings(settings) as sources:
        relauncher = forensics.Relauncher.over(sources, str(tmp_path / "audit.jsonl"))
        with pytest.raises(forensics.UsageError):
            relauncher.plan("gs1:production")
        with pytest.raises(TypeError, match="ref: expected an ExecutionRef"):
            relauncher.plan(42)  # type: ignore[arg-type]


def test_since_takes_a_timedelta_or_a_duration_as_the_cli_does():
    end = datetime(2026, 9, 11, tzinfo=UTC)
    expected = forensics.window_of(START, END)
    assert forensics.window_of(timedelta(days=7), end) == expected
    assert forensics.window_of(timedelta(days=7), "2026-09-11T00:00:00Z") == expected
    assert forensics.window_of("7d", end) == expected
    assert forensics.window_of("1w", "2026-09-11") == expected
    with pytest.raises(ParamError, match=r"since: .* must be a positive duration"):
        forensics.window_of(timedelta(0), end)
    with pytest.raises(ParamError, match=r"until: .* no time zone"):
        forensics.window_of("7d", datetime(2026, 9, 11))
    with pytest.raises(TypeError, match="since: expected"):
        forensics.window_of(7, end)  # type: ignore[arg-type]


@pytest.mark.integration
def test_scan_window_with_a_timedelta_scans_the_same_window(settings):
    by_text = forensics.scan_window(settings, START, END)
    by_delta = forensics.scan_window(settings, timedelta(days=7), datetime(2026, 9, 11, tzinfo=UTC))
    assert by_delta.window == by_text.window
    assert _verdicts(by_delta) == _verdicts(by_text) and by_text.findings


@pytest.mark.integration
def test_one_project_as_a_str_is_one_project_not_its_letters(settings):
    one = forensics.scan_window(settings, START, END, projects="gs1", domains="production")
    listed = forensics.scan_window(settings, START, END, projects=["gs1"], domains=["production"])
    assert one.complete and _verdicts(one) == _verdicts(listed)
    assert one.findings and all(f.attempt.execution.domain == "production" for f in one.findings)
    with pytest.raises(ParamError, match="projects: 'gs 1' is not a Flyte name"):
        forensics.scan_window(settings, START, END, projects="gs 1")


@pytest.mark.integration
def test_merge_reports_takes_reports_as_well_as_their_documents(settings):
    report = forensics.scan_window(settings, START, END)
    as_docs = forensics.merge_reports([report.as_dict()])
    assert forensics.merge_reports([report]) == as_docs
    assert forensics.merge_reports(report) == as_docs  # one report alone
    assert as_docs["summary"]["affected"] == report.summary.affected


@pytest.mark.integration
def test_sources_used_after_their_with_block_raise_instead_of_reporting_gaps(settings, tmp_path):
    with forensics.Sources.from_settings(settings) as sources:
        relauncher = forensics.Relauncher.over(sources, str(tmp_path / "audit.jsonl"))
    window = forensics.window_of(START, END)
    calls = [
        lambda: forensics.scan_window(settings, START, END, sources=sources),
        lambda: forensics.run_scan(sources, window, forensics.ScanScope()),
        lambda: forensics.examine_execution(settings, INCIDENT, sources=sources),
        lambda: forensics.examine(sources, forensics.execution_of(INCIDENT)),
        lambda: forensics.execution_timeline(settings, INCIDENT, sources=sources),
        lambda: relauncher.plan(INCIDENT),
        lambda: sources.__enter__(),
    ]
    for call in calls:
        with pytest.raises(forensics.SourcesClosed, match="used after their `with` block"):
            call()
    assert issubclass(forensics.SourcesClosed, forensics.UsageError)


def test_a_scan_scope_takes_one_project_as_one_name():
    from forensics.scan.scope import ScanScope

    scope = ScanScope(projects="gs1", domains="production")  # type: ignore[arg-type]
    assert (scope.projects, scope.domains) == (("gs1",), ("production",))
    assert scope.covers("gs1", "production")
    assert not scope.covers("gs", "production")  # not a substring of the text


@pytest.mark.integration
def test_examine_and_build_timeline_take_the_cli_s_execution_text(settings):
    with forensics.Sources.from_settings(settings) as sources:
        exam = forensics.examine(sources, INCIDENT)
        tl = forensics.build_timeline(sources, INCIDENT)
    assert exam.execution.ref == forensics.execution_of(INCIDENT)
    assert tl.execution.ref == exam.execution.ref and tl.events
