"""What a correct scan of the sandbox's scenarios concludes: the tests' expected answers.

The scenarios (forensics/sandbox/incident.py, disruptions.py, only_lost.py) say what happened; this module says
what the tool must make of it, so the emulator holds no answer the tests check against.
"""

from __future__ import annotations

from forensics.sandbox.disruptions import (
    ADMIN_EVICTED,
    ADMIN_ONLY,
    AT_THE_EDGE,
    EVENTROUTER,
    EXIT0,
    EXPORTER_STDOUT,
    NTH_SPOT,
    PREEMPTED,
    PROM_ONLY,
    SCALED_DOWN,
    SPOT_JOB,
)
from forensics.sandbox.incident import EVENT_ONLY
from forensics.sandbox.only_lost import BRANCH_CHILD, BRANCHY, PIPELINE, TRAIN

# reference_scenario() scanned over [WINDOW_START, WINDOW_END): (project, domain, execution,
# node, attempt) -> verdict, one per neighbour that is a finding (incident.py numbers them).
EXPECTED_FINDINGS = {
    ("gs1", "production", "azvg5f9v9974m78fvlf7", "n0", 0): "affected",  # 1
    ("gs1", "production", "bq7k2m9x4c8d1f6h3j5n", "n0", 0): "affected",  # 2
    ("gs1", "development", "c3p8r2w6y1t5u9e4o7i0", "n0", 0): "affected",  # 3
    (
        "gs1",
        "production",
        "nightly-distill-bigmodel-c42-nem1b-a2-lr5em5-v1-retrain",
        "n0",
        0,
    ): "affected",  # 4
    ("gs1", "production", "e8r4t2y6u0i3o7p1a5s9", "n0-0-dn1", 0): "affected",  # 5
    ("gs1", "production", "j4k8l2z6x0c3v7b1n5m9", "n0", 0): "suspected",  # 10
}
# With `[k8s_events]` on (as `demo` runs): the event alone proves neighbour 15.
EXPECTED_WITH_EVENTS = {**EXPECTED_FINDINGS, (*EVENT_ONLY, "n0", 0): "affected"}
# The report's `summary.cleared` for that scan: attempts looked at and cleared, by reason.
EXPECTED_CLEARED = {
    "outputs-written": 2,  # 7's successful retry and 11 (healthy, no signal)
    "signal-then-outputs-written": 1,  # 6
    "signal-then-failed-and-retried": 1,  # 7
    "signal-then-execution-failed": 1,  # 8
    "signal-not-a-flyte-task-pod": 1,  # 9
}

# disruption_scenario() scanned over DISRUPTION_WINDOW with `[k8s_events]` on (and Prometheus's
# conditions where a test serves them): attempt -> (verdict, disruption reason, cause).
DISRUPTION_EXPECTED = {
    (*PREEMPTED, "n0", 0): ("affected", "Disrupted", "elastic-ignore-outputs"),
    (*EXIT0, "n0", 0): ("affected", "Preempted", "exit-0-after-signal"),
    (*SPOT_JOB, "n0", 0): ("affected", "Evicted", "elastic-ignore-outputs"),
    (*NTH_SPOT, "n0", 0): ("affected", "SpotInterruption", "exit-0-after-signal"),
    (*SCALED_DOWN, "n0", 0): ("affected", "ScaleDown", "exit-0-after-signal"),
    (*EVENTROUTER, "n0", 0): ("affected", "Preempted", "exit-0-after-signal"),
    (*EXPORTER_STDOUT, "n0", 0): ("affected", "Evicted", "exit-0-after-signal"),
    (*ADMIN_EVICTED, "n0", 0): ("affected", "Evicted", "exit-0-after-signal"),
    (*ADMIN_ONLY, "n0", 0): ("affected", "TaintManagerEviction", "exit-0-after-signal"),
    (*PROM_ONLY, "n0", 0): ("affected", "PreemptionByScheduler", "exit-0-after-signal"),
    (*AT_THE_EDGE, "n0", 0): ("affected", "Disrupted", "elastic-ignore-outputs"),
}

# only_lost_scenario() scanned over its [WINDOW_START, WINDOW_END): the two training nodes, no gap.
ONLY_LOST_FINDINGS = {
    (PIPELINE.project, PIPELINE.domain, PIPELINE.name, TRAIN, 0): "affected",
    (BRANCHY.project, BRANCHY.domain, BRANCHY.name, BRANCH_CHILD, 0): "affected",
}
