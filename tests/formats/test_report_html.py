"""What a finding cost (docs/report.md `cost`) and where the incident page goes.

The cost figures are checked against hand-computed values from task templates that flytekit and
flytekitplugins-kfpytorch themselves serialize; then end to end through the CLI on the sandbox
(whose templates carry resources the same way), the page's targets (a file, S3 and the guard's
notification link) and bad targets. What the page shows is checked in Chromium
(tests/formats/test_page_browser*.py).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import replace
from datetime import datetime, timedelta

import boto3
import grpc
import jsonschema
import pytest
import requests
from flytekit import Resources, task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.extras.accelerators import A100
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfpytorch import Elastic, Master, PyTorch, Worker
from support import paths
from support.cli import run
from support.scan import CONFIG, WINDOW, sandbox_fixtures, scan_json

from forensics.cost import checkpoint_age, cost_of, price, totals
from forensics.model import (
    UTC,
    AttemptRecord,
    AttemptRef,
    Checkpoint,
    ExecutionRef,
    Finding,
    SignalHit,
)
from forensics.sandbox.incident import reference_scenario
from forensics.sources.task_resources import quantity, resources_of

pytestmark = pytest.mark.integration

HERE = paths.TESTS
T0 = datetime(2026, 9, 10, 8, 0, tzinfo=UTC)
SETTINGS = SerializationSettings(
    image_config=ImageConfig.auto_default_image(), project="gs1", domain="production", version="v1"
)


def template(fn):
    """The TaskTemplate protobuf flytekit registers for `fn` (as `pyflyte register` would)."""
    return get_serializable(OrderedDict(), SETTINGS, fn).template.to_flyte_idl()


@task(requests=Resources(cpu="8", gpu="4", mem="64Gi"), accelerator=A100)
def single_node() -> None: ...


@task(limits=Resources(cpu="500m", gpu="1"))
def limits_only() -> None: ...


@task(task_config=Elastic(nnodes=2, nproc_per_node=8), requests=Resources(cpu="32", gpu="8"))
def elastic_two_nodes() -> None: ...


@task(
    task_config=PyTorch(
        worker=Worker(replicas=3, requests=Resources(cpu="4", gpu="2")),
        master=Master(requests=Resources(cpu="2")),
    ),
    requests=Resources(cpu="1"),
)
def pytorch_job() -> None: ...


@task
def no_resources() -> None: ...


def attempt(
    hours: float, project: str = "gs1", name: str = "azvg5f9v9974m78fvlf7"
) -> AttemptRecord:
    ref = AttemptRef(ExecutionRef(project, "production", name), "n0", 0)
    return AttemptRecord(
        ref, "SUCCEEDED", "python-task", 1, False, T0, T0 + timedelta(hours=hours), None, (),
        None, None, task_id=(project, "production", "train", "v1"),
    )  # fmt: skip


NO_CHECKPOINT = Checkpoint(None, "unknown", reason="no location configured")


@pytest.mark.parametrize(
    ("fn", "hours", "pods", "gpu_hours", "cpu_hours", "source"),
    [
        # 2.5 h × 1 pod × 4 GPUs = 10; × 8 CPUs = 20 (requests; A100 named)
        (single_node, 2.5, 1, 10.0, 20.0, "container.resources.requests"),
        # limits only: Kubernetes requests the limit: 3 h × 1 GPU = 3; × 0.5 CPU = 1.5
        (limits_only, 3.0, 1, 3.0, 1.5, "container.resources.limits"),
        # torch elastic on 2 nodes: workerReplicas 2 × 8 GPUs × 1.5 h = 24; × 32 CPUs = 96
        (elastic_two_nodes, 1.5, 2, 24.0, 96.0, "custom.workerReplicas.replicas"),
        # PyTorchJob: 3 workers × 2 GPUs + master (own resources: cpu 2, no GPU) × 1 h = 6;
        # CPUs 3 × 4 + 2 = 14
        (pytorch_job, 1.0, 4, 6.0, 14.0, "custom.masterReplicas.resources"),
    ],
)
def test_cost_is_run_time_times_what_the_template_requests(
    fn, hours, pods, gpu_hours, cpu_hours, source
):
    res = resources_of(template(fn))
    cost = cost_of(attempt(hours), res, NO_CHECKPOINT, None)
    assert (cost.pods, cost.gpu_hours, cost.cpu_hours) == (pods, gpu_hours, cpu_hours)
    assert cost.run_seconds == hours * 3600
    assert source in cost.source and "gs1:production:" in cost.source
    assert cost.unknown == ()


def test_the_accelerator_is_named_and_per_pod_numbers_given_for_one_kind_of_pod():
    cost = cost_of(attempt(1.0), resources_of(template(single_node)), NO_CHECKPOINT, None)
    assert (cost.accelerator, cost.gpus_per_pod, cost.cpus_per_pod) == (
        "nvidia-tesla-a100",
        4.0,
        8.0,
    )
    mixed = cost_of(attempt(1.0), resources_of(template(pytorch_job)), NO_CHECKPOINT, None)
    assert (mixed.gpus_per_pod, mixed.cpus_per_pod) == (None, None)  # workers and master differ


def test_a_template_that_says_nothing_is_unknown_never_zero():
    cost = cost_of(attempt(2.0), resources_of(template(no_resources)), NO_CHECKPOINT, None)
    assert cost.gpu_hours is None and cost.cpu_hours is None and cost.run_seconds == 7200
    assert any("platform defaults" in u for u in cost.unknown)
    unregistered = cost_of(
        attempt(2.0), None, NO_CHECKPOINT, None, "the task template is not registered"
    )
    assert unregistered.gpu_hours is None and unregistered.unknown == (
        "the task template is not registered",
    )


@pytest.mark.parametrize(
    ("text", "value"), [("8", 8.0), ("500m", 0.5), ("1.5", 1.5), ("two", None), ("-1", None)]
)
def test_kubernetes_quantities(text, value):
    assert quantity(text) == value


def test_the_checkpoint_age_is_the_work_a_resume_would_redo():
    signal = SignalHit("SIGTERM", 15, T0 + timedelta(hours=2), "ns", "pod", None, "agent", "l")
    ten_minutes_before = Checkpoint("s3://b/ck/", "present", 3, signal.at - timedelta(minutes=10))
    assert checkpoint_age(ten_minutes_before, signal) == 600
    after = replace(ten_minutes_before, latest=signal.at + timedelta(seconds=5))
    assert checkpoint_age(after, signal) is None  # written while torn down: not a resume point
    assert checkpoint_age(Checkpoint("s3://b/ck/", "empty"), signal) is None
    assert checkpoint_age(ten_minutes_before, None) is None


def test_totals_per_project_and_day():
    a1, a2, a3 = attempt(2.0, "gs1", "a1"), attempt(1.0, "gs1", "a2"), attempt(4.0, "ml", "a3")
    signal = SignalHit("SIGTERM", 15, T0 + timedelta(hours=1), "ns", "pod", None, "agent", "l")
    findings = [
        Finding(a.ref, "affected", "SUCCEEDED", signal, a.ended_at, False, NO_CHECKPOINT)
        for a in (a1, a2, a3)
    ]
    # a suspected finding has no signal: it counts on the day of its false success
    findings[2] = replace(
        findings[2], signal=None, verdict="suspected", succeeded_at=T0 + timedelta(days=1)
    )
    four_gpus = resources_of(template(single_node))  # 4 GPUs, 8 CPUs
    t = totals(price(findings, {a.ref: a for a in (a1, a2, a3)}, lambda _tid: four_gpus))
    # (2 + 1 + 4) h × 4 GPUs = 28 GPU-hours; × 8 CPUs = 56 CPU-hours
    assert (t["findings"], t["gpu_hours"], t["cpu_hours"], t["gpu_hours_unknown"]) == (
        3,
        28.0,
        56.0,
        0,
    )
    assert (
        t["by_project"]["gs1"]["gpu_hours"] == 12.0 and t["by_project"]["ml"]["gpu_hours"] == 16.0
    )
    assert {d: b["gpu_hours"] for d, b in t["by_day"].items()} == {
        "2026-09-10": 12.0,
        "2026-09-11": 16.0,
    }


def test_an_unregistered_task_is_unknown_in_the_totals():
    a1, a2 = (
        attempt(2.0, "gs1", "a1"),
        replace(attempt(1.0, "ml", "a2"), task_id=("ml", "production", "dyn", "v1")),
    )
    findings = [
        Finding(a.ref, "affected", "SUCCEEDED", None, a.ended_at, False, NO_CHECKPOINT)
        for a in (a1, a2)
    ]
    asked: list[tuple] = []

    def lookup(tid):
        asked.append(tid)
        return (
            resources_of(template(single_node))
            if tid[2] == "train"
            else "the task template is not registered"
        )

    t = totals(price(findings, {a1.ref: a1, a2.ref: a2}, lookup))
    assert (t["gpu_hours"], t["gpu_hours_unknown"], t["cpu_hours_unknown"]) == (8.0, 1, 1)
    assert t["by_project"]["ml"] == {
        "findings": 1,
        "gpu_hours": 0.0,
        "cpu_hours": 0.0,
        "gpu_hours_unknown": 1,
        "cpu_hours_unknown": 1,
    }
    assert len(asked) == 2


# -- end to end on the sandbox ----------------------------------------------------------------

box, env = sandbox_fixtures(reference_scenario)


def test_the_reports_cost_is_computed_from_the_sandboxs_task_templates(capsys):
    _code, report, _err = scan_json(capsys)
    jsonschema.validate(report, json.loads((HERE / "report.schema.json").read_text()))
    cost = {f["execution"]["name"]: f["cost"] for f in report["findings"]}
    # azvg…: 11:02:30 → 19:45:29 = 31379 s × 4 GPUs (bigmodel.train requests gpu 4, cpu 8)
    ref = cost["azvg5f9v9974m78fvlf7"]
    assert (ref["run_seconds"], ref["gpu_hours"], ref["cpu_hours"]) == (31379, 34.8656, 69.7311)
    assert ref["accelerator"] == "nvidia-tesla-a100"
    # bq7k…: PyTorchJob on 2 workers × 8 GPUs, 22:00:30 → 03:12:51 = 18741 s; newest
    # checkpoint 03:00:00, signal 03:12:40: 760 s of work to redo
    pt = cost["bq7k2m9x4c8d1f6h3j5n"]
    assert (pt["pods"], pt["gpu_hours"], pt["cpu_hours"]) == (2, 83.2933, 166.5867)
    assert pt["checkpoint_age_seconds"] == 760
    # small.train asks for nothing: unknown, and counted as such in the totals
    dev = cost["c3p8r2w6y1t5u9e4o7i0"]
    assert dev["gpu_hours"] is None and dev["unknown"]
    total = report["summary"]["cost"]
    assert total["gpu_hours_unknown"] == 1
    known = [c["gpu_hours"] for c in cost.values() if c["gpu_hours"] is not None]
    assert total["gpu_hours"] == pytest.approx(sum(known), abs=1e-3)
    assert total["by_day"]["2026-09-10"]["gpu_hours"] == 34.8656


def test_one_run_gives_the_json_for_tools_and_the_page_for_people(tmp_path, capsys):
    page = tmp_path / "incident.html"
    code, out, err = run(
        ["scan", *WINDOW, "-o", "json", "--no-progress", "--report-html", page], capsys
    )
    assert code == 1, err
    assert json.loads(out)["summary"]["affected"] == 5
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")
    code, out, _ = run(["scan", *WINDOW, "-o", "html", "--no-progress"], capsys)
    assert code == 1 and out.startswith("<!doctype html>")


@pytest.mark.parametrize(
    ("target", "says"),
    [("/no/such/dir/incident.html", "does not exist"), ("s3://only-a-bucket", "--report-html")],
)
def test_a_page_target_that_cannot_be_written_is_refused_before_the_scan(target, says, capsys):
    code, out, err = run(["scan", *WINDOW, "--report-html", target], capsys)
    assert code == 2 and out == ""
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


READ_PAGES = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::flyte-metadata/elastic-audit/*",
        }
    ],
}


def test_the_guard_uploads_the_page_to_s3_and_its_notification_links_to_it(
    box, hook, tmp_path, capsys
):
    target = "s3://flyte-metadata/elastic-audit/incident.html"
    state = str(tmp_path / "state.json")
    code, _out, err = run(
        ["scan", *WINDOW, "--no-progress", "-o", "json", "--state", state, "--notify", hook.url,
         "--report-html", target],
        capsys,
    )  # fmt: skip
    assert code == 1, err
    (posted,) = hook.posts()
    url = posted["report_html"]
    assert (
        url
        == f"{box.env['AWS_ENDPOINT_URL_S3'].rstrip('/')}/flyte-metadata/elastic-audit/incident.html"
    )
    s3 = boto3.client("s3", endpoint_url=box.env["AWS_ENDPOINT_URL_S3"])
    obj = s3.get_object(Bucket="flyte-metadata", Key="elastic-audit/incident.html")
    assert obj["ContentType"] == "text/html; charset=utf-8"
    # Private by default: nothing opens it until the operator serves it (docs/deployment.md)
    assert requests.get(url, timeout=10).status_code == 403
    # e.g. with a bucket policy letting readers get the page's prefix
    s3.put_bucket_policy(Bucket="flyte-metadata", Policy=json.dumps(READ_PAGES))
    got = requests.get(url, timeout=10)
    assert got.status_code == 200 and got.text.startswith("<!doctype html>")


def test_slack_notifications_carry_the_page_link_and_guard_mode_prints_the_page(
    box, hook, tmp_path, capsys
):
    state = str(tmp_path / "state.json")
    code, out, err = run(
        ["scan", *WINDOW, "--no-progress", "-o", "html", "--state", state, "--notify", hook.url,
         "--notify-format", "slack", "--report-html", "s3://flyte-metadata/p/incident.html"],
        capsys,
    )  # fmt: skip
    assert code == 1, err
    assert out.startswith("<!doctype html>")  # guard mode prints the page too
    head = hook.posts()[0]["blocks"][0]["text"]["text"]
    assert "/flyte-metadata/p/incident.html|The incident page" in head


def test_a_page_read_that_fails_is_listed_on_the_page_and_exits_3(box, tmp_path, capsys):
    # The scan itself never calls GetExecution; the page does, for each affected execution.
    (tmp_path / "elastic-audit.toml").write_text(
        CONFIG.replace("[flyte]\n", "[flyte]\nretries = 0\n")
    )
    box.admin.faults.failures["GetExecution"] = [grpc.StatusCode.UNAVAILABLE] * 1000
    report = tmp_path / "report.json"
    try:
        code, out, err = run(
            ["scan", *WINDOW, "-o", "html", "--no-progress", "--report", report], capsys
        )
    finally:
        box.admin.faults.failures.clear()
    assert code == 3, err
    assert json.loads(report.read_text())["complete"] is True  # the scan's own reads were whole
    assert "Flyte Admin failed" in err and "for the page's timeline" in err
    # 6 affected executions and one existing relaunch, each read once
    assert "7 read(s) for the timelines below failed" in out
