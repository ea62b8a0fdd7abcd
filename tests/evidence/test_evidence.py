"""Example tests for forensics.evidence: every log-line variant, pod names, namespaces."""

from __future__ import annotations

import json
import logging
import re
import signal
from datetime import datetime, timezone

import pytest

from forensics.evidence.envelopes import unwrap_runtime
from forensics.evidence.flyte_names import (
    PodName,
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
from forensics.model import LogEntry, to_ns

SIGNAL_AT = datetime(2026, 9, 10, 19, 45, 22, 123456, tzinfo=timezone.utc)
TS_NS = to_ns(SIGNAL_AT) + 789  # Loki keeps nanoseconds
LABELS = {"namespace": "llm-fine-tuning-development", "pod": "f8d2779abac0140fea1e-n1-0-worker-0"}

GLOG = "W0910 19:45:22.199000 10814 torch/distributed/elastic/agent/server/api.py:753] "
GLOG_BARRIER = "W0910 19:45:22.199000 10814 torch/distributed/elastic/agent/server/api.py:1005] "
BASIC = "WARNING:torch.distributed.elastic.agent.server.api:"
VERIFIED = (
    "W1130 05:57:21.199000 10814 torch/distributed/elastic/agent/server/api.py:753] "
    "Received 15 death signal, shutting down workers"
)


def cri(msg: str, stream: str = "stderr", tag: str = "F") -> str:
    return f"2026-09-10T19:45:22.123456789Z {stream} {tag} {msg}"


def docker(msg: str) -> str:
    return json.dumps({"log": msg + "\n", "stream": "stderr", "time": "2026-09-10T19:45:22.1Z"})


def flytekit_json(message: str, name: str = "flytekit", level: str = "ERROR") -> str:
    return json.dumps(
        {"asctime": "2026-11-30 06:05:00,625", "name": name, "levelname": level, "message": message}
    )


def entry(line: str, labels: dict[str, str] | None = None) -> LogEntry:
    return LogEntry.make(TS_NS, LABELS if labels is None else labels, line)


FLYTEKIT_MSG = "Elastic launch agent process terminating: Process 107 got signal: 15"
PROPELLER_LINE = (
    '{"json":{"exec_id":"f8d2779abac0140fea1e","node":"n0/dn1","ns":"proj-development",'
    '"routine":"worker-3","src":"plugin_manager.go:327","tasktype":"python-task",'
    '"wf":"proj:development:wf.train"},"level":"info",'
    '"msg":"Plugin [container] returned no outputReader, assuming file based outputs",'
    '"ts":"2024-05-01T12:34:56Z"}'
)

# (line as Loki returns it, signal name, number, kind)
SIGNAL_LINES = [
    pytest.param(VERIFIED, "SIGTERM", 15, "agent", id="verified-torch-2.13-py3.11"),
    pytest.param(
        GLOG + "Received Signals.SIGTERM death signal, shutting down workers",
        "SIGTERM",
        15,
        "agent",
        id="glog-py3.10",
    ),
    pytest.param(
        GLOG + "Received 2 death signal, shutting down workers",
        "SIGINT",
        2,
        "agent",
        id="glog-sigint",
    ),
    pytest.param(
        GLOG + "Received 1 death signal, shutting down workers",
        "SIGHUP",
        1,
        "agent",
        id="glog-sighup",
    ),
    pytest.param(
        GLOG + "Received Signals.SIGQUIT death signal, shutting down workers",
        "SIGQUIT",
        3,
        "agent",
        id="glog-sigquit-py3.10",
    ),
    pytest.param(
        "[rank0]:" + GLOG + "Received 15 death signal, shutting down workers",
        "SIGTERM",
        15,
        "agent",
        id="glog-rank-prefix",
    ),
    pytest.param(
        "W0910 19:45:22.199000 1 /opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/"
        "agent/server/api.py:719] Received Signals.SIGTERM death signal, shutting down workers",
        "SIGTERM",
        15,
        "agent",
        id="glog-absolute-path-older-line",
    ),
    pytest.param(
        BASIC + "Received 15 death signal, shutting down workers",
        "SIGTERM",
        15,
        "agent",
        id="python-logging",
    ),
    pytest.param(
        BASIC + "Received Signals.SIGINT death signal, shutting down workers",
        "SIGINT",
        2,
        "agent",
        id="python-logging-py3.10",
    ),
    pytest.param(
        "Received 3 death signal, shutting down workers", "SIGQUIT", 3, "agent", id="bare"
    ),
    pytest.param(cri(VERIFIED), "SIGTERM", 15, "agent", id="cri-wrapped"),
    pytest.param(cri(VERIFIED, stream="stdout", tag="P"), "SIGTERM", 15, "agent", id="cri-partial"),
    pytest.param(
        docker(GLOG + "Received Signals.SIGHUP death signal, shutting down workers"),
        "SIGHUP",
        1,
        "agent",
        id="docker-json-wrapped",
    ),
    pytest.param(
        docker(BASIC + "Received 2 death signal, shutting down workers"),
        "SIGINT",
        2,
        "agent",
        id="docker-basic",
    ),
    pytest.param(VERIFIED + "\r", "SIGTERM", 15, "agent", id="trailing-carriage-return"),
    pytest.param(
        GLOG_BARRIER + "Got termination signal: 15",
        "SIGTERM",
        15,
        "exit_barrier",
        id="barrier-glog",
    ),
    pytest.param(
        BASIC + "Got termination signal: Signals.SIGINT",
        "SIGINT",
        2,
        "exit_barrier",
        id="barrier-py3.10",
    ),
    pytest.param(
        cri("Got termination signal: 1"), "SIGHUP", 1, "exit_barrier", id="barrier-cri-bare"
    ),
    pytest.param(flytekit_json(FLYTEKIT_MSG), "SIGTERM", 15, "flytekit", id="flytekit-json"),
    pytest.param(
        cri(flytekit_json(FLYTEKIT_MSG)), "SIGTERM", 15, "flytekit", id="flytekit-json-cri"
    ),
    pytest.param(
        docker(flytekit_json(FLYTEKIT_MSG)), "SIGTERM", 15, "flytekit", id="flytekit-json-docker"
    ),
    pytest.param(
        flytekit_json("Elastic launch agent process terminating: Process 9 got signal: 2"),
        "SIGINT",
        2,
        "flytekit",
        id="flytekit-json-sigint",
    ),
    pytest.param(
        flytekit_json(
            "Elastic launch agent process terminating: Process 9 got signal: Signals.SIGQUIT"
        ),
        "SIGQUIT",
        3,
        "flytekit",
        id="flytekit-json-signal-name",
    ),
    pytest.param(
        "[flytekit] " + FLYTEKIT_MSG, "SIGTERM", 15, "flytekit", id="flytekit-text-format"
    ),
    pytest.param(
        json.dumps(
            {
                "asctime": "2026-11-30 06:05:00,625",
                "name": "flytekit",
                "levelname": "ERROR",
                "message": FLYTEKIT_MSG,
                "exc_info": "Traceback (most recent call last):\n" + "  frame\n" * 5000,
            }
        )[:20_000],
        "SIGTERM",
        15,
        "flytekit",
        id="flytekit-json-truncated-in-traceback",
    ),
]


# Shipper envelopes (docs/upstream.md), as the sandbox's encoders build them from each shipper's code.
_SHIP_AT = datetime(2026, 9, 10, 19, 45, 22, tzinfo=timezone.utc)


def shipped(shipper: str, msg: str) -> str:
    from forensics.sandbox.shippers import ship

    return ship(
        shipper, _SHIP_AT, msg, stream="stderr", ns=LABELS["namespace"], pod="p", container="c"
    )


OTEL_FORMAT = (  # opentelemetry-instrumentation-logging's DEFAULT_LOGGING_FORMAT
    "2026-09-10 19:45:22,123 WARNING [torch.distributed.elastic.agent.server.api] [api.py:753] "
    "[trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7 "
    "resource.service.name=train trace_sampled=True] - "
)
SHIPPED_LINES = [
    *(
        pytest.param(shipped(s, VERIFIED), "SIGTERM", 15, "agent", id=f"{s}-agent")
        for s in ("fluent-bit", "otel", "vector", "alloy", "alloy-syslog")
    ),
    *(
        pytest.param(
            shipped(s, flytekit_json(FLYTEKIT_MSG)), "SIGTERM", 15, "flytekit", id=f"{s}-flytekit"
        )
        for s in ("fluent-bit", "otel", "vector", "alloy", "alloy-syslog")
    ),
    pytest.param(
        json.dumps({"_p": "F", "log": docker(VERIFIED), "time": "t", "stream": "stderr"}),
        "SIGTERM",
        15,
        "agent",
        id="fluent-bit-without-parser-keeps-docker-json",
    ),
    pytest.param(
        json.dumps({"body": {"log": VERIFIED, "stream": "stderr"}, "resources": {"a": "b"}}),
        "SIGTERM",
        15,
        "agent",
        id="otel-map-body",
    ),
    pytest.param(
        json.dumps(
            {
                "log": "x",
                "log_processed": {
                    "name": "flytekit",
                    "levelname": "ERROR",
                    "message": FLYTEKIT_MSG,
                },
            }
        ),
        "SIGTERM",
        15,
        "flytekit",
        id="fluent-bit-merge-log-key",
    ),
    pytest.param(
        json.dumps({"stream": "stderr", "log": flytekit_json(FLYTEKIT_MSG) + "x" * 70_000})[
            :60_000
        ],
        "SIGTERM",
        15,
        "flytekit",
        id="fluent-bit-cut-short",
    ),
    pytest.param(
        OTEL_FORMAT + "Received 15 death signal, shutting down workers",
        "SIGTERM",
        15,
        "agent",
        id="python-logging-otel-correlation-prefix",
    ),
    pytest.param(
        "2026-09-10 19:45:22,123 WARNING torch.distributed.elastic.agent.server.api: "
        "Received Signals.SIGTERM death signal, shutting down workers",
        "SIGTERM",
        15,
        "agent",
        id="python-logging-asctime-level-name",
    ),
    pytest.param(
        "[2026-09-10 19:45:22,123] [WARNING] Received 2 death signal, shutting down workers",
        "SIGINT",
        2,
        "agent",
        id="python-logging-bracketed-without-logger",
    ),
    pytest.param(
        "2026-09-10 19:45:23,000 - flytekit - ERROR - " + FLYTEKIT_MSG,
        "SIGTERM",
        15,
        "flytekit",
        id="python-logging-flytekit-logger",
    ),
    pytest.param(
        "<12>Sep 10 19:45:22 ip-10-0-12-34 train[107]: " + VERIFIED,
        "SIGTERM",
        15,
        "agent",
        id="syslog-rfc3164",
    ),
    pytest.param(
        VERIFIED + " trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7",
        "SIGTERM",
        15,
        "agent",
        id="trace-correlation-suffix",
    ),
    pytest.param(
        GLOG_BARRIER + "Got termination signal: 15 [dd.service=train dd.env=prod dd.version=1 "
        "dd.trace_id=123 dd.span_id=456]",
        "SIGTERM",
        15,
        "exit_barrier",
        id="datadog-bracketed-suffix",
    ),
]
SIGNAL_LINES += SHIPPED_LINES


@pytest.mark.parametrize(("line", "name", "number", "kind"), SIGNAL_LINES)
def test_death_signal_line_is_recognised_in_every_form(
    line: str, name: str, number: int, kind: str
) -> None:
    hit = parse_signal(entry(line))
    assert hit is not None
    assert (hit.signal, hit.number, hit.kind) == (name, number, kind)
    assert hit.namespace == LABELS["namespace"]
    assert hit.pod == LABELS["pod"]
    assert re.search(SIGNAL_LINE_REGEX, line), "Loki's line filter would drop this line"


def test_signal_time_is_lokis_timestamp_not_the_time_in_the_line() -> None:
    hit = parse_signal(entry(VERIFIED))  # the line itself says 11-30 05:57:21
    assert hit is not None
    assert hit.at == SIGNAL_AT


def test_hit_keeps_the_readable_line_without_runtime_wrapping() -> None:
    hit = parse_signal(entry(docker(VERIFIED)))
    assert hit is not None
    assert hit.line == VERIFIED


def test_otel_style_labels_are_read_through_the_parameters() -> None:
    labels = {
        "k8s_namespace_name": "proj-production",
        "k8s_pod_name": "abcd1234abcd1234abcd-n0-1",
        "k8s_container_name": "abcd1234abcd1234abcd-n0-1",
    }
    line = entry(VERIFIED, labels)
    assert parse_signal(line) is None  # default label names are absent: cannot attribute
    hit = parse_signal(
        line,
        namespace_label="k8s_namespace_name",
        pod_label="k8s_pod_name",
        container_label="k8s_container_name",
    )
    assert hit is not None
    assert (hit.namespace, hit.pod, hit.container) == (
        "proj-production",
        "abcd1234abcd1234abcd-n0-1",
        "abcd1234abcd1234abcd-n0-1",
    )


def test_container_label_is_optional() -> None:
    hit = parse_signal(entry(VERIFIED))
    assert hit is not None and hit.container is None


NOT_SIGNALS = [
    pytest.param(
        "print: Received 15 death signal, shutting down workers", id="user-print-with-prefix"
    ),
    pytest.param("Received 15 death signal, shutting down workers (simulated)", id="trailing-text"),
    pytest.param("We got a death signal and shut down workers", id="mentions-death-signal"),
    pytest.param("Received 15 death signal", id="truncated-phrase"),
    pytest.param("Received fifteen death signal, shutting down workers", id="not-a-signal-token"),
    pytest.param("Received 9 death signal, shutting down workers", id="sigkill-cannot-be-handled"),
    pytest.param("Received 99 death signal, shutting down workers", id="no-such-signal"),
    pytest.param("Received 015 death signal, shutting down workers", id="leading-zero"),
    pytest.param("Received Signals.SIGFOO death signal, shutting down workers", id="unknown-name"),
    pytest.param("Received  15 death signal, shutting down workers", id="double-space"),
    pytest.param(GLOG + "Received death signal, shutting down workers", id="missing-signal"),
    pytest.param("W0910 Received 15 death signal, shutting down workers", id="mangled-glog-prefix"),
    pytest.param(
        flytekit_json("Received 15 death signal, shutting down workers", name="user_space"),
        id="user-space-json-logger",
    ),
    pytest.param(flytekit_json(FLYTEKIT_MSG, name="user_space"), id="user-space-flytekit-phrase"),
    pytest.param("[user_space] " + FLYTEKIT_MSG, id="user-space-text-format"),
    pytest.param(
        "WARNING:root:Received 15 death signal, shutting down workers", id="not-a-torch-logger"
    ),
    pytest.param("Got termination signal: 15 again", id="barrier-trailing-text"),
    pytest.param("main: Got termination signal: 15", id="barrier-foreign-prefix"),
    pytest.param(
        GLOG + "Closing process 10857 via signal SIGTERM", id="closing-process-is-corroboration"
    ),
    pytest.param(
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 107 got signal: 15",
        id="traceback-line-is-corroboration",
    ),
    pytest.param(
        flytekit_json(
            "User-scoped IgnoreOutputs received! Outputs.pb will not be uploaded. reason x!!",
            level="WARNING",
        ),
        id="ignore-outputs-is-corroboration",
    ),
    pytest.param(
        shipped("vector", flytekit_json(FLYTEKIT_MSG, name="user_space")),
        id="user-space-in-envelope",
    ),
    pytest.param(
        "2026-09-10 19:45:22,123 - root - WARNING - Received 15 death signal, shutting down workers",
        id="python-logging-root-logger",
    ),
    pytest.param(
        "2026-09-10 19:45:22,123 INFO myapp.train: Received 15 death signal, shutting down workers",
        id="python-logging-foreign-logger",
    ),
    pytest.param(VERIFIED + " step=100 loss=0.1", id="suffix-without-trace-fields"),
    pytest.param(
        json.dumps({"body": "print: Received 15 death signal, shutting down workers"}),
        id="envelope-of-a-user-print",
    ),
    pytest.param(
        '{"body": "Received 15 death\\u0020signal, shutting down workers"}',
        id="escape-that-loki-filter-cannot-see",
    ),
    pytest.param("", id="empty"),
    pytest.param('{"log": "Received 15 death', id="truncated-docker-json"),
    pytest.param("\ufffd\ufffdReceived 15 death signal\ufffd", id="replacement-characters"),
]


@pytest.mark.parametrize("line", NOT_SIGNALS)
def test_near_misses_and_user_prints_are_not_death_signals(line: str) -> None:
    assert parse_signal(entry(line)) is None


def test_line_without_pod_label_is_not_attributed() -> None:
    assert parse_signal(entry(VERIFIED, {"namespace": "proj-development"})) is None


def test_signal_line_in_a_multiline_entry_is_found() -> None:
    text = "Traceback (most recent call last):\n" + VERIFIED + "\nsomething else"
    hit = parse_signal(entry(text))
    assert hit is not None and hit.line == VERIFIED


def test_signal_line_regex_is_re2_compatible() -> None:
    # RE2 has no lookarounds, backreferences, possessive or atomic groups.
    for construct in ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?P=", "*+", "++", "?+"):
        assert construct not in SIGNAL_LINE_REGEX
    assert not re.search(r"\\[1-9]", SIGNAL_LINE_REGEX)
    re.compile(SIGNAL_LINE_REGEX)


# --- real renderings: torch's own formatter and exception, flytekit's own JSON formatter ---


def _torch_signal() -> tuple[Exception, int]:
    from torch.distributed.elastic.multiprocessing import api as mp

    try:
        mp._terminate_process_handler(signal.SIGTERM, None)
    except mp.SignalException as e:
        return e, e.sigval
    raise AssertionError("torch's handler did not raise")


def _torch_record(msg: str, lineno: int, *args: object) -> logging.LogRecord:
    import torch.distributed.elastic.agent.server.api as agent_api

    return logging.LogRecord(
        agent_api.logger.name, logging.WARNING, agent_api.__file__, lineno, msg, args, None
    )


def test_torch_agent_line_as_torch_formats_it_is_recognised() -> None:
    from torch._logging._internal import TorchLogsFormatter

    _, sigval = _torch_signal()
    record = _torch_record("Received %s death signal, shutting down workers", 753, sigval)
    for formatter in (TorchLogsFormatter(), logging.Formatter(logging.BASIC_FORMAT)):
        line = formatter.format(record)
        hit = parse_signal(entry(cri(line)))
        assert hit is not None, line
        assert (hit.signal, hit.number, hit.kind) == ("SIGTERM", 15, "agent")
        assert re.search(SIGNAL_LINE_REGEX, line)


def test_torch_exit_barrier_line_as_torch_formats_it_is_recognised() -> None:
    from torch._logging._internal import TorchLogsFormatter

    _, sigval = _torch_signal()
    line = TorchLogsFormatter().format(_torch_record("Got termination signal: %s", 1005, sigval))
    hit = parse_signal(entry(line))
    assert hit is not None and hit.kind == "exit_barrier" and hit.number == 15


def test_flytekit_plugin_line_as_flytekit_formats_it_is_recognised() -> None:
    from flytekit.loggers import jsonlogger

    exc, _ = _torch_signal()
    formatter = jsonlogger.JsonFormatter(fmt="%(asctime)s %(name)s %(levelname)s %(message)s")
    record = logging.LogRecord(
        "flytekit",
        logging.ERROR,
        __file__,
        488,
        f"Elastic launch agent process terminating: {exc}",
        (),
        (type(exc), exc, exc.__traceback__),
    )
    line = formatter.format(record)
    hit = parse_signal(entry(docker(line)))
    assert hit is not None
    assert (hit.signal, hit.number, hit.kind) == ("SIGTERM", 15, "flytekit")
    assert re.search(SIGNAL_LINE_REGEX, docker(line))


# --- unwrapping ---


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param(cri("hello world"), "hello world", id="cri"),
        pytest.param(cri("part of a long li", tag="P"), "part of a long li", id="cri-partial"),
        pytest.param("2026-09-10T19:45:22.1+02:00 stdout F x", "x", id="cri-offset-time"),
        pytest.param("2026-09-10T19:45:22.1Z stdout F", "", id="cri-empty-message"),
        pytest.param(docker('say "hi" \\ there'), 'say "hi" \\ there', id="docker-escapes"),
        pytest.param('{"log":"cut here \\"quo', 'cut here "quo', id="docker-truncated"),
        pytest.param(
            '{"log":"cut mid escape \\u00', "cut mid escape ", id="docker-truncated-escape"
        ),
        pytest.param(flytekit_json("the message"), "the message", id="flytekit-json"),
        pytest.param(docker(flytekit_json("inner")), "inner", id="docker-then-flytekit-json"),
        pytest.param(
            '{"asctime": "2026", "name": "flytekit", "levelname": "ERROR", "message": "cut',
            "cut",
            id="flytekit-json-truncated",
        ),
        pytest.param(
            '{"level":"info","msg":"propeller"}',
            '{"level":"info","msg":"propeller"}',
            id="not-python-json",
        ),
        pytest.param(shipped("fluent-bit", "hello"), "hello", id="fluent-bit"),
        pytest.param(shipped("otel", "a <b> & c"), "a <b> & c", id="otel-go-escapes"),
        pytest.param(shipped("vector", "hello"), "hello", id="vector"),
        pytest.param(shipped("alloy-syslog", "hello"), "hello", id="syslog-5424"),
        pytest.param(shipped("vector", flytekit_json("inner")), "inner", id="vector-then-flytekit"),
        pytest.param(
            shipped("fluent-bit", PROPELLER_LINE), PROPELLER_LINE, id="propeller-kept-whole"
        ),
        pytest.param("plain line", "plain line", id="raw"),
        pytest.param("{not json", "{not json", id="broken-json"),
    ],
)
def test_runtime_wrapping_is_stripped(line: str, message: str) -> None:
    assert unwrap_runtime(line) == message


