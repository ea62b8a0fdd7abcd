"""The bad-input corpus: every user-facing input in its hostile forms is one clear line and exit 2,
with nothing sent to Loki, Admin or S3 and nothing written; and the parsers behind those inputs
(times, identifiers, config files, reports, log lines, pod names, requirements) never crash.

The CLI cases run the real entry point in-process against a running sandbox, whose servers
record every request they receive: "refused before sending anything" is checked there.
"""

from __future__ import annotations

import json
import string
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.cli import run, run_process, use_sandbox
from support.pins import OLD_A, build_tree, snapshot
from support.scan import CONFIG, WINDOW
from support.terminal import clean_env

from forensics.cli.errors import message
from forensics.cli.exits import for_error
from forensics.config import Settings, read_config_file
from forensics.errors import ElasticAuditError, UsageError
from forensics.evidence.flyte_names import parse_pod_name
from forensics.evidence.logs import parse_propeller_line, parse_signal
from forensics.formats import render
from forensics.identifiers import parse_execution
from forensics.model import UTC, LogEntry, Report, Summary, Window
from forensics.pinbump.patterns import ManifestError, PinPatterns
from forensics.pinbump.pyproject import scan_pyproject
from forensics.pinbump.requirements import scan_requirements
from forensics.relaunch import executions_from_report
from forensics.sandbox.loki_logql import parse_log_query
from forensics.scan.scope import ScanScope, task_selector
from forensics.timeutil import parse_window

SHA = "c0ffee0123456789abcdef0123456789abcdef01"
# LogQL, RE2 and flyteadmin-filter metacharacters (flyteadmin splits filters on `+`, lists on `;`).
METACHARACTERS = ['"', "}", "{", "|", "\\", "`", "+", ",", "(", ")", ";", "=~", "\n", "*", "$"]


@pytest.fixture
def cli(box, tmp_path, monkeypatch, capsys):
    """Run the CLI in a clean directory; check it sent nothing and wrote nothing."""
    use_sandbox(box, monkeypatch)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "elastic-audit.toml").write_text(CONFIG)
    monkeypatch.chdir(work)

    def refused(args: list[str], fragment: str) -> str:
        sent = (len(box.loki.requests), len(box.admin.calls), len(box.s3.requests))
        before = sorted(p.name for p in work.iterdir())
        code, out, err = run(args, capsys)
        assert code == 2, (args, code, err)
        assert out == "", out
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("elastic-audit: error: "), err
        assert fragment in lines[0], lines[0]
        assert (len(box.loki.requests), len(box.admin.calls), len(box.s3.requests)) == sent
        assert sorted(p.name for p in work.iterdir()) == before  # no report, no temp file
        assert not (tmp_path / "state").exists()  # no audit log
        return lines[0]

    refused.work = work  # type: ignore[attr-defined]
    return refused


# -- --since / --until -------------------------------------------------------------------------

TIMES = [
    (["--since", ""], "--since"),
    (["--since", "   "], "--since"),
    (["--since", "garbage"], "neither a duration"),
    (["--since", "yesterday"], "neither a duration"),
    (["--since", "-7d"], "neither a duration"),
    (["--since", "0s"], "positive duration"),
    (["--since", "nan"], "neither a duration"),
    (["--since", "NaN"], "neither a duration"),
    (["--since", "inf"], "neither a duration"),
    (["--since", "1e400s"], "neither a duration"),
    (["--since", "7"], "neither a duration"),
    (["--since", "99999999d"], "before 1970-01-01"),
    (["--since", "9999999999999d"], "too long a duration"),
    (["--since", "9" * 4000 + "d"], "too long a duration"),
    (["--since", "1d", "--until", "0001-01-01T00:00:00Z"], "before 1970-01-01"),
    (["--since", "1969-12-31", "--until", "1970-01-02"], "before 1970-01-01"),
    (["--since", "2026-09-10T19:45:00"], "no time zone"),
    (["--since", "2026-09-10 19:45:00"], "no time zone"),
    (["--since", "2026-13-01"], "not a valid date"),
    (["--since", "2026-02-30"], "not a valid date"),
    (["--since", "0000-01-01"], "not a valid date"),
    (["--since", "2026-09-10T19:45:00+25:00"], "neither a duration"),
    (["--since", "2026-09-10T19:45:00Z[UTC]"], "neither a duration"),
    (["--since", "\x00"], "neither a duration"),
    (["--since", "7d", "--until", ""], "--until"),
    (["--since", "7d", "--until", "garbage"], "--until"),
    (["--since", "7d", "--until", "nan"], "--until"),
    (["--since", "7d", "--until", "2026-09-10T19:45:00"], "no time zone"),
    (["--since", "2026-09-11", "--until", "2026-09-04"], "must be before"),
    (["--since", "2026-09-11", "--until", "2026-09-11"], "must be before"),
    (["--since", "9999-12-31T23:59:59Z"], "must be before"),
]


