"""Property tests for forensics.evidence: the parsers never crash and never misattribute."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.config import Settings
from forensics.evidence.envelopes import unwrap_runtime
from forensics.evidence.flyte_names import (
    DEFAULT_DOMAINS,
    generated_name,
    hash_id,
    namespace_for,
    namespace_to_project_domain,
    parse_pod_name,
    pod_name_for,
    unique_node_id,
)
from forensics.evidence.logs import (
    SIGNAL_LINE_REGEX,
    corroboration,
    parse_propeller_line,
    parse_signal,
)
from forensics.model import LogEntry
from forensics.sandbox.loki_logql import parse_log_query
from forensics.sandbox.shippers import SHIPPERS, ship
from forensics.scan.scope import ScanScope, signal_query

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LABELS = {"namespace": "proj-development", "pod": "abcdefghij0123456789-n0-0", "container": "c"}
SIGNAL_RE = re.compile(SIGNAL_LINE_REGEX)
# The line filters of the query the scan really sends, evaluated as the sandbox Loki evaluates
# LogQL (RE2 syntax translated, unanchored search): what the parser accepts must pass them all.
SCAN_FILTERS = parse_log_query(signal_query(Settings(), ScanScope())).filters


def loki_lets_through(line: str) -> bool:
    return all(f.keep(line) for f in SCAN_FILTERS)


# Linux numbers as Python's signal.Signals names them (pods run Linux); SIGKILL/SIGSTOP excluded
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 6: "SIGABRT", 10: "SIGUSR1", 15: "SIGTERM"}

# --- arbitrary input -----------------------------------------------------------------------------

garbage_bytes = st.binary(max_size=400).map(lambda b: b.decode("utf-8", errors="replace"))
phrases = st.sampled_from(
    [
        "Received 15 death signal, shutting down workers",
        "Received Signals.SIGTERM death signal",
        "Got termination signal: ",
        "Elastic launch agent process terminating: Process 1 got signal: ",
        '{"log":"',
        '{"asctime": "x", "name": "flytekit", "levelname": "E", "message": "',
        '{"json":{"node":"n0/dn1"},"level":"info","msg":"',
        "2026-09-10T19:45:22.1Z stderr F ",
        "W0910 19:45:22.199000 1 a.py:1] ",
        "\\u00",
        "\\",
        '"',
        "\n",
        "\ufffd",
    ]
)
messy_text = st.lists(st.one_of(st.text(max_size=40), garbage_bytes, phrases), max_size=12).map(
    "".join
)


@st.composite
def truncated_json_lines(draw: st.DrawFn) -> str:
    inner = draw(messy_text)
    obj = draw(
        st.sampled_from(
            [
                {"log": inner + "\n", "stream": "stderr", "time": "2026-09-10T19:45:22Z"},
                {"asctime": "t", "name": "flytekit", "levelname": "ERROR", "message": inner},
                {"time": "t", "_p": "F", "log": inner, "kubernetes": {"pod_name": inner}},
                {"body": inner, "attributes": {"log.iostream": "stderr"}, "resources": {}},
                {"file": "/var/log/pods/x/0.log", "message": inner, "stream": "stderr"},
                {"log": json.dumps({"name": "flytekit", "message": inner}), "stream": "stderr"},
                {
                    "json": {"exec_id": inner, "node": "n0"},
                    "level": "info",
                    "msg": inner,
                    "ts": inner,
                },
            ]
        )
    )
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    return text[: draw(st.integers(0, len(text)))]


any_line = st.one_of(messy_text, truncated_json_lines())


@FAST
@given(line=any_line)
def test_line_parsers_never_crash_on_arbitrary_text(line: str) -> None:
    unwrap_runtime(line)
    corroboration(line)
    parse_propeller_line(line)
    hit = parse_signal(LogEntry.make(0, LABELS, line))
    if hit is not None:
        # anything parse_signal accepts, Loki's line filter must have let through
        assert SIGNAL_RE.search(line) and loki_lets_through(line)


@settings(max_examples=20, deadline=None)
@given(chunk=messy_text, repeat=st.integers(1000, 20_000))
def test_line_parsers_never_crash_on_huge_lines(chunk: str, repeat: int) -> None:
    line = (chunk or "x") * repeat
    assert len(unwrap_runtime(line)) <= len(line)
    parse_signal(LogEntry.make(0, LABELS, line))
    corroboration(line)
    parse_propeller_line(line)


@FAST
@given(
    pod=st.one_of(st.text(max_size=80), st.from_regex(r"[a-z0-9][a-z0-9.-]{0,80}", fullmatch=True))
)
def test_pod_name_parser_never_crashes_and_its_candidates_regenerate_the_name(pod: str) -> None:
    parsed = parse_pod_name(pod)
    if parsed is None:
        return
    assert parsed.hashed or parsed.candidates
    _assert_candidates_regenerate(parsed.pod, parsed.generated, parsed.replica, parsed.candidates)


@FAST
@given(
    ns=st.text(max_size=60),
    template=st.text(max_size=20).map(lambda t: t + "{project}-{domain}"),
    domains=st.lists(st.text(max_size=12), max_size=5),
)
def test_namespace_parser_never_crashes_and_never_returns_a_pair_that_does_not_render(
    ns: str, template: str, domains: list[str]
) -> None:
    found = namespace_to_project_domain(ns, template, domains)
    if found is not None:
        project, domain = found
        assert domain in domains and project
        assert namespace_for(project, domain, template) == ns


# --- death-signal lines in every rendering -------------------------------------------------------


def _render(draw: st.DrawFn, number: int) -> str:
    if draw(st.booleans()):
        return str(number)  # Python >= 3.11, and every f-string
    return f"Signals.{SIGNALS[number]}"  # "%s" on Python 3.10


@st.composite
def torch_prefixes(draw: st.DrawFn) -> str:
    style = draw(st.sampled_from(["none", "glog", "basic"]))
    if style == "none":
        return ""
    if style == "basic":
        level = draw(st.sampled_from(["WARNING", "ERROR", "INFO"]))
        name = draw(st.from_regex(r"torch(\.[a-z_]{1,10}){0,5}", fullmatch=True))
        return f"{level}:{name}:"
    rank = draw(st.sampled_from(["", "[rank0]:", "[rank13]:"]))
    level = draw(st.sampled_from("VIWEC"))
    stamp = draw(st.from_regex(r"[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}", fullmatch=True))
    pid = draw(st.integers(1, 4_000_000))
    path = draw(
        st.sampled_from(
            [
                "torch/distributed/elastic/agent/server/api.py",
                "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/agent/server/api.py",
            ]
        )
    )
    lineno = draw(st.integers(1, 5000))
    tags = draw(st.sampled_from(["", " [0/0]", " [__x] [1/2]"]))
    return f"{rank}{level}{stamp} {pid} {path}:{lineno}]{tags} "


@st.composite
def python_logging_prefixes(draw: st.DrawFn, kind: str) -> str:
    """A Python logging prefix starting with a timestamp; the logger, if named, fits the kind."""
    stamp = draw(
        st.sampled_from(
            ["2026-09-10 19:45:22,123", "2026-09-10T19:45:22.123456Z", "[2026-09-10 19:45:22]"]
        )
    )
    level = draw(st.sampled_from(["WARNING", "[WARNING]", "ERROR", "WARN"]))
    if kind == "flytekit":
        logger = draw(st.sampled_from(["flytekit", "flytekit.core"]))
    else:
        logger = draw(st.from_regex(r"torch(\.[a-z_]{1,10}){0,5}", fullmatch=True))
    style = draw(st.integers(0, 3))
    if style == 0:
        return f"{stamp} {level} {logger}: "
    if style == 1:
        return f"{stamp} - {logger} - {level} - "
    if style == 2:  # the OpenTelemetry / Datadog log-correlation formats
        return f"{stamp} {level} [{logger}] [api.py:753] [trace_id=ab12 span_id=cd34] - "
    return f"{stamp} {level} " if kind != "flytekit" else f"{stamp} {level} {logger} "


trace_suffixes = lambda: st.sampled_from(  # noqa: E731
    [
        " trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7",
        " [trace_id=0 span_id=0 resource.service.name= trace_sampled=False]",
        " dd.service=train dd.env=prod dd.trace_id=1 dd.span_id=2",
    ]
)


@st.composite
def death_signal_lines(draw: st.DrawFn) -> tuple[str, str, int, str]:
    """(raw line as Loki stores it, signal name, number, kind)."""
    number = draw(st.sampled_from(sorted(SIGNALS)))
    kind = draw(st.sampled_from(["agent", "exit_barrier", "flytekit"]))
    sig = _render(draw, number)
    text_prefix = draw(st.one_of(torch_prefixes(), python_logging_prefixes(kind)))
    if kind == "agent":
        msg = f"{text_prefix}Received {sig} death signal, shutting down workers"
    elif kind == "exit_barrier":
        msg = f"{text_prefix}Got termination signal: {sig}"
    else:
        pid = draw(st.integers(1, 4_000_000))
        text = f"Elastic launch agent process terminating: Process {pid} got signal: {sig}"
        style = draw(st.sampled_from(["json", "text", "python-logging"]))
        if style == "json":
            record = {
                "asctime": "2026-11-30 06:05:00,625",
                "name": "flytekit",
                "levelname": "ERROR",
                "message": text,
            }
            if draw(st.booleans()):
                record["exc_info"] = draw(messy_text)
            msg = json.dumps(record, ensure_ascii=draw(st.booleans()))
        elif style == "text":
            msg = f"[flytekit] {text}"
        else:
            msg = draw(python_logging_prefixes(kind)) + text
    if not msg.startswith("{") and draw(st.booleans()):
        msg += draw(trace_suffixes())  # trace-correlation fields after a text line
    if draw(st.booleans()):
        msg += draw(st.sampled_from(["", " ", "\r", "\t "]))
    wrap = draw(st.sampled_from(["raw", "cri", "docker", *SHIPPERS]))
    if wrap in SHIPPERS:
        line = ship(
            wrap,
            datetime(2026, 9, 10, tzinfo=timezone.utc),
            msg,
            stream=draw(st.sampled_from(["stdout", "stderr"])),
            ns=LABELS["namespace"],
            pod=LABELS["pod"],
            container=draw(st.sampled_from(["pytorch", "c", "a-b"])),
        )
        if line.startswith("{"):  # an envelope's keys come in any order
            obj = json.loads(line)
            line = json.dumps({k: obj[k] for k in draw(st.permutations(list(obj)))})
    elif wrap == "cri":
        stream = draw(st.sampled_from(["stdout", "stderr"]))
        line = f"2026-09-10T19:45:22.123456789Z {stream} {draw(st.sampled_from('FP'))} {msg}"
    elif wrap == "docker":
        record = {"log": msg + "\n", "stream": "stderr", "time": "2026-09-10T19:45:22.1Z"}
        line = json.dumps(record, ensure_ascii=draw(st.booleans()))
    else:
        line = msg
    return line, SIGNALS[number], number, kind


@settings(max_examples=600, deadline=None)
@given(case=death_signal_lines(), ts=st.integers(0, 2**62))
def test_every_death_signal_rendering_is_matched_by_parser_and_loki_filter(
    case: tuple[str, str, int, str], ts: int
) -> None:
    line, name, number, kind = case
    hit = parse_signal(LogEntry.make(ts, LABELS, line))
    assert hit is not None, line
    assert (hit.signal, hit.number, hit.kind) == (name, number, kind)
    assert hit.at == LogEntry(ts, (), "").at
    assert hit.namespace == "proj-development" and hit.pod == LABELS["pod"]
    assert SIGNAL_RE.search(line) and loki_lets_through(line), line


# --- pod names -----------------------------------------------------------------------------------

executions = st.one_of(
    st.from_regex(r"[a-z][a-z0-9]{19}", fullmatch=True),  # flyteadmin's generated names
    st.from_regex(r"[a-z][a-z0-9-]{0,45}", fullmatch=True),  # user-named: ^[a-z][a-z\-0-9]*$
)
node_names = st.one_of(
    st.integers(0, 120).map(lambda i: f"n{i}"),
    st.integers(0, 30).map(lambda i: f"dn{i}"),
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,24}[a-z0-9])?", fullmatch=True),
)


@st.composite
def unique_node_ids(draw: st.DrawFn) -> str:
    node = unique_node_id(None, None, draw(node_names))
    for _ in range(draw(st.integers(0, 3))):
        node = unique_node_id(node, draw(st.integers(0, 12)), draw(node_names))
    return node


def _assert_candidates_regenerate(
    pod: str,
    generated: str,
    replica: tuple[str, int] | None,
    candidates: tuple[tuple[str, str, int], ...],
) -> None:
    """No candidate contradicts Flyte's naming: each regenerates the pod or its job exactly."""
    for execution, node, attempt in candidates:
        assert re.fullmatch(r"[a-z][a-z0-9-]*", execution) and len(execution) <= 63
        assert 0 < len(node) <= 20
        name = pod_name_for(execution, node, attempt)
        if name != pod:
            assert replica is not None and name == generated
            assert pod == f"{generated}-{replica[0]}-{replica[1]}"