def test_absurdly_long_line_is_capped_not_crashed() -> None:
    huge = docker("x" * 5_000_000)
    out = unwrap_runtime(huge)
    assert set(out) == {"x"} and len(out) < 100_000


# --- corroboration and propeller ---


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        pytest.param(
            flytekit_json(
                "User-scoped IgnoreOutputs received! Outputs.pb will not be uploaded. "
                "reason USER:RuntimeError: error=, cause=!!",
                level="WARNING",
            ),
            "ignore_outputs",
            id="ignore-outputs",
        ),
        pytest.param(
            "W1130 05:57:21.201000 10814 torch/distributed/elastic/multiprocessing/api.py:871] "
            "Closing process 10857 via signal SIGTERM",
            "closing_process",
            id="closing-process",
        ),
        pytest.param(
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 107 got signal: 15",
            "signal_exception",
            id="traceback",
        ),
        pytest.param(PROPELLER_LINE, "propeller_no_output_reader", id="propeller-json"),
        pytest.param(cri(PROPELLER_LINE), "propeller_no_output_reader", id="propeller-cri"),
        pytest.param(VERIFIED, None, id="signal-line-is-not-corroboration"),
        pytest.param("Outputs.pb will not be uploaded", None, id="partial-phrase"),
        pytest.param(
            '{"level":"info","msg":"Transitioning to Success"}', None, id="other-propeller"
        ),
    ],
)
def test_corroborating_lines_are_classified(line: str, kind: str | None) -> None:
    assert corroboration(line) == kind