@pytest.mark.integration
@pytest.mark.parametrize("args,fragment", TIMES, ids=[repr(a)[:40] for a, _ in TIMES])
def test_hostile_since_and_until_are_refused(cli, args, fragment):
    cli(["scan", *args], fragment)


MANY = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOME = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@MANY
@given(since=st.text(max_size=40), until=st.one_of(st.none(), st.text(max_size=40)))
def test_any_since_and_until_give_a_window_or_a_usage_error(since, until):
    try:
        w = parse_window(since, until)
    except UsageError:
        return
    assert w.start < w.end and w.start.year >= 1970


# -- scan flags ------------------------------------------------------------------------------

FLAGS = [
    (["--workers", "0"], "--workers"),
    (["--workers", "-1"], "--workers"),
    (["--workers", "257"], "--workers"),
    (["--workers", "many"], "--workers"),
    (["--domain", 'production"'], "--domain"),
    (["--loki-url", "ftp://loki"], "Loki URL"),
    (["--loki-url", "http://"], "Loki URL"),
    (["--loki-url", "http://lo ki:3100"], "Loki URL"),
    (["--loki-url", "http://[::1"], "Loki URL"),
    (["--loki-url", "http://loki:99999"], "Loki URL"),
    (["--flyte-config", "/nonexistent/config.yaml"], "not found"),
    (["--config", "/nonexistent/elastic-audit.toml"], "not found"),
    (["--report", "/nonexistent/dir/report.json"], "does not exist"),
    (["--report", "."], "is a directory"),
    (["--report", ""], "empty file name"),
    (["--checkpoint-template", "s3://b/{bogus}/"], "unknown field {bogus}"),
    (["--checkpoint-template", "s3://b/{project"], "not a valid template"),
    (["--checkpoint-template", "s3://b/{0}/"], "unknown field {0}"),
    (["--checkpoint-template", "s3://b/{inputs}/"], "unknown field {inputs}"),
    (["-o", "xml"], "-o"),
    (["--no-such-flag"], "--no-such-flag"),
]


@pytest.mark.integration
@pytest.mark.parametrize("args,fragment", FLAGS, ids=[" ".join(a)[:40] for a, _ in FLAGS])
def test_hostile_scan_flags_are_refused(cli, args, fragment):
    cli(["scan", *WINDOW, *args], fragment)


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--domain", "prod"], "--domain 'prod': no project has such a domain"),
        (["--project", "GS1"], "--project 'GS1': Flyte Admin has no such project"),
    ],
)
def test_a_scope_admin_does_not_know_is_refused_after_one_list_projects(
    cli, box, args, fragment, capsys
):
    # Each project's domains come from Admin (docs/configuration.md): the refusal costs one ListProjects,
    # and nothing is read from Loki or S3, nothing written.
    loki, s3 = len(box.loki.requests), len(box.s3.requests)
    admin = len(box.admin.calls)
    code, out, err = run(["scan", *WINDOW, *args], capsys)
    assert (
        code == 2
        and out == ""
        and err.strip().splitlines()
        == [f"elastic-audit: error: {err.strip().split('error: ', 1)[1]}"]
    )
    assert fragment in err
    assert [m for m, _ in box.admin.calls[admin:]] == ["ListProjects"]
    assert (len(box.loki.requests), len(box.s3.requests)) == (loki, s3)
    assert sorted(p.name for p in cli.work.iterdir()) == ["elastic-audit.toml"]