@settings(max_examples=500, deadline=None)
@given(
    execution=executions,
    node=unique_node_ids(),
    attempt=st.integers(0, 30),
    replica=st.one_of(
        st.none(), st.tuples(st.sampled_from(["worker", "master"]), st.integers(0, 64))
    ),
)
def test_pod_name_yields_the_true_attempt_and_nothing_inconsistent(
    execution: str, node: str, attempt: int, replica: tuple[str, int] | None
) -> None:
    generated = pod_name_for(execution, node, attempt)
    pod = generated if replica is None else f"{generated}-{replica[0]}-{replica[1]}"
    parsed = parse_pod_name(pod)
    assert parsed is not None
    assert parsed.replica == replica
    assert parsed.generated == generated
    if len(f"{execution}-{node}-{attempt}") > 50:
        assert parsed.hashed and len(generated) == 8
        if replica is None:
            assert parsed.candidates == ()
    else:
        assert not parsed.hashed
        assert (execution, node, attempt) in parsed.candidates
    _assert_candidates_regenerate(pod, generated, parsed.replica, parsed.candidates)


@FAST
@given(
    parts=st.lists(
        st.one_of(st.text(min_size=1, max_size=30), st.integers(0, 10**6)), min_size=1, max_size=6
    ),
    max_length=st.integers(8, 80),
)
def test_generated_name_keeps_short_names_and_hashes_long_ones_to_8_chars(
    parts: list[str | int], max_length: int
) -> None:
    name = generated_name(parts, max_length)
    joined = "-".join(str(p) for p in parts)
    if len(joined.encode()) <= max_length:
        assert name == joined
    else:
        assert name == hash_id(joined)
        assert re.fullmatch(r"f[a-z1-6]{7}", name)


