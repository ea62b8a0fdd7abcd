"""Kubernetes events as evidence, pure (docs/upstream.md "Kubernetes events and disruption
conditions"): each collector's line as its writer produces it (forensics/sandbox/k8s_events.py),
Admin's reasons by message, and the verdict a disruption gives (docs/verdicts.md)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from support.cli import run

from forensics.detect import Cleared, Verdict, decide
from forensics.evidence.k8s_events import (
    event_line_matched,
    parse_event,
    read_event,
    reason_of_message,
)
from forensics.model import (
    AttemptRecord,
    AttemptRef,
    Disruption,
    ExecutionRecord,
    ExecutionRef,
    LogEntry,
    ObjectCheck,
    SignalHit,
)
from forensics.sandbox.k8s_events import (
    FORMATS,
    K8sEvent,
    autoscaler_scale_down,
    event_line,
    karpenter_disrupted,
    karpenter_evicted,
    kubelet_killing,
    node_spot_interrupted,
    scheduler_preempted,
    taint_eviction,
)

UTC = timezone.utc
AT = datetime(2026, 10, 2, 3, 0, 0, tzinfo=UTC)
NS, POD = "gs1-production", "q1w5e9r3t7y1u5i9o3p7-n0-0"


def _entry(ev: K8sEvent, fmt: str) -> LogEntry:
    line = event_line(ev, fmt)
    return LogEntry.make(line.ts_ns, line.labels, line.line)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "ev, reason, initiator",
    [
        (karpenter_disrupted(NS, POD, AT, AT + timedelta(minutes=2)), "Disrupted", "karpenter"),
        (karpenter_evicted(NS, POD, AT), "Evicted", "karpenter"),
        (karpenter_evicted(NS, POD, AT, None), "Evicted", "karpenter"),  # before v1.2.0
        (scheduler_preempted(NS, POD, AT, "ip-10-0-7-21"), "Preempted", "default-scheduler"),
        (autoscaler_scale_down(NS, POD, AT), "ScaleDown", "cluster-autoscaler"),
        (taint_eviction(NS, POD, AT), "TaintManagerEviction", "taint-eviction-controller"),
    ],
)
def test_each_collector_format_gives_the_same_disruption(ev, reason, initiator, fmt):
    entry = _entry(ev, fmt)
    assert event_line_matched(entry.line)  # Loki's filter lets every readable line through
    d = parse_event(entry)
    assert d is not None
    assert (d.reason, d.initiator, d.namespace, d.pod) == (reason, initiator, NS, POD)
    assert d.at == AT  # the event's own time, also when the exporter's entry is stamped later
    assert d.text == ev.message and d.source == "k8s-events"


def test_go_quoted_message_with_quotes_and_escapes_is_read_back():
    ev = K8sEvent(NS, POD, "Killing", 'Stopping container "main"\twith\\care', AT, "kubelet")
    assert read_event(_entry(ev, "alloy-logfmt")).message == ev.message
    json_ev = K8sEvent(NS, POD, "Evicted", "node <a> & <b>", AT, "karpenter")
    assert "\\u003c" in event_line(json_ev, "alloy-json").line  # Go escapes <, >, & in JSON
    assert parse_event(_entry(json_ev, "alloy-json")).text == json_ev.message


@pytest.mark.parametrize("fmt", FORMATS)
def test_events_of_other_objects_or_reasons_are_no_disruption(fmt):
    for node in node_spot_interrupted("ip-10-0-7-21", "spot-x2kfp", AT):
        assert parse_event(_entry(node, fmt)) is None  # announces; names no pod
    # the kubelet's stop of a container, and a cancelled taint eviction: no disruption
    kill = kubelet_killing(NS, POD, "main", AT, "ip-10-0-7-21")
    assert event_line_matched(_entry(kill, fmt).line) and parse_event(_entry(kill, fmt)) is None
    assert parse_event(_entry(taint_eviction(NS, POD, AT, cancelled=True), fmt)) is None
    pulled = K8sEvent(NS, POD, "Pulled", "Successfully pulled image", AT, "kubelet")
    assert parse_event(_entry(pulled, fmt)) is None
    assert not event_line_matched(_entry(pulled, fmt).line)


@pytest.mark.parametrize(
    "line", ["", "{", "[1, 2]", '{"reason": "Evicted"}', "reason=Evicted", "name=x reason=Evicted"]
)
def test_lines_that_are_no_event_are_none(line):
    assert parse_event(LogEntry.make(0, {"namespace": NS}, line)) is None


@pytest.mark.parametrize(
    "message, expected",
    [
        ("Evicted pod", ("Evicted", "karpenter")),
        ("Preempted by ml/llm-serve-7f9c on node ip-10-0-7-21", ("Preempted", "default-scheduler")),
        ("Preempted by pod 7c1d3a52 on node ip-10-0-7-21", ("Preempted", "default-scheduler")),
        (
            "Marking for deletion Pod gs1-production/x",
            ("TaintManagerEviction", "taint-eviction-controller"),
        ),
        ("Evicted pod: Underutilized", ("Evicted", "karpenter")),
        ("Evicted pod: Forceful Termination", ("Evicted", "karpenter")),
        ("deleting pod for node scale down", ("ScaleDown", "cluster-autoscaler")),
        ("The node was low on resource: memory. ", ("Evicted", "kubelet")),
        ("The node had condition: [DiskPressure]. ", ("Evicted", "kubelet")),
        ("Stopping container main", None),  # every container stop: corroborates, never proves
        ("Spot interruption warning was triggered", None),  # Karpenter's Node/NodeClaim only
        ("Cancelling deletion of Pod gs1-production/x", None),
        ("Evicted pods", None),
        ("task submitted to K8s", None),
        ("Successfully assigned gs1-production/x to ip-10-0-5-8", None),
    ],
)
def test_admin_reasons_are_recognised_by_their_reporters_message(message, expected):
    assert reason_of_message(message) == expected


# -- the verdict a disruption gives ---------------------------------------------------------------

END = AT + timedelta(seconds=9)
EX = ExecutionRecord(ExecutionRef("gs1", "production", "q1"), "SUCCEEDED", AT, END, "MANUAL", None)


def _attempt(task_type: str = "python-task", version: int = 0) -> AttemptRecord:
    return AttemptRecord(
        AttemptRef(EX.ref, "n0", 0), "SUCCEEDED", task_type, version, False, AT - timedelta(hours=1),
        END, "s3://b/n0/0/", (POD,), NS, None,
    )  # fmt: skip


def _disruption(at: datetime) -> Disruption:
    return Disruption("k8s-events", "Disrupted", "karpenter", at, NS, POD, "Evicted pod")


MISSING, PRESENT = ObjectCheck("missing"), ObjectCheck("present")


@pytest.mark.parametrize(
    "at, outputs, outcome",
    [
        (AT, MISSING, Verdict.AFFECTED),
        (END + timedelta(seconds=1), MISSING, Verdict.AFFECTED),  # within FinishedAt's second
        (END + timedelta(minutes=5), MISSING, Verdict.SUSPECTED),
        (AT, PRESENT, Cleared.DISRUPTION_OUTPUTS_WRITTEN),
        (END + timedelta(minutes=5), PRESENT, Cleared.DISRUPTION_AFTER_SUCCESS),
    ],
)
def test_a_disruption_grades_a_success_as_a_signal_does(at, outputs, outcome):
    d = decide(_attempt(), EX, None, outputs, disruption=_disruption(at))
    assert d.outcome is outcome


def test_an_early_disruption_raises_a_late_signals_suspected_never_lowers():
    late = SignalHit("SIGTERM", 15, END + timedelta(minutes=1), NS, POD, None, "agent", "x")
    att = _attempt("pytorch")
    assert decide(att, EX, late, MISSING).outcome is Verdict.SUSPECTED
    assert decide(att, EX, late, MISSING, disruption=_disruption(AT)).outcome is Verdict.AFFECTED
    early = SignalHit("SIGTERM", 15, AT, NS, POD, None, "agent", "x")
    after = _disruption(END + timedelta(minutes=5))
    assert decide(att, EX, early, MISSING, disruption=after).outcome is Verdict.AFFECTED


@pytest.mark.parametrize(
    "section, error",
    [
        ('[k8s_events]\nenabled = "yes"\n', "k8s_events.enabled must be true or false"),
        (
            '[k8s_events]\nselector = "job=x"\n',
            "k8s_events.selector must be a LogQL stream selector",
        ),
        (
            '[prometheus]\nurl = "ftp://prom"\n',
            "prometheus.url 'ftp://prom' must be http:// or https://",
        ),
        ('[prometheus]\nstep = "0s"\n', "prometheus.step must be a duration of at least 1s"),
    ],
)
def test_a_bad_disruption_source_setting_is_one_line_naming_the_key(
    section, error, tmp_path, capsys
):
    cfg = tmp_path / "c.toml"
    cfg.write_text(section)
    code, out, err = run(["scan", "--since", "1d", "--config", str(cfg)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and error in err, err


def test_a_kubelet_eviction_of_a_succeeded_single_pod_is_a_wrong_join():
    # the kubelet sets an evicted pod Failed first (eviction_manager.go evictPod)
    evicted = Disruption(
        "k8s-events", "Evicted", "kubelet", AT, NS, POD, "The node was low on resource: memory. "
    )
    assert decide(_attempt(), EX, None, MISSING, disruption=evicted).outcome is (
        Cleared.DISRUPTION_WRONG_JOIN
    )
    # a PyTorchJob's replica may be evicted while the job succeeds: still graded
    assert decide(_attempt("pytorch"), EX, None, MISSING, disruption=evicted).outcome is (
        Verdict.AFFECTED
    )
    # graceful node shutdown's DisruptionTarget reason, whichever source reads it
    shutdown = Disruption("prometheus", "TerminationByKubelet", None, AT, NS, POD, "")
    assert decide(_attempt(), EX, None, MISSING, disruption=shutdown).outcome is (
        Cleared.DISRUPTION_WRONG_JOIN
    )


def test_a_raw_container_without_outputs_is_never_a_finding_on_a_disruption_alone():
    d = decide(_attempt("raw-container"), EX, None, MISSING, disruption=_disruption(AT))
    assert d.outcome is Cleared.DISRUPTION_NO_ARTEFACT


def test_an_aggregated_event_after_the_end_places_nothing_after_the_success():
    from dataclasses import replace

    late = replace(_disruption(END + timedelta(minutes=5)), last_only=True)
    assert decide(_attempt(), EX, None, PRESENT, disruption=late).outcome is (
        Cleared.DISRUPTION_OUTPUTS_WRITTEN
    )
    d = decide(_attempt(), EX, None, MISSING, disruption=late)
    assert d.outcome is Verdict.SUSPECTED and "first occurrence is unknown" in d.note


def test_the_line_filter_lets_a_docker_wrapped_event_through():
    ev = karpenter_evicted(NS, POD, AT)
    for fmt in ("exporter-stdout-docker", "exporter-stdout-cri", "eventrouter-cri"):
        entry = _entry(ev, fmt)
        assert event_line_matched(entry.line), fmt
        assert parse_event(entry).text == "Evicted pod: Forceful Termination", fmt