@pytest.mark.integration
@pytest.mark.parametrize("meta", [*METACHARACTERS, "", " ", "é", "ｇｓ１", "gs1\t"])
def test_project_with_logql_or_filter_metacharacters_is_refused_before_any_request(cli, meta):
    cli(["scan", *WINDOW, "--project", f"gs1{meta}x" if meta else ""], "--project")


@settings(max_examples=600, deadline=None)
@given(project=st.text(min_size=1, max_size=30), domain=st.sampled_from(["production", "dev"]))
@example(project="{domain}", domain="production")  # CI's find: the domain was filled in again
def test_a_project_name_can_never_widen_or_escape_the_logql_selector(project, domain):
    # Below the CLI's refusal: even a project it would let through is a literal inside one
    # `=~` matcher, as Loki's own parser (the sandbox's port of it) reads the query back.
    settings_ = Settings()
    sel = task_selector(settings_, ScanScope((project,), (domain,)))
    parsed = parse_log_query(sel)
    assert [(m.name, m.op) for m in parsed.matchers] == [
        ("namespace", "=~"),
        ("job", "!~"),  # the default leaves out the event shippers' streams
        ("namespace", "=~"),
    ]
    namespace = f"{project}-{domain}"
    ns = parsed.matchers[-1]
    assert ns.matches(namespace)
    assert not ns.matches(namespace + "x") and not ns.matches("x" + namespace)


# -- config files ----------------------------------------------------------------------------

CONFIGS = [
    ("[loki]\nurl = 5\n", "loki.url must be a string"),
    ("[loki]\nurl = 'http://'\n", "Loki URL"),
    ("[loki]\norg_id = 5\n", "loki.org_id"),
    ("[loki]\nnamespace_label = 5\n", "loki.namespace_label"),
    ("[loki]\npod_label = 'bad label'\n", "loki.pod_label must be a Loki label name"),
    ("[loki]\ncontainer_label = ''\n", "loki.container_label"),
    ("[loki]\ntask_selector = 'namespace=\"x\"'\n", "loki.task_selector"),
    ('[loki]\ntask_selector = \'{namespace="x"} |= "y"\'\n', "loki.task_selector"),
    ("[loki]\npropeller_selector = 5\n", "loki.propeller_selector"),
    ("[loki]\nmax_query_length = 5\n", "loki.max_query_length"),
    ("[loki]\nmax_query_length = '9999999999999d'\n", "loki.max_query_length"),
    ("[loki]\nshard = 'soon'\n", "loki.shard"),
    ("[loki]\nshard = '-1h'\n", "loki.shard"),
    ("[loki]\nshard = '1s'\n", "loki.shard must be at least 1 minute"),
    ("[loki]\ngrafana_explore_url = 5\n", "loki.grafana_explore_url"),
    ("[loki]\ntimeout = 'fast'\n", "loki.timeout"),
    ("[loki]\ntimeout = -1\n", "loki.timeout"),
    ("[loki]\ntimeout = nan\n", "loki.timeout"),
    ("[loki]\ntimeout = inf\n", "loki.timeout"),
    ("[loki]\ntimeout = true\n", "loki.timeout"),
    ("[loki]\nretries = -1\n", "loki.retries"),
    ("[loki]\nretries = 1.5\n", "loki.retries"),
    ("[loki]\nretry_backoff = nan\n", "loki.retry_backoff"),
    ("[flyte]\nconfig = 5\n", "flyte.config"),
    ("[flyte]\nconfig = '/nonexistent.yaml'\n", "not found"),
    ("[flyte]\nnamespace_template = '{project}'\n", "flyte.namespace_template"),
    ("[flyte]\nnamespace_template = '{project}-{domain}-{bogus}'\n", "not {bogus}"),
    ("[flyte]\nnamespace_template = '{project}-{domain}-{'\n", "not a valid template"),
    ("[flyte]\nnamespace_template = 5\n", "flyte.namespace_template"),
    ("[flyte]\ndomains = 'production'\n", "flyte.domains"),
    ("[flyte]\ndomains = []\n", "flyte.domains"),
    ("[flyte]\ndomains = [1]\n", "flyte.domains"),
    ("[flyte]\ndomains = ['prod uction']\n", "flyte.domains"),
    ("[flyte]\ndomains = ['x\"}']\n", "flyte.domains"),
    ("[flyte]\nconsole_url = ''\n", "flyte.console_url"),
    ("[flyte]\ntimeout = 0\n", "flyte.timeout"),
    ("[flyte]\nretries = 100\n", "flyte.retries"),
    ("[checkpoints]\ninput = 3\n", "checkpoints.input"),
    ("[checkpoints]\ntemplate = 3\n", "checkpoints.template"),
    ("[checkpoints]\ntemplate = 's3://b/{bogus}'\n", "checkpoints.template has an unknown field"),
    ("[scan]\nworkers = 0\n", "scan.workers"),
    ("[scan]\nworkers = '8'\n", "scan.workers"),
    ("[scan]\nworkers = true\n", "scan.workers"),
    ("loki = 5\n", "loki must be a table"),
    ("[nope]\n", "unknown section [nope]"),
    ("[loki]\nnope = 1\n", "unknown key loki.nope"),
    ("[loki.sub]\nx = 1\n", "unknown key loki.sub"),
    ("[loki\n", "TOML syntax error"),
    ("[loki]\nurl = 'a'\nurl = 'b'\n", "TOML syntax error"),
]