@FAST
@given(value=st.text(min_size=51, max_size=200))
def test_long_generated_name_is_the_hash_of_the_joined_parts(value: str) -> None:
    assert generated_name([value]) == hash_id(value)
    assert re.fullmatch(r"f[a-z1-6]{7}", hash_id(value))


# --- namespaces ----------------------------------------------------------------------------------

projects = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", fullmatch=True)
templates = st.sampled_from(
    [
        "{project}-{domain}",
        "{{ project }}-{{ domain }}",
        "{domain}-{project}",
        "flyte-{project}-{domain}",
        "{project}--{domain}-ns",
        "{project}{domain}",
    ]
)


@FAST
@given(project=projects, domain=st.sampled_from(DEFAULT_DOMAINS), template=templates)
def test_namespace_round_trips_for_dashed_projects(
    project: str, domain: str, template: str
) -> None:
    ns = namespace_for(project, domain, template)
    assert namespace_to_project_domain(ns, template, DEFAULT_DOMAINS) == (project, domain)


words = st.from_regex(r"[a-z]([a-z-]{0,8}[a-z])?", fullmatch=True)


@st.composite
def overlapping_domains(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """(project, domain, domains) where another domain often swallows the project's tail."""
    domain, word = draw(words), draw(words)
    extra = draw(st.lists(words, max_size=2))
    domains = list(dict.fromkeys([domain, f"{word}-{domain}", *extra]))
    base = draw(projects)
    project = draw(st.sampled_from([base, f"{base}-{word}"]))
    return project, domain, draw(st.permutations(domains))


@FAST
@given(case=overlapping_domains(), template=templates)
def test_namespace_is_never_attributed_to_another_project(
    case: tuple[str, str, list[str]], template: str
) -> None:
    project, domain, domains = case
    ns = namespace_for(project, domain, template)
    found = namespace_to_project_domain(ns, template, domains)
    # overlapping domains (`dev`, `x-dev`) can make a namespace ambiguous: then None, never a guess
    assert found in {(project, domain), None}
    rivals = [d for d in domains if d != domain and namespace_to_project_domain(ns, template, [d])]
    assert (found is None) == bool(rivals)