@pytest.mark.parametrize("shipper", ["fluent-bit", "otel", "vector", "alloy", "alloy-syslog"])
def test_propeller_line_is_read_inside_a_shippers_envelope(shipper: str) -> None:
    ev = parse_propeller_line(shipped(shipper, PROPELLER_LINE))
    assert ev is not None and (ev.exec_id, ev.node, ev.plugin) == (
        "f8d2779abac0140fea1e",
        "n0/dn1",
        "container",
    )


def test_propeller_line_fields_are_extracted() -> None:
    event = parse_propeller_line(PROPELLER_LINE)
    assert event is not None
    assert event.exec_id == "f8d2779abac0140fea1e"
    assert event.ns == "proj-development"
    assert event.node == "n0/dn1"
    assert event.node_path == ("n0", "dn1")
    assert event.level == "info"
    assert event.plugin == "container"
    assert event.wf == "proj:development:wf.train"
    assert event.ts == datetime(2024, 5, 1, 12, 34, 56, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(PROPELLER_LINE[:80], id="truncated"),
        pytest.param("Plugin [container] returned no outputReader", id="not-json"),
        pytest.param('{"level":"info"}', id="no-msg"),
        pytest.param("[1, 2]", id="json-array"),
    ],
)
def test_malformed_propeller_lines_give_nothing(line: str) -> None:
    assert parse_propeller_line(line) is None