@pytest.mark.integration
@pytest.mark.parametrize("text,fragment", CONFIGS, ids=[t[:40] for t, _ in CONFIGS])
def test_every_config_key_with_a_wrong_value_names_key_and_file(cli, monkeypatch, text, fragment):
    monkeypatch.delenv("LOKI_ADDR")  # else the environment wins over the file's url
    (cli.work / "elastic-audit.toml").write_text(text)
    line = cli(["scan", *WINDOW], fragment)
    if "not found" not in fragment and "Loki URL" not in fragment:
        assert "elastic-audit.toml" in line


@pytest.mark.integration
def test_a_config_file_that_is_not_utf8_is_refused(cli):
    (cli.work / "elastic-audit.toml").write_bytes(b"\xff\xfe[loki]\n")
    cli(["scan", *WINDOW], "cannot read")


BROKEN_YAML = "admin:\n  endpoint: [a, b\n"
BROKEN_YAML_SAID = (
    "not valid YAML (line 3, column 1: expected ',' or ']', but got '<stream end>'; "
    "while parsing a flow sequence at line 2, column 13)"
)


@pytest.mark.integration
@pytest.mark.parametrize(
    "content,fragment",
    [("", "empty (no settings in it)"), ("admin: [unclosed\n", "not valid YAML (line 2, ")],
    ids=["empty", "not-yaml"],
)
def test_a_flyte_config_that_is_not_yaml_is_refused(cli, content, fragment):
    bad = cli.work.parent / "flyte.yaml"
    bad.write_text(content)
    assert cli(["scan", *WINDOW, "--flyte-config", str(bad)], fragment).startswith(
        f"elastic-audit: error: Flyte config {bad}: "
    )


@pytest.mark.integration
@pytest.mark.parametrize("logging_level", [None, "30"], ids=["default", "FLYTE_SDK_LOGGING_LEVEL"])
def test_a_flyte_config_that_is_not_yaml_is_one_line_where_it_breaks(
    cli, monkeypatch, logging_level
):
    # flytekit logs the YAML it cannot parse as a warning of several lines (and goes on with
    # localhost:30080); its own level knob, which the tool honours, lets that warning through.
    bad = cli.work.parent / "config.yaml"
    bad.write_text(BROKEN_YAML)
    monkeypatch.setenv("FLYTECTL_CONFIG", str(bad))
    if logging_level:
        monkeypatch.setenv("FLYTE_SDK_LOGGING_LEVEL", logging_level)
    line = cli(["scan", *WINDOW], BROKEN_YAML_SAID)
    assert line == f"elastic-audit: error: Flyte config {bad}: {BROKEN_YAML_SAID}"


