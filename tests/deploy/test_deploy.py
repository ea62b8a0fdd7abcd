"""deploy/ tested offline (docs/deployment.md): the Flyte launch plan serialised by `pyflyte package` and its
task run locally against the sandbox; the Kubernetes manifests validated against the Kubernetes
schemas (kubernetes-validate's bundled copies); the alert rules parsed as PromQL and checked
against the metrics the guard really writes."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import kubernetes_validate
import promql_parser
import pytest
import yaml
from flyteidl.admin import launch_plan_pb2, task_pb2
from prometheus_client.parser import text_string_to_metric_families
from support import paths
from support.cli import exit_code
from support.guard import HTTPRecorder
from support.scan import CONFIG

from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox

ROOT = paths.ROOT
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
IMAGE = "registry.example.com/elastic-audit:0.1.0"
# The oldest Kubernetes minor the manifests promise (CronJob timeZone is GA since 1.27).
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


def manifests() -> list[dict]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str) -> dict:
    (doc,) = [d for d in manifests() if d["kind"] == kind]
    return doc


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_manifests_validate_against_the_schemas(version):
    kinds = set()
    for doc in manifests():
        if doc["apiVersion"].startswith(("monitoring.coreos.com/", "kustomize.config.k8s.io/")):
            continue  # CRDs: no Kubernetes schema; checked below
        kubernetes_validate.validate(doc, version, strict=True)
        kinds.add(doc["kind"])
    assert kinds == {"CronJob", "ServiceAccount", "ConfigMap"}


def test_strict_validation_would_catch_a_typo():
    job = by_kind("CronJob")
    job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["envv"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSIONS[0], strict=True)


def test_cronjob_runs_the_guard_scan_with_the_config_and_secret_references(tmp_path):
    sa, cm, job = by_kind("ServiceAccount"), by_kind("ConfigMap"), by_kind("CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    assert c["command"] == ["elastic-audit"] and c["args"][0] == "scan"
    assert any(a.startswith("--state=s3://") for a in c["args"])
    # every flag the CronJob passes is one `scan` accepts (through the real CLI's parser)
    import typer.main

    from forensics.cli import app

    command = typer.main.get_command(app).commands["scan"]
    ctx = command.make_context("scan", list(c["args"]), resilient_parsing=True)
    assert ctx.params["state"].startswith("s3://") and ctx.params["exit_zero"] is True
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
    assert secrets["ELASTIC_AUDIT_NOTIFY"]["key"] == "notify-url"
    assert all(s["name"] == "elastic-audit" for s in secrets.values())
    # the config file the args point at is the ConfigMap's, and it loads as a real config
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "config"]
    assert "--config=" + mount["mountPath"] + "/config.toml" in c["args"]
    from forensics.config import load_settings

    for name, text in cm["data"].items():
        (tmp_path / name).write_text(text)
    # (the file's [flyte] config names the mounted flyte.yaml; here it lies in tmp_path)
    assert f'config = "{mount["mountPath"]}/flyte.yaml"' in cm["data"]["config.toml"]
    settings = load_settings(
        config=str(tmp_path / "config.toml"),
        loki_url=None,
        flyte_config=str(tmp_path / "flyte.yaml"),
    )
    assert settings.flyte.console_url == "https://flyte.example.com/console"


def guard_metrics_text(tmp_path: Path) -> str:
    """Metrics from a real guard run against the sandbox."""
    with sandbox(reference_scenario()) as box, box.apply_env():
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(CONFIG)
        prom = tmp_path / "m.prom"
        exit_code(
            [
                "scan",
                "--config",
                str(cfg),
                "--since",
                "2026-09-04",
                "--until",
                "2026-09-11",
                "-o",
                "json",
                "--no-progress",
                "--metrics-file",
                str(prom),
            ]
        )
        return prom.read_text()


@pytest.mark.integration
def test_alert_rules_parse_as_promql_and_use_metrics_the_guard_writes(tmp_path, capsys):
    rule = by_kind("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == {"ElasticAuditNewAffectedFindings", "ElasticAuditNoCompleteScan"}
    written = {
        s.name
        for f in text_string_to_metric_families(guard_metrics_text(tmp_path))
        for s in f.samples
    }
    capsys.readouterr()
    for r in alerts.values():
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}
        promql_parser.parse(r["expr"])  # raises on a syntax error
        used = {n for n in written if n in r["expr"]}
        assert used, f"{r['alert']} uses no metric the guard writes"
    assert "elastic_audit_new_findings_total" in alerts["ElasticAuditNewAffectedFindings"]["expr"]
    assert '{verdict="affected"}' in alerts["ElasticAuditNewAffectedFindings"]["expr"]
    no_scan = alerts["ElasticAuditNoCompleteScan"]["expr"]
    assert "elastic_audit_last_complete_scan_timestamp_seconds" in no_scan and "7200" in no_scan
    with pytest.raises(ValueError):
        promql_parser.parse("increase(elastic_audit_new_findings_total[1h) > 0")


def pyflyte_package(tmp_path: Path, pkg: str) -> Path:
    """`pyflyte --pkgs PKG package` in deploy/flyte, as an operator registers it: the archive."""
    out = tmp_path / f"{pkg}.tgz"
    pyflyte = Path(sys.executable).with_name("pyflyte")
    p = subprocess.run(
        [str(pyflyte), "--pkgs", pkg, "package", "--image", IMAGE, "--output", str(out), "--force"],
        cwd=DEPLOY / "flyte",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return out


@pytest.mark.e2e
def test_pyflyte_packages_the_cron_launch_plan(tmp_path):
    with tarfile.open(pyflyte_package(tmp_path, "guard_workflow")) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    (lp_name,) = [n for n in files if "elastic_audit_guard" in n]
    lp = launch_plan_pb2.LaunchPlan()
    lp.ParseFromString(files[lp_name])
    assert lp.id.name == "elastic_audit_guard"
    assert lp.spec.entity_metadata.schedule.cron_schedule.schedule == "*/30 * * * *"
    assert "state" in lp.spec.fixed_inputs.literals
    (task_name,) = [n for n in files if n.endswith("guard_scan_1.pb")]
    t = task_pb2.TaskSpec()
    t.ParseFromString(files[task_name])
    assert t.template.container.image == IMAGE
    # Flyte gives the task as args with no command: the image must have no ENTRYPOINT.
    assert t.template.container.args[0].startswith("pyflyte") and not t.template.container.command
    dockerfile = (DEPLOY / "Dockerfile").read_text().splitlines()
    assert not [line for line in dockerfile if line.startswith("ENTRYPOINT")]
    assert [s.key for s in t.template.security_context.secrets] == ["notify-url"]


@pytest.mark.integration
def test_the_flyte_workflow_runs_the_guard_scan_locally(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(DEPLOY / "flyte"))  # as pyflyte's source root
    mod = importlib.import_module("guard_workflow")
    hook = HTTPRecorder()
    try:
        with sandbox(reference_scenario()) as box, box.apply_env():
            cfg = tmp_path / "cfg.toml"
            cfg.write_text(CONFIG)
            state = tmp_path / "state.json"
            monkeypatch.setenv("_FSEC_ELASTIC-AUDIT_NOTIFY-URL", hook.url)
            monkeypatch.delenv("ELASTIC_AUDIT_NOTIFY", raising=False)
            # First run: no state yet, so `first_since` starts it (to now: the seeded month).
            code = mod.guard(
                state=str(state), config=str(cfg), notify_format="json", first_since="2026-09-04"
            )
            assert code == 1  # findings; the task succeeds and the webhook has them
            assert "ELASTIC_AUDIT_NOTIFY" not in os.environ  # the secret lived for the run only
            assert len(hook.posts()) == 1
            # Everything a plain scan of the same window finds is notified, once.
            capsys.readouterr()
            exit_code(["scan", "--since", "2026-09-04", "--config", str(cfg), "-o", "json"])
            plain = json.loads(capsys.readouterr().out)
            assert plain["findings"]
            assert len(hook.posts()[0]["new_findings"]) == len(plain["findings"])
            # Second run: continues from the state (first_since ignored): nothing new.
            code = mod.guard(
                state=str(state), config=str(cfg), notify_format="json", first_since="2026-09-04"
            )
            assert code == 0
            assert len(hook.posts()) == 1
            assert json.loads(state.read_text())["runs"] == 2
            # An unreadable state fails the task (exit 2), never silently green.
            state.write_text("garbage")
            with pytest.raises(Exception, match="exited 2"):
                mod.guard(state=str(state), config=str(cfg), notify_format="json")
    finally:
        hook.close()


@pytest.mark.integration
def test_the_backfill_workflow_merges_its_slices_into_one_scan_locally(
    tmp_path, monkeypatch, capsys
):
    from support.synthetic import synthetic_month

    monkeypatch.syspath_prepend(str(DEPLOY / "flyte"))  # as pyflyte's source root
    mod = importlib.import_module("backfill_workflow")
    month = synthetic_month(attempts=200, signalled=40, affected=10, noise_lines=2_000, projects=2)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    since, until = "2026-08-01", "2026-08-31"
    teams = ["team00", "team01"]
    with sandbox(month.scenario) as box, box.apply_env():
        box.loki.add_lines(month.noise())
        # flytekit's local execution: the map task runs each slice in turn, each a library call.
        merged = json.loads(mod.backfill(since=since, until=until, slice_days=10))
        by_project = json.loads(
            mod.backfill(since=since, until=until, slice_days=10, projects=teams)
        )
        capsys.readouterr()
        code = exit_code(["scan", "--since", since, "--until", until, "-o", "json"])
        whole = json.loads(capsys.readouterr().out)
        exit_code(
            [
                "scan",
                "--since",
                since,
                "--until",
                until,
                "-o",
                "json",
                "--project",
                "team00",
                "--project",
                "team01",
            ]
        )
        scoped = json.loads(capsys.readouterr().out)
    assert code == 1 and whole["findings"]
    assert merged == whole  # 3 time slices, merged: the one scan of the window, exactly
    # 3 time slices x 2 projects: the scan of those projects (a project scope reads only their
    # namespaces' logs, so the non-Flyte pod the whole scan clears is not among them).
    assert by_project == scoped and by_project["findings"] == whole["findings"]
    assert len(mod.slices(since, until, 10, teams, [], "")) == 6


@pytest.mark.e2e
def test_pyflyte_packages_the_backfill_with_a_map_task(tmp_path):
    with tarfile.open(pyflyte_package(tmp_path, "backfill_workflow")) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
    # The slices run as one array node (Flyte's map task) over the planned specs.
    assert any("map_scan_slice" in n and "arraynode" in n for n in names)
    assert any(n.endswith("merge_slices_1.pb") for n in names)