def test_propeller_line_with_bad_timestamp_keeps_the_event() -> None:
    event = parse_propeller_line('{"level":"warning","msg":"m","ts":"yesterday"}')
    assert event is not None and event.ts is None and event.node_path == ()


# --- generated names: values from flyteplugins' and flytepropeller's own tests ---


@pytest.mark.parametrize(
    ("parts", "max_length", "expected"),
    [
        # encoding/encoder_test.go TestFixedLengthUniqueID / TestFixedLengthUniqueIDForParts
        (["x"], 5, "x"),
        (["xxxxx"], 10, "xxxxx"),
        (["x" * 24], 20, "fuaa3aji"),
        (["x", "y", "z"], 10, "x-y-z"),
        (["x"], 2, "x"),
        (["x", "y", "z", "m", "n", "y", "z", "m", "n", "y", "z", "m", "n"], 15, "fe63sz6y"),
        # task/taskexec_context_test.go
        (["name", "n1", 1], 50, "name-n1-1"),
        (["name", "n1", 1], 8, "fpmmhh6q"),
        (["name", "n1", 0], 8, "fpqmhlei"),
        (["name", "n1", 0], 100, "name-n1-0"),
        (["name", "n0-2-n1", 1], 50, "name-n0-2-n1-1"),
    ],
)
def test_generated_name_matches_upstream_values(
    parts: list[str | int], max_length: int, expected: str
) -> None:
    assert generated_name(parts, max_length) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("xx", "flfryc2i"), ("xxxxxx", "fufiti6i"), ("x-y", "fz2jizji"), ("x-y-z", "fxzsoqrq")],
)
def test_hash_id_matches_upstream_values_of_error_cases(value: str, expected: str) -> None:
    assert hash_id(value) == expected