@pytest.mark.e2e
@pytest.mark.parametrize("command", [["scan", "--since", "1h"], ["config"]], ids=["scan", "config"])
def test_a_flyte_config_that_is_not_yaml_is_one_line_in_a_fresh_process(tmp_path, command):
    # flytekit reads its config already while it is imported, and warns there too: JSON lines
    # on stderr under `scan`, rich ones on stdout under `config`. Neither is written.
    bad = tmp_path / "bad.yaml"
    bad.write_text(BROKEN_YAML)
    env = clean_env(tmp_path, FLYTECTL_CONFIG=str(bad))
    r = run_process(*command, env=env, cwd=tmp_path, timeout=120)
    assert (r.returncode, r.stdout) == (2, ""), (r.returncode, r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"elastic-audit: error: Flyte config {bad}: {BROKEN_YAML_SAID}"
    ], r.stderr


@pytest.mark.integration
@pytest.mark.parametrize(
    "env,fragment",
    [
        ({"LOKI_ADDR": "not a url"}, "Loki URL"),
        ({"LOKI_BEARER_TOKEN": "t", "LOKI_USERNAME": "u", "LOKI_PASSWORD": "p"}, "at most one"),
        ({"LOKI_USERNAME": "u"}, "needs both"),
        ({"LOKI_BEARER_TOKEN_FILE": "/nonexistent/token"}, "LOKI_BEARER_TOKEN_FILE"),
        ({"AWS_PROFILE": "no-such-profile-here"}, "AWS profile"),
    ],
    ids=["LOKI_ADDR", "bearer+basic", "user-only", "token-file", "AWS_PROFILE"],
)
def test_hostile_environment_is_refused(cli, monkeypatch, env, fragment):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cli(["scan", *WINDOW], fragment)


@SOME
@given(
    doc=st.dictionaries(
        st.sampled_from(["loki", "flyte", "checkpoints", "scan", "x"]),
        st.dictionaries(
            st.sampled_from(
                [
                    "url",
                    "shard",
                    "max_query_length",
                    "timeout",
                    "retries",
                    "domains",
                    "namespace_template",
                    "template",
                    "workers",
                    "pod_label",
                    "bogus",
                ]
            ),
            st.one_of(
                st.text(max_size=20),
                st.integers(),
                st.floats(),
                st.booleans(),
                st.lists(st.text(max_size=8), max_size=3),
            ),
            max_size=4,
        ),
        max_size=3,
    )
)
def test_any_config_document_loads_or_is_one_config_error(tmp_path_factory, doc):
    import tomlkit

    path = tmp_path_factory.mktemp("cfg") / "c.toml"
    path.write_text(tomlkit.dumps(doc))
    try:
        read_config_file(path)
    except ElasticAuditError as e:
        assert for_error(e) == 2 and str(path) in str(e) and "\n" not in str(e)


# -- execution identifiers and reports ------------------------------------------------------

EXECUTIONS = [
    "",
    ":",
    "gs1:production",
    "gs1:production:x:y",
    "ex:",
    "bare",
    "https://example.com/",
    "https://flyte.example.com/console/projects/gs1/domains/production/executions/",
    "gs1:production:ABC",
    "gs1:production:" + "a" * 64,
    "gs1:production:../etc",
    "gs1:prod uction:abc",
    "gs1:production:x%2F",
    'gs1:production:x"}',
    "gs1:production:x|y",
    "gs1+x:production:abc",
    "gs1:production:a\x00b",
    "gs1:production:a b",
    "gs1\n:production:abc",  # Python's `$` matches before a final newline; Admin's does not
    "gs1:production\n:abc",
]


@pytest.mark.integration
@pytest.mark.parametrize("command", ["show", "relaunch"])
@pytest.mark.parametrize("ref", EXECUTIONS, ids=[repr(e)[:30] for e in EXECUTIONS])
def test_hostile_execution_identifiers_are_refused(cli, command, ref):
    extra = ["--yes"] if command == "relaunch" else []
    cli([command, ref, *extra], "execution")


@MANY
@given(text=st.text(max_size=80), project=st.one_of(st.none(), st.text(max_size=10)))
@example(text="a", project="0\n")  # found by this test in CI: a project ending in a newline
def test_any_execution_text_is_a_valid_ref_or_a_usage_error(text, project):
    try:
        ref = parse_execution(text, project=project, domain=project)
    except UsageError:
        return
    allowed = set(string.ascii_letters + string.digits + "-_")
    assert set(ref.project) <= allowed and set(ref.domain) <= allowed
    assert set(ref.name) <= set(string.ascii_lowercase + string.digits + "-")
    assert 1 <= len(ref.name) <= 63


REPORTS = [
    ("", "not JSON"),
    ("not json", "not JSON"),
    ("null", "not an elastic-audit scan report"),
    ("[1, 2]", "not an elastic-audit scan report"),
    ('{"schema_version": 2, "findings": []}', "not an elastic-audit scan report"),
    ('{"schema_version": 1, "findings": {}}', "not an elastic-audit scan report"),
    ('{"schema_version": 1, "findings": [null]}', "has no execution"),
    ('{"schema_version": 1, "findings": [{"verdict": "affected"}]}', "has no execution"),
    (
        '{"schema_version": 1, "findings": [{"verdict": "affected", "execution": '
        '{"project": "gs1", "domain": "production", "name": "../../etc"}}]}',
        "finding 0",
    ),
    (
        '{"schema_version": 1, "findings": [{"verdict": "suspected", "execution": '
        '{"project": "gs1", "domain": "production", "name": 5}}]}',
        "finding 0",
    ),
    (
        '{"schema_version": 1, "findings": [{"verdict": "affected", "execution": '
        '{"project": "gs1:x", "domain": "production", "name": "abc"}}]}',
        "finding 0",
    ),
    ("verdict,project,domain,execution\naffected,gs1,production,abc\n", "not JSON"),
]


@pytest.mark.integration
@pytest.mark.parametrize("content,fragment", REPORTS, ids=[c[:30] for c, _ in REPORTS])
def test_files_that_are_not_reports_are_refused_by_from_report(cli, content, fragment):
    bad = cli.work.parent / "report.json"
    bad.write_text(content)
    cli(["relaunch", "--from-report", str(bad), "--yes"], fragment)


@pytest.mark.integration
@pytest.mark.parametrize(
    "path,fragment", [("/nonexistent/report.json", "no such file"), ("/", "cannot read")]
)
def test_from_report_paths_that_are_not_files_are_refused(cli, path, fragment):
    cli(["relaunch", "--from-report", path, "--yes"], fragment)


@pytest.mark.integration
def test_a_binary_file_given_as_a_report_is_refused(cli):
    bad = cli.work.parent / "report.json"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    cli(["relaunch", "--from-report", str(bad), "--yes"], "cannot read")


@SOME
@given(
    doc=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=12),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=12,
    ),
    findings=st.lists(
        st.fixed_dictionaries(
            {
                "verdict": st.sampled_from(["affected", "suspected", "x"]),
                "execution": st.fixed_dictionaries(
                    {
                        "project": st.one_of(st.text(max_size=8), st.integers()),
                        "domain": st.text(max_size=8),
                        "name": st.text(max_size=12),
                    }
                ),
            }
        ),
        max_size=3,
    ),
)
def test_any_json_given_as_a_report_is_refs_or_a_usage_error(tmp_path_factory, doc, findings):
    for content in (doc, {"schema_version": 1, "findings": findings}):
        path = tmp_path_factory.getbasetemp() / "fuzz-report.json"
        path.write_text(json.dumps(content))
        try:
            refs = executions_from_report(str(path))
        except UsageError as e:
            assert "\n" not in str(e)
            continue
        for ref in refs:
            assert parse_execution(str(ref)) == ref  # only what the command line would accept


# -- -o values ---------------------------------------------------------------------------------