@pytest.mark.parametrize(("parts", "max_length"), [(["xx"], 1), (["x", "y", "z"], 4), (["n1"], 0)])
def test_generated_name_refuses_a_max_length_below_the_hash_size(
    parts: list[str], max_length: int
) -> None:
    with pytest.raises(ValueError, match="too small"):
        generated_name(parts, max_length)


def test_empty_leading_parts_add_no_separator() -> None:
    assert generated_name(["", "", "n0"]) == "n0"
    assert generated_name(["a", "", "b"]) == "a--b"


def test_unique_node_id_of_nested_and_top_level_nodes() -> None:
    assert unique_node_id("n0", 2, "n1") == "n0-2-n1"  # propeller's WithParentInfo test
    assert unique_node_id("n0", 0, "dn1") == "n0-0-dn1"
    assert unique_node_id(None, None, "n0") == "n0"
    long_id = unique_node_id("n0-0-dn10-12-dn123", 3, "dn7")
    assert long_id == hash_id("n0-0-dn10-12-dn123-3-dn7") and len(long_id) == 8


def test_pod_name_for_long_names_is_hashed() -> None:
    assert pod_name_for("f8d2779abac0140fea1e", "n1", 0) == "f8d2779abac0140fea1e-n1-0"
    long_exec = "a-user-named-execution-that-is-quite-long"
    assert pod_name_for(long_exec, "n0-0-dn1", 3) == hash_id(f"{long_exec}-n0-0-dn1-3")