OUTPUTS = [
    (["show", "gs1:production:abc", "-o", "csv"], "'csv' is not one of table, json"),
    (["show", "gs1:production:abc", "-o", "markdown"], "'markdown' is not one of table, json"),
    (["relaunch", "gs1:production:abc", "--yes", "-o", "csv"], "'csv' is not one of table, json"),
    (
        ["relaunch", "gs1:production:abc", "--yes", "-o", "markdown"],
        "'markdown' is not one of table, json",
    ),
    (
        ["pin-bump", SHA, "--root", ".", "--no-verify", "-o", "csv"],
        "'csv' is not one of table, json, diff",
    ),
    (
        ["pin-bump", SHA, "--root", ".", "--no-verify", "-o", "markdown"],
        "'markdown' is not one of table, json, diff",
    ),
    (["scan", *WINDOW, "-o", "yaml"], "-o"),
]


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,fragment", OUTPUTS, ids=[" ".join(a[:1] + a[-1:]) for a, _ in OUTPUTS]
)
def test_output_formats_a_command_does_not_have_are_refused(cli, args, fragment):
    cli(args, fragment)


def _empty_report() -> Report:
    window = Window(datetime(2026, 9, 4, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))
    return Report(tool="elastic-audit", window=window, gaps=(), summary=Summary(), findings=())


@pytest.mark.parametrize("fmt", ["diff", "yaml", ""])
def test_a_result_asked_for_in_a_format_nobody_renders_is_an_error_not_a_table(fmt):
    # It was a table: any name but json, csv and markdown fell through to it.
    with pytest.raises(ElasticAuditError) as e:
        render(_empty_report(), fmt)
    assert message(e.value).startswith(f"-o {fmt}: a Report is not rendered as")
    with pytest.raises(ElasticAuditError, match="offered: none"):
        render(object(), "table")


def test_every_command_offers_exactly_the_formats_its_result_renders_in():
    from forensics.formats import (
        PIN_BUMP_FORMATS,
        REPORT_FORMATS,
        SCAN_FORMATS,
        SHOW_FORMATS,
        TABLE_OR_JSON,
        OutputFormat,
        renderers,
    )
    from forensics.formats.fix import BundledPatch
    from forensics.formats.pinbump import BumpResult
    from forensics.formats.relaunch import RelaunchResults
    from forensics.page import IncidentPage
    from forensics.plugin_fix.build import BuildResult
    from forensics.plugin_fix.check import CheckResult
    from forensics.plugin_fix.patch import ApplyResult
    from forensics.timeline import Timeline

    assert renderers(Report) == REPORT_FORMATS
    # scan -o html renders the incident page, a report with its executions' attempts
    assert (*renderers(Report), *renderers(IncidentPage)) == SCAN_FORMATS
    assert renderers(IncidentPage) == (OutputFormat.html,)
    assert renderers(Timeline) == SHOW_FORMATS
    assert renderers(BumpResult) == PIN_BUMP_FORMATS
    for kind in (RelaunchResults, BundledPatch, ApplyResult, CheckResult, BuildResult):
        assert renderers(kind) == TABLE_OR_JSON, kind


# -- pin-bump ----------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    return build_tree(tmp_path)


PIN_BUMPS = [
    (["--root", "{file}"], "is not a directory"),
    (["--root", "/nonexistent/monorepo"], "is not a directory"),
    (["--root", "{root}", "--repo", "../flytekit"], "is not OWNER/NAME"),
    (["--root", "{root}", "--repo", "exa-labs/.."], "is not OWNER/NAME"),
    (["--root", "{root}", "--repo", "exa labs/flytekit"], "is not OWNER/NAME"),
    (["--root", "{root}", "--dry-run", "--check"], "cannot be combined"),
    (["--root", "{root}", "--lock", "--dry-run"], "cannot be combined"),
    (["--root", "{root}", "--package", "not-a-plugin-here"], "not-a-plugin-here"),
]


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,fragment", PIN_BUMPS, ids=[" ".join(a[1:])[:40] for a, _ in PIN_BUMPS]
)
def test_hostile_pin_bump_roots_and_flags_are_refused_with_nothing_written(
    cli, tree, args, fragment
):
    before = snapshot(tree.base)
    file = tree.root / "pyproject.toml"
    args = [a.format(file=file, root=tree.root) for a in args]
    cli(["pin-bump", SHA, *args, "--no-verify"], fragment)
    assert snapshot(tree.base) == before