# --- pod names ---


def test_top_level_pod_splits_into_its_attempt() -> None:
    parsed = parse_pod_name("f8d2779abac0140fea1e-n1-0")
    assert parsed == PodName(
        "f8d2779abac0140fea1e-n1-0",
        "f8d2779abac0140fea1e-n1-0",
        (("f8d2779abac0140fea1e", "n1", 0),),
        None,
        False,
    )


def test_retry_attempt_is_read_from_the_last_part() -> None:
    parsed = parse_pod_name("f8d2779abac0140fea1e-n3-12")
    assert parsed is not None and parsed.candidates[0] == ("f8d2779abac0140fea1e", "n3", 12)


def test_nested_node_id_keeps_its_dashes() -> None:
    parsed = parse_pod_name("abcdefghij0123456789-n0-0-dn1-0")
    assert parsed is not None
    assert parsed.candidates[0] == ("abcdefghij0123456789", "n0-0-dn1", 0)


def test_flyte_test_data_pod_with_dashed_node_name() -> None:
    parsed = parse_pod_name("fdf98e4ed2b524dc3bf7-get-flyte-id-task-0")
    assert parsed is not None
    assert parsed.candidates[0] == ("fdf98e4ed2b524dc3bf7", "get-flyte-id-task", 0)


def test_pytorchjob_worker_pod_from_flyte_3967() -> None:
    parsed = parse_pod_name("f8d2779abac0140fea1e-n1-0-worker-0")
    assert parsed is not None
    assert parsed.replica == ("worker", 0)
    assert parsed.generated == "f8d2779abac0140fea1e-n1-0"
    assert parsed.candidates[0] == ("f8d2779abac0140fea1e", "n1", 0)


def test_pytorchjob_master_pod() -> None:
    parsed = parse_pod_name("f8d2779abac0140fea1e-n1-2-master-0")
    assert parsed is not None
    assert parsed.replica == ("master", 0)
    assert parsed.candidates[0] == ("f8d2779abac0140fea1e", "n1", 2)


def test_user_named_execution_with_dashes_offers_every_consistent_split() -> None:
    parsed = parse_pod_name("nightly-train-2026-n0-0")
    assert parsed is not None
    assert parsed.candidates[0] == ("nightly-train-2026", "n0", 0)
    assert set(parsed.candidates) == {
        ("nightly-train-2026", "n0", 0),
        ("nightly-train", "2026-n0", 0),
        ("nightly", "train-2026-n0", 0),
    }
    for execution, node, attempt in parsed.candidates:
        assert pod_name_for(execution, node, attempt) == parsed.pod


def test_hashed_pod_cannot_be_split() -> None:
    name = pod_name_for("a-user-named-execution-that-is-quite-long", "n0-0-dn1", 3)
    parsed = parse_pod_name(name)
    assert parsed is not None
    assert parsed.hashed and parsed.candidates == () and parsed.replica is None


def test_hashed_pytorchjob_worker_is_flagged_hashed() -> None:
    job = pod_name_for("a-user-named-execution-that-is-quite-long-indeed", "n0", 0)
    assert len(job) == 8
    parsed = parse_pod_name(f"{job}-worker-3")
    assert parsed is not None
    assert parsed.hashed and parsed.replica == ("worker", 3) and parsed.generated == job
    # read as a plain pod the name would be execution `job`, node `worker`: kept, but last
    assert parsed.candidates == ((job, "worker", 3),)