@pytest.mark.integration
@pytest.mark.parametrize("sha", ["", "c0ffee", "g" * 40, SHA + "0", "HEAD", f"{SHA[:39]} "])
def test_a_sha_that_is_not_40_hex_digits_is_refused(cli, tree, sha):
    before = snapshot(tree.base)
    cli(["pin-bump", sha, "--root", str(tree.root), "--no-verify"], "40 hex digits")
    assert snapshot(tree.base) == before


# -- parsers under fuzz (where tests/evidence/test_evidence_properties.py and test_pins_properties.py
#    do not reach: arbitrary labels and JSON types, arbitrary requirements and pyproject text) --

label_values = st.one_of(st.text(max_size=30), st.from_regex(r"[a-z0-9-]{1,70}", fullmatch=True))


@SOME
@given(
    labels=st.dictionaries(
        st.sampled_from(["namespace", "pod", "container", "k8s_pod_name", "stream", "x"]),
        label_values,
        max_size=5,
    ),
    line=st.sampled_from(
        [
            "W0910 19:45:22.199000 107 torch/distributed/elastic/agent/server/api.py:753] "
            "Received 15 death signal, shutting down workers",
            "Received Signals.SIGTERM death signal, shutting down workers",
            "nothing to see",
        ]
    ),
    ts=st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_signal_parser_takes_any_labels_and_timestamps_without_crashing(labels, line, ts):
    hit = parse_signal(LogEntry.make(ts, labels, line))
    if hit is not None:
        assert hit.pod == labels.get("pod") and hit.namespace == labels.get("namespace")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


@SOME
@given(
    fields=st.dictionaries(
        st.sampled_from(["json", "level", "msg", "ts", "exec_id", "node", "log", "time"]),
        json_values,
        max_size=6,
    )
)
def test_propeller_parser_takes_json_of_any_shape(fields):
    parse_propeller_line(json.dumps(fields))


@MANY
@given(pod=st.text(min_size=0, max_size=260))
def test_pod_name_parser_takes_names_up_to_kubernetes_length_and_beyond(pod):
    parsed = parse_pod_name(pod)
    if parsed is not None:
        assert parsed.pod == pod


PATTERNS = PinPatterns.for_repo("exa-labs/flytekit")
fork_bits = st.sampled_from(
    [
        "flytekit @ ",
        "flytekitplugins-kfpytorch[elastic] @ ",
        f"https://github.com/exa-labs/flytekit/archive/{OLD_A}.tar.gz",
        f"git+https://github.com/exa-labs/flytekit@{OLD_A}",
        f"https://codeload.github.com/exa-labs/flytekit/tar.gz/{OLD_A}",
        "#subdirectory=plugins/flytekit-kf-pytorch",
        " ; python_version >= '3.10'",
        " \\\n",
        "\n",
        "# comment ",
        "-e ",
        "--hash=sha256:",
        "@",
        '"',
        "[",
    ]
)
requirement_text = st.lists(st.one_of(fork_bits, st.text(max_size=12)), max_size=14).map("".join)


@MANY
@given(text=requirement_text)
def test_requirements_parser_finds_pins_or_names_the_line_it_cannot_parse(text):
    try:
        scan = scan_requirements(Path("r.txt"), "r.txt", text.encode(), PATTERNS)
    except ManifestError as e:
        assert str(e).startswith("r.txt:") and for_error(e) == 2
        return
    for pin in scan.pins:
        assert scan.text[pin.offset : pin.offset + len(pin.commit)] == pin.commit


@SOME
@given(
    deps=st.lists(requirement_text, max_size=4),
    tail=st.one_of(st.just(""), st.text(max_size=20)),
)
def test_pyproject_parser_finds_pins_or_names_the_line_it_cannot_parse(deps, tail):
    body = "[project]\nname = 'x'\ndependencies = [\n" + "".join(
        f"  {json.dumps(d)},\n" for d in deps
    )
    text = body + "]\n" + tail
    try:
        scan = scan_pyproject(Path("pyproject.toml"), "pyproject.toml", text.encode(), PATTERNS)
    except ManifestError as e:
        assert str(e).startswith("pyproject.toml") and for_error(e) == 2
        return
    for pin in scan.pins:
        assert scan.text[pin.offset : pin.offset + len(pin.commit)] == pin.commit