def test_hashed_nested_node_id_inside_a_pod_name() -> None:
    node = unique_node_id("n0-0-dn10-12-dn123", 3, "dn7")
    parsed = parse_pod_name(f"abcdefghij0123456789-{node}-1")
    assert parsed is not None and parsed.candidates[0] == ("abcdefghij0123456789", node, 1)


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param("flytepropeller-5d8f7b9c4-x2x9z", id="not-a-task-pod"),
        pytest.param("abcdefghij0123456789-n0-01", id="attempt-with-leading-zero"),
        pytest.param("abcdefghij0123456789-N0-0", id="uppercase"),
        pytest.param("0abc-n0-0", id="execution-starting-with-digit"),
        pytest.param("abc-" + "n" * 21 + "-0", id="node-id-longer-than-20"),
        pytest.param("a" * 30 + "-" + "n" * 19 + "-0", id="longer-than-50-would-be-hashed"),
        pytest.param("", id="empty"),
        pytest.param("x" * 300, id="too-long"),
    ],
)
def test_names_that_no_flyte_attempt_produces_are_rejected(pod: str) -> None:
    assert parse_pod_name(pod) is None


# --- namespaces ---


@pytest.mark.parametrize(
    ("ns", "template", "domains", "expected"),
    [
        ("proj-development", "{project}-{domain}", None, ("proj", "development")),
        (
            "llm-fine-tuning-development",
            "{project}-{domain}",
            None,
            ("llm-fine-tuning", "development"),
        ),
        ("a-b-c-production", "{project}-{domain}", None, ("a-b-c", "production")),
        ("staging-staging", "{project}-{domain}", None, ("staging", "staging")),
        ("flyte-dev-ml-team", "flyte-{domain}-{project}", ("dev", "prod"), ("ml-team", "dev")),
        ("ml-team-prod", "{{ project }}-{{ domain }}", ("dev", "prod"), ("ml-team", "prod")),
        ("ml-team", "{project}", ("dev",), None),  # project-only template: domain unknowable
        ("proj-qa", "{project}-{domain}", None, None),  # unknown domain
        ("development", "{project}-{domain}", None, None),  # empty project
        ("a-x-dev", "{project}-{domain}", ("dev", "x-dev"), None),  # ambiguous: never guess
        ("a-b-dev", "{project}-{domain}", ("dev", "x-dev"), ("a-b", "dev")),
        ("p-dev-p", "{project}-{domain}-{project}", ("dev",), ("p", "dev")),
        ("p-dev-q", "{project}-{domain}-{project}", ("dev",), None),
    ],
)
def test_namespace_maps_to_project_and_domain(
    ns: str, template: str, domains: tuple[str, ...] | None, expected: tuple[str, str] | None
) -> None:
    if domains is None:
        assert namespace_to_project_domain(ns, template) == expected
    else:
        assert namespace_to_project_domain(ns, template, domains) == expected


def test_namespace_for_renders_ours_and_flyteadmins_templates() -> None:
    assert namespace_for("llm-fine-tuning", "development") == "llm-fine-tuning-development"
    assert namespace_for("p", "dev", "{{ project }}-{{ domain }}") == "p-dev"
    assert namespace_for("p", "dev", "{{ org }}{{ project }}-{{ domain }}") == "p-dev"
    assert namespace_for("p", "dev", "{domain}.{project}.{domain}") == "dev.p.dev"
    # A value is never read as a placeholder (the library takes any string as a project).
    assert namespace_for("{domain}", "dev") == "{domain}-dev"
    assert namespace_for("p", "{project}") == "p-{project}"


@pytest.mark.parametrize(
    "line",
    [
        '{"a":' * 5000 + '"' + VERIFIED + '"' + "}" * 5000,
        '{"log":' * 3 + '{"level":"x","msg":"y","a":' + "[" * 5000 + "]" * 5000 + "}}}}",
        '{"a":' * 5000,
    ],
    ids=["nested-object", "nested-array-in-logrus", "cut-nested"],
)
def test_json_nested_deeper_than_any_log_record_is_read_as_text_not_a_crash(line: str) -> None:
    assert parse_signal(entry(line)) is None
    assert parse_propeller_line(line) is None
    corroboration(line)
    unwrap_runtime(line)
