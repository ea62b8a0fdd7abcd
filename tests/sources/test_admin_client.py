"""The Admin client (flytekit's SynchronousFlyteClient) against the sandbox Admin, on loopback."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from flyteidl.admin import execution_pb2
from flyteidl.core import identifier_pb2, literals_pb2
from flytekit.clients.friendly import SynchronousFlyteClient
from flytekit.configuration import PlatformConfig
from flytekit.exceptions.base import FlyteException
from google.protobuf import struct_pb2
from support.admin_scenarios import (
    DOMAIN,
    DYNAMIC,
    ELASTIC,
    PROJECT,
    T0,
    attempt,
    dynamic_execution,
    execution,
    many,
    pytorch_execution,
)

from forensics.config import FlyteSettings
from forensics.errors import (
    AlreadyRelaunched,
    ConfigError,
    NotFoundError,
    SourceError,
    UsageError,
)
from forensics.model import AttemptRef, ExecutionRecord, ExecutionRef
from forensics.sandbox.admin_server import AdminFaults, AdminServer
from forensics.sandbox.scenario import SandboxNode, Scenario
from forensics.sources.admin import AdminClient, load_platform_config
from forensics.sources.admin_channel import AdminCalls, AdminChannel
from forensics.sources.admin_filters import admin_filter, live_during
from forensics.sources.admin_records import literal_text


def ref(name: str) -> ExecutionRef:
    return ExecutionRef(PROJECT, DOMAIN, name)


@pytest.fixture
def admin() -> Iterator:
    """`admin(scenario, faults, **client_options)` -> (server, client), both closed afterwards."""
    opened: list[tuple[AdminServer, AdminClient]] = []

    def start(scenario: Scenario, faults: AdminFaults | None = None, **options):
        server = AdminServer(scenario, faults)
        # flytekit's default rpc_retries=3 on purpose: the client must neutralise it.
        platform = PlatformConfig(endpoint=server.start(), insecure=True)
        client = AdminClient(platform, **{"backoff": 0.01, "max_backoff": 0.02, **options})
        opened.append((server, client))
        return server, client

    yield start
    for server, client in opened:
        client.close()
        server.stop()


# -- executions -------------------------------------------------------------------------------


@pytest.mark.integration
def test_execution_is_plain_data(admin) -> None:
    _, client = admin(Scenario(executions=[execution("azvg5f9v9974m78fvlf7")]))
    rec = client.get_execution(ref("azvg5f9v9974m78fvlf7"))
    assert isinstance(rec, ExecutionRecord)
    assert (rec.phase, rec.mode, rec.reference_execution) == ("SUCCEEDED", "MANUAL", None)
    assert rec.created_at == T0 and rec.updated_at == T0 + timedelta(hours=1)
    assert dict(rec.labels) == {"team": "llm"}


@pytest.mark.integration
def test_missing_execution_costs_one_round_trip_and_raises_not_found(admin) -> None:
    server, client = admin(Scenario(executions=[execution("a")]))
    with pytest.raises(NotFoundError) as info:
        client.get_execution(ref("ghost"))
    assert server.call_counts()["GetExecution"] == 1
    message = str(info.value)
    assert "\n" not in message and "NOT_FOUND" in message and "ghost" in message
    assert "Traceback" not in message


@pytest.mark.integration
def test_the_channel_is_flytekits_without_its_exception_wrapper(admin) -> None:
    # The transport reads gRPC's status itself: the channel it opens leaves flytekit's
    # exception wrapper (and its immediate retries) out, whatever rpc_retries says.
    server, _ = admin(Scenario(executions=[execution("a")]))
    channel = AdminChannel(PlatformConfig(endpoint=server.endpoint, insecure=True, rpc_retries=3))
    ghost = identifier_pb2.WorkflowExecutionIdentifier(project=PROJECT, domain=DOMAIN, name="ghost")
    try:
        with pytest.raises(grpc.RpcError) as info:
            AdminCalls(channel, 5.0).get_execution(
                execution_pb2.WorkflowExecutionGetRequest(id=ghost)
            )
    finally:
        channel.close()
    assert info.value.code() is grpc.StatusCode.NOT_FOUND
    assert not isinstance(info.value, FlyteException)
    assert server.call_counts()["GetExecution"] == 1


@pytest.mark.integration
def test_flytekit_alone_would_ask_four_times_for_a_missing_execution(admin) -> None:
    # Why the client sets rpc_retries=0: flytekit's interceptor repeats NOT_FOUND immediately.
    server, _ = admin(Scenario(executions=[execution("a")]))
    raw = SynchronousFlyteClient(PlatformConfig(endpoint=server.endpoint, insecure=True))
    with pytest.raises(FlyteException):
        super(SynchronousFlyteClient, raw).get_execution(
            execution_pb2.WorkflowExecutionGetRequest(
                id=identifier_pb2.WorkflowExecutionIdentifier(
                    project=PROJECT, domain=DOMAIN, name="ghost"
                )
            )
        )
    assert server.call_counts()["GetExecution"] == 4


@pytest.mark.integration
@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ],
)
def test_unavailable_then_success_is_retried(admin, code: grpc.StatusCode) -> None:
    faults = AdminFaults()
    faults.fail_next("GetExecution", 2, code)
    server, client = admin(Scenario(executions=[execution("a")]), faults)
    assert client.get_execution(ref("a")).phase == "SUCCEEDED"
    assert server.call_counts()["GetExecution"] == 3
    assert client.calls == {"GetExecution": 3}


@pytest.mark.integration
def test_admin_down_for_good_is_a_retryable_source_error_after_bounded_tries(admin) -> None:
    faults = AdminFaults()
    faults.fail_next("ListExecutions", 10, grpc.StatusCode.RESOURCE_EXHAUSTED)
    server, client = admin(Scenario(executions=many(3)), faults, retries=2)
    with pytest.raises(SourceError) as info:
        list(client.list_executions(PROJECT, DOMAIN))
    assert info.value.retryable and "RESOURCE_EXHAUSTED" in info.value.cause
    assert server.call_counts()["ListExecutions"] == 3


@pytest.mark.integration
def test_each_call_carries_a_deadline(admin) -> None:
    faults = AdminFaults(latency_by_method={"GetExecution": 0.5})
    _, client = admin(Scenario(executions=[execution("a")]), faults, timeout=0.1, retries=0)
    with pytest.raises(SourceError) as info:
        client.get_execution(ref("a"))
    assert "DEADLINE_EXCEEDED" in info.value.cause and info.value.retryable


@pytest.mark.integration
def test_invalid_argument_is_final_and_shows_admins_reason(admin) -> None:
    server, client = admin(Scenario(executions=many(3)))
    with pytest.raises(SourceError) as info:
        list(client.list_executions(PROJECT, DOMAIN, filters="eq(bogus,1)"))
    assert "'e.bogus' is invalid filter" in info.value.cause
    assert not info.value.retryable
    assert server.call_counts()["ListExecutions"] == 1


@pytest.mark.integration
def test_unreachable_admin_is_one_line(admin) -> None:
    client = AdminClient(PlatformConfig(endpoint="127.0.0.1:1", insecure=True), retries=0)
    with pytest.raises(SourceError) as info:
        client.get_execution(ref("a"))
    client.close()
    assert "UNAVAILABLE" in str(info.value) and "\n" not in str(info.value)


# -- listing ----------------------------------------------------------------------------------


@pytest.mark.integration
def test_listing_follows_tokens_across_pages(admin) -> None:
    server, client = admin(Scenario(executions=many(250)))
    names = [e.ref.name for e in client.list_executions(PROJECT, DOMAIN, page_size=100)]
    assert names == [f"x{i:04d}" for i in range(250)]
    assert [r.token for r in server.calls_of("ListExecutions")] == ["", "100", "200"]
    assert {r.sort_by.key for r in server.calls_of("ListExecutions")} == {"id"}


@pytest.mark.integration
def test_a_page_is_read_inside_next_one_call_per_page(admin) -> None:
    # The scan bounds Admin calls in flight by holding a slot around each `next` of the pages:
    # the page's one call is sent there, never while its executions are handed on.
    server, client = admin(Scenario(executions=many(250)))
    pages = client.list_execution_pages(PROJECT, DOMAIN, page_size=100)
    sizes = []
    for page in pages:
        sizes.append((len(page), server.call_counts()["ListExecutions"]))
    assert sizes == [(100, 1), (100, 2), (50, 3)]


@pytest.mark.integration
def test_listing_an_exact_multiple_reads_the_empty_last_page(admin) -> None:
    server, client = admin(Scenario(executions=many(200)))
    assert len(list(client.list_executions(PROJECT, DOMAIN, page_size=100))) == 200
    assert server.call_counts()["ListExecutions"] == 3


@pytest.mark.integration
def test_window_filter_keeps_executions_live_in_the_window(admin) -> None:
    start = T0.replace(hour=0, microsecond=250_000)
    scenario = Scenario(
        executions=[
            execution("before", created=T0 - timedelta(days=5), updated=T0 - timedelta(days=4)),
            execution("long-running", created=T0 - timedelta(days=20), updated=T0),
            execution("inside", created=T0),
            execution("after", created=T0 + timedelta(days=3)),
        ]
    )
    server, client = admin(scenario)
    found = client.list_executions(
        PROJECT, DOMAIN, filters=live_during(start, start + timedelta(days=1))
    )
    assert sorted(e.ref.name for e in found) == ["inside", "long-running"]
    (sent,) = server.calls_of("ListExecutions")
    assert "+00:00" not in sent.filters and sent.filters.count("Z)") == 2


@pytest.mark.integration
def test_rows_inserted_mid_scan_are_not_repeated(admin) -> None:
    # Newest-first listing: a relaunch created between two pages shifts every offset by one,
    # so page 2 starts with the last execution of page 1 again.
    server, client = admin(Scenario(executions=many(6)))
    listing = client.list_executions(
        PROJECT, DOMAIN, page_size=3, sort_by="desc(execution_created_at)"
    )
    first = [next(listing) for _ in range(3)]
    client.relaunch(ref("x0000"), name="x-new")
    rest = list(listing)
    names = [e.ref.name for e in first + rest]
    assert names == ["x0005", "x0004", "x0003", "x0002", "x0001", "x0000"]
    assert server.call_counts()["ListExecutions"] == 3


@pytest.mark.integration
@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("early", "full page came without a next-page token"),
        ("repeat", "repeated"),
        ("bogus", "invalid pagination token not-a-token"),
    ],
)
def test_broken_page_tokens_fail_loudly_instead_of_truncating(admin, kind: str, says: str) -> None:
    _, client = admin(Scenario(executions=many(5)), AdminFaults(page_token=kind))
    with pytest.raises(SourceError) as info:
        list(client.list_executions(PROJECT, DOMAIN, page_size=2))
    assert says in info.value.cause


def test_filter_values_that_flyteadmin_would_split_are_refused() -> None:
    with pytest.raises(ValueError):
        admin_filter("eq", "phase", "A+B")
    with pytest.raises(ValueError):
        admin_filter("gte", "execution_created_at", T0.replace(tzinfo=None))
    assert admin_filter("value_in", "phase", ["FAILED", "SUCCEEDED"]) == (
        "value_in(phase,FAILED;SUCCEEDED)"
    )


@pytest.mark.integration
def test_list_projects(admin) -> None:
    scenario = Scenario(executions=[execution("a"), execution("b", project="flytesnacks")])
    _, client = admin(scenario)
    assert client.list_projects() == ["flytesnacks", "gs1"]


# -- attempts ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_nested_dynamic_children_are_listed_under_their_unique_ids(admin) -> None:
    server, client = admin(Scenario(executions=[dynamic_execution("dyn")]))
    attempts = client.list_attempts(ref("dyn"))
    assert [(a.ref.node_id, a.ref.attempt) for a in attempts] == [
        ("n0", 0),
        ("n1", 0),
        ("n1-0-dn0", 0),
        ("n1-0-dn0", 1),
    ]
    assert [r.unique_parent_id for r in server.calls_of("ListNodeExecutions")] == ["", "n1"]
    # start-node and end-node never cost a ListTaskExecutions
    asked = [r.node_execution_id.node_id for r in server.calls_of("ListTaskExecutions")]
    assert asked == ["n0", "n1", "n1-0-dn0"]


@pytest.mark.integration
def test_attempt_fields_come_from_admins_closures(admin) -> None:
    _, client = admin(Scenario(executions=[dynamic_execution("dyn")]))
    by_key = {(a.ref.node_id, a.ref.attempt): a for a in client.list_attempts(ref("dyn"))}
    data_dir = "s3://flyte-metadata/metadata/propeller/gs1-production-dyn/n1-0-dn0/data"
    failed, ok = by_key[("n1-0-dn0", 0)], by_key[("n1-0-dn0", 1)]
    assert (failed.phase, ok.phase, ok.node_phase) == ("RETRYABLE_FAILED", "SUCCEEDED", "SUCCEEDED")
    assert ok.output_dir == f"{data_dir}/1/"  # from output_uri .../1/outputs.pb
    assert failed.output_dir == f"{data_dir}/0/"  # no output_uri: beside inputs.pb
    assert ok.started_at == T0 + timedelta(minutes=6)
    assert ok.ended_at == T0 + timedelta(minutes=36)
    assert ok.pods == ("dyn-n1-0-dn0-1",) and ok.namespace == "gs1-production"
    assert ok.checkpoint_uri == "s3://flyte-raw/ab/dyn-n1-0-dn0-1/_flytecheckpoints"
    assert ok.task_id == (PROJECT, DOMAIN, ELASTIC.name, ELASTIC.version)
    assert (ok.task_type, ok.task_type_version, ok.is_array) == ("python-task", 1, False)
    assert ok.is_elastic
    parent = by_key[("n1", 0)]
    assert (parent.task_type_version, parent.is_elastic) == (0, False)
    assert parent.checkpoint_uri is None


@pytest.mark.integration
def test_pytorch_job_lists_every_worker_pod(admin) -> None:
    _, client = admin(Scenario(executions=[pytorch_execution("job")]))
    (a,) = client.list_attempts(ref("job"))
    assert a.pods == (
        "job-n0-0-worker-0",
        "job-n0-0-worker-1",
        "job-n0-0",
    )  # primary first; the generated (job) name last
    assert a.task_type == "pytorch" and a.is_elastic


@pytest.mark.integration
def test_map_task_is_array_and_not_elastic(admin) -> None:
    ex = execution(
        "maps",
        nodes=[SandboxNode("n0", "SUCCEEDED", [attempt("maps", "n0", 0)], is_array=True)],
    )
    _, client = admin(Scenario(executions=[ex]))
    (a,) = client.list_attempts(ref("maps"))
    assert a.is_array and a.task_type_version == 1 and not a.is_elastic


@pytest.mark.integration
def test_get_task_once_per_distinct_task_across_executions(admin) -> None:
    server, client = admin(Scenario(executions=[*many(5), dynamic_execution("dyn")]))
    total = 0
    for e in list(client.list_executions(PROJECT, DOMAIN)):
        total += len(client.list_attempts(e.ref))
    gets = server.calls_of("GetTask")
    assert sorted(r.id.name for r in gets) == sorted([ELASTIC.name, DYNAMIC.name])
    # The scale budget (docs/performance.md): a small constant number of Admin calls per attempt.
    assert sum(client.calls.values()) / total <= 4


@pytest.mark.integration
def test_records_of_many_executions_share_the_identifiers_they_repeat(admin) -> None:
    # protobuf makes a new object on every field read: a scan holding 200,000 candidates held
    # 200,000 copies of one task's id (docs/performance.md, "Memory grows with ...").
    _, client = admin(Scenario(executions=many(3)))
    records = list(client.list_executions(PROJECT, DOMAIN))
    attempts = [a for e in records for a in client.list_attempts(e.ref)]
    assert len(records) == 3 and len(attempts) >= 3
    for field in ("workflow", "launch_plan", "phase", "mode"):
        values = [getattr(e, field) for e in records]
        assert values[0] is not None and all(v is values[0] for v in values), field
    assert all(e.ref.project is records[0].ref.project for e in records)
    assert all(e.ref.domain is records[0].ref.domain for e in records)
    for field in ("task_id", "task_type", "namespace", "phase"):
        values = [getattr(a, field) for a in attempts]
        assert values[0] is not None and all(v is values[0] for v in values), field
    assert all(a.ref.node_id is attempts[0].ref.node_id for a in attempts)


@pytest.mark.integration
def test_unregistered_dynamic_task_takes_its_template_from_the_parent(admin) -> None:
    faults = AdminFaults(unregistered_tasks={(PROJECT, DOMAIN, ELASTIC.name, ELASTIC.version)})
    server, client = admin(Scenario(executions=[dynamic_execution("dyn")]), faults)
    by_node = {a.ref.node_id: a for a in client.list_attempts(ref("dyn"))}
    assert by_node["n1-0-dn0"].task_type_version == 1  # via n1's compiled dynamic workflow
    assert by_node["n0"].task_type_version is None  # top-level and unregistered: unknown
    assert [r.id.node_id for r in server.calls_of("GetNodeExecutionData")] == ["n1"]


@pytest.mark.integration
def test_get_attempt_reads_one_node(admin) -> None:
    server, client = admin(Scenario(executions=[dynamic_execution("dyn")]))
    a = client.get_attempt(AttemptRef(ref("dyn"), "n1-0-dn0", 1))
    assert (a.phase, a.output_dir.endswith("/n1-0-dn0/data/1/")) == ("SUCCEEDED", True)
    assert set(server.call_counts()) == {"GetNodeExecution", "ListTaskExecutions", "GetTask"}
    with pytest.raises(NotFoundError):
        client.get_attempt(AttemptRef(ref("dyn"), "n1-0-dn0", 7))


# -- inputs -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_inputs_are_read_as_strings(admin) -> None:
    ex = execution("a", inputs={"checkpoint_dir": "s3://exa-models/checkpoints/run-1/"})
    _, client = admin(Scenario(executions=[ex]))
    assert client.get_inputs(ref("a")) == {"checkpoint_dir": "s3://exa-models/checkpoints/run-1/"}


@pytest.mark.integration
def test_inputs_admin_only_links_to_are_an_error_not_an_empty_dict(admin) -> None:
    ex = execution("a", inputs={"checkpoint_dir": "s3://exa-models/checkpoints/run-1/"})
    _, client = admin(Scenario(executions=[ex]), AdminFaults(max_inline_bytes=10))
    with pytest.raises(SourceError, match="larger than Admin returns inline"):
        client.get_inputs(ref("a"))


def test_literal_text_renders_scalars_and_skips_collections() -> None:
    def scalar(**kw) -> literals_pb2.Literal:
        return literals_pb2.Literal(scalar=literals_pb2.Scalar(**kw))

    blob = literals_pb2.Blob(uri="s3://b/model.pt")
    assert literal_text(scalar(blob=blob)) == "s3://b/model.pt"
    assert literal_text(scalar(primitive=literals_pb2.Primitive(integer=42))) == "42"
    assert literal_text(scalar(primitive=literals_pb2.Primitive(boolean=True))) == "true"
    generic = struct_pb2.Struct()
    generic.update({"lr": 5e-5})
    assert literal_text(scalar(generic=generic)) == '{"lr": 5e-05}'
    listed = literals_pb2.Literal(collection=literals_pb2.LiteralCollection(literals=[]))
    assert literal_text(listed) is None


# -- relaunch ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_relaunch_creates_exactly_one_execution_with_overwrite_cache(admin) -> None:
    server, client = admin(Scenario(executions=[execution("orig")]))
    new = client.relaunch(ref("orig"), name="orig-rerun")
    assert new == ref("orig-rerun")
    assert server.relaunches_of(ref("orig")) == [new]
    (sent,) = server.calls_of("RelaunchExecution")
    assert sent.overwrite_cache and sent.name == "orig-rerun"
    assert server.calls_of("RecoverExecution") == []
    assert client.get_execution(new).reference_execution == ref("orig")


@pytest.mark.integration
def test_second_relaunch_reports_the_first(admin) -> None:
    server, client = admin(Scenario(executions=[execution("orig")]))
    first = client.relaunch(ref("orig"), name="orig-rerun")
    with pytest.raises(AlreadyRelaunched) as info:
        client.relaunch(ref("orig"), name="orig-rerun")
    assert (info.value.existing, info.value.original, info.value.after_retry) == (
        first,
        ref("orig"),
        False,
    )
    assert server.relaunches_of(ref("orig")) == [first]
    assert server.call_counts()["RelaunchExecution"] == 2  # no flytekit retries of ALREADY_EXISTS


@pytest.mark.integration
def test_lost_relaunch_response_retry_finds_the_relaunch_it_made(admin) -> None:
    server, client = admin(
        Scenario(executions=[execution("orig")]), AdminFaults(lose_relaunch_response=1)
    )
    with pytest.raises(AlreadyRelaunched) as info:
        client.relaunch(ref("orig"), name="orig-rerun")
    assert info.value.existing == ref("orig-rerun") and info.value.after_retry
    assert server.relaunches_of(ref("orig")) == [ref("orig-rerun")]
    assert server.call_counts()["RelaunchExecution"] == 2


@pytest.mark.integration
def test_without_a_fixed_name_flytekits_retry_would_relaunch_twice(admin) -> None:
    # flytekit's own rpc_retries repeating a lost RelaunchExecution, reproduced: the reason
    # `name` is mandatory in AdminClient.relaunch.
    server, _ = admin(
        Scenario(executions=[execution("orig")]), AdminFaults(lose_relaunch_response=1)
    )
    raw = SynchronousFlyteClient(PlatformConfig(endpoint=server.endpoint, insecure=True))
    super(SynchronousFlyteClient, raw).relaunch_execution(
        execution_pb2.ExecutionRelaunchRequest(
            id=identifier_pb2.WorkflowExecutionIdentifier(
                project=PROJECT, domain=DOMAIN, name="orig"
            )
        )
    )
    assert len(server.relaunches_of(ref("orig"))) == 2


@pytest.mark.integration
def test_name_taken_by_an_unrelated_execution_is_not_already_relaunched(admin) -> None:
    server, client = admin(Scenario(executions=[execution("orig"), execution("taken")]))
    with pytest.raises(SourceError) as info:
        client.relaunch(ref("orig"), name="taken")
    assert not isinstance(info.value, AlreadyRelaunched)
    assert "not a relaunch of" in info.value.cause
    assert server.relaunches_of(ref("orig")) == []


@pytest.mark.integration
@pytest.mark.parametrize("name", ["Orig_rerun", "orig-rerun\n"])
def test_invalid_relaunch_name_is_refused_before_any_call(admin, name: str) -> None:
    server, client = admin(Scenario(executions=[execution("orig")]))
    with pytest.raises(UsageError):
        client.relaunch(ref("orig"), name=name)
    assert server.calls == []


@pytest.mark.integration
def test_relaunch_of_missing_execution_is_not_found_once(admin) -> None:
    server, client = admin(Scenario(executions=[execution("orig")]))
    with pytest.raises(NotFoundError):
        client.relaunch(ref("ghost"), name="ghost-rerun")
    assert server.call_counts()["RelaunchExecution"] == 1


@pytest.mark.integration
def test_relaunches_of_maps_originals_to_their_relaunches(admin) -> None:
    scenario = Scenario(
        executions=[
            execution("orig"),
            execution("other"),
            execution(
                "old-rerun", mode="RELAUNCH", reference="other", created=T0 - timedelta(days=9)
            ),
            execution("manual"),
        ]
    )
    server, client = admin(scenario)
    new = client.relaunch(ref("orig"), name="orig-rerun")
    assert client.relaunches_of(PROJECT, DOMAIN, T0 - timedelta(days=1)) == {ref("orig"): new}
    (sent,) = server.calls_of("ListExecutions")
    assert "value_in(mode,3;5)" in sent.filters  # relaunches and recoveries, one listing


# -- configuration ----------------------------------------------------------------------------


@pytest.fixture
def no_flyte_env(monkeypatch, tmp_path: Path) -> Path:
    """No flytekit settings from this machine: empty HOME and cwd, no FLYTE_* variables."""
    for name in (
        "FLYTECTL_CONFIG",
        "_FLYTECTL_CONFIG_PYFLYTE_OVERRIDE",
        "FLYTE_PLATFORM_URL",
        "FLYTE_PLATFORM_INSECURE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.integration
def test_config_from_a_flytectl_yaml_file(admin, no_flyte_env: Path) -> None:
    server, _ = admin(Scenario(executions=[execution("a")]))
    config = no_flyte_env / "config.yaml"
    config.write_text(f"admin:\n  endpoint: dns:///{server.endpoint}\n  insecure: true\n")
    with AdminClient.from_settings(FlyteSettings(config_file=str(config))) as client:
        assert client.endpoint == server.endpoint
        assert client.get_execution(ref("a")).ref == ref("a")


@pytest.mark.integration
def test_config_from_flytectl_config_env(admin, no_flyte_env: Path, monkeypatch) -> None:
    server, _ = admin(Scenario(executions=[execution("a")]))
    config = no_flyte_env / "elsewhere.yaml"
    config.write_text(f"admin:\n  endpoint: {server.endpoint}\n  insecure: true\n")
    monkeypatch.setenv("FLYTECTL_CONFIG", str(config))
    with AdminClient.from_settings(FlyteSettings()) as client:
        assert client.get_execution(ref("a")).phase == "SUCCEEDED"


@pytest.mark.integration
def test_config_from_platform_env_overrides_the_file(
    admin, no_flyte_env: Path, monkeypatch
) -> None:
    server, _ = admin(Scenario(executions=[execution("a")]))
    config = no_flyte_env / "config.yaml"
    config.write_text("admin:\n  endpoint: dns:///flyte.example.com:443\n  insecure: false\n")
    monkeypatch.setenv("FLYTE_PLATFORM_URL", server.endpoint)
    monkeypatch.setenv("FLYTE_PLATFORM_INSECURE", "True")
    with AdminClient.from_settings(FlyteSettings(config_file=str(config))) as client:
        assert client.get_execution(ref("a")).phase == "SUCCEEDED"
    assert load_platform_config(None).endpoint == server.endpoint  # env alone, no file


def test_broken_yaml_is_a_config_error_not_localhost(no_flyte_env: Path) -> None:
    config = no_flyte_env / "config.yaml"
    config.write_text("admin: [endpoint: {\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_platform_config(str(config))


@pytest.fixture
def flytekit_said() -> Iterator[list[logging.LogRecord]]:
    """The records flytekit's logger hands its handlers from here on (WARNING and up), whatever
    those are: flytekit's own after its import, ours once a command adopted them."""
    said: list[logging.LogRecord] = []
    keep = logging.Handler()
    keep.emit = said.append  # type: ignore[method-assign]
    flytekit_log = logging.getLogger("flytekit")
    level = flytekit_log.level
    flytekit_log.addHandler(keep)
    flytekit_log.setLevel(logging.WARNING)
    yield said
    flytekit_log.removeHandler(keep)
    flytekit_log.setLevel(level)


@pytest.mark.parametrize(
    "content,where",
    [
        (
            "admin:\n  endpoint: [a, b\n",
            "line 3, column 1: expected ',' or ']', but got '<stream end>'; "
            "while parsing a flow sequence at line 2, column 13",
        ),
        ("admin:\n\tendpoint: x\n", "line 2, column 1: found character '\\t' that cannot start"),
        ("admin:\n  endpoint: a: b\n", "line 2, column 14: mapping values are not allowed here"),
    ],
    ids=["unclosed", "tab", "colon"],
)
def test_broken_yaml_is_one_line_that_says_where_and_flytekit_says_nothing(
    no_flyte_env: Path, flytekit_said: list[logging.LogRecord], content: str, where: str
) -> None:
    config = no_flyte_env / "bad.yaml"
    config.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_platform_config(str(config))
    # flytekit logs the same problem as a warning of several lines and goes on with its
    # defaults: that warning is not written, our line says it all.
    assert [r.getMessage()[:40] for r in flytekit_said] == []
    line = str(e.value)
    assert line.startswith(f"Flyte config {config}: not valid YAML ({where}"), line
    assert "\n" not in line and line.endswith(")")
    assert "endpoint" not in line  # YAML's problem and where it is, never the file's text


def test_broken_yaml_named_by_flytectl_config_is_named_absolute(
    no_flyte_env: Path, flytekit_said: list[logging.LogRecord], monkeypatch
) -> None:
    (no_flyte_env / "bad.yaml").write_text("admin:\n  endpoint: [a, b\n")
    monkeypatch.setenv("FLYTECTL_CONFIG", "bad.yaml")  # relative: flytekit makes it absolute
    with pytest.raises(ConfigError) as e:
        load_platform_config(None)
    assert str(e.value).startswith(
        f"Flyte config {no_flyte_env / 'bad.yaml'}: not valid YAML (line 3, column 1: "
    ), str(e.value)
    assert flytekit_said == []


@pytest.mark.parametrize("content", ["", "\n# nothing set yet\n"], ids=["empty", "comments"])
def test_empty_flyte_config_says_it_is_empty(
    no_flyte_env: Path, flytekit_said: list[logging.LogRecord], content: str
) -> None:
    config = no_flyte_env / "config.yaml"
    config.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_platform_config(str(config))
    assert str(e.value) == f"Flyte config {config}: empty (no settings in it)"
    assert flytekit_said == []


def test_flytekit_warnings_while_a_config_loads_are_still_said(
    no_flyte_env: Path, flytekit_said: list[logging.LogRecord], monkeypatch
) -> None:
    # Held while flytekit reads its config, and written once the config is taken: only a
    # config refused with our own line drops them.
    monkeypatch.setenv("FLYTECTL_CONFIG", str(no_flyte_env / "gone.yaml"))
    monkeypatch.setenv("FLYTE_PLATFORM_URL", "flyte.example.com:443")
    assert load_platform_config(None).endpoint == "flyte.example.com:443"
    assert ["does not exist" in r.getMessage() for r in flytekit_said] == [True]


def test_client_repr_hides_the_client_secret() -> None:
    platform = PlatformConfig(
        endpoint="flyte.example.com:443",
        client_id="forensics",
        client_credentials_secret="hunter2-s3cr3t",
    )
    client = AdminClient(platform)
    assert "hunter2" not in repr(client) and "flyte.example.com" in repr(client)
    client.close()


# -- shapes: parent, output location, array subtasks, node inputs ------------------------------


@pytest.mark.integration
def test_child_execution_names_its_parent_node(admin) -> None:
    child = execution("child")
    child.parent = (PROJECT, DOMAIN, "parent", "n1")
    _, client = admin(Scenario(executions=[execution("parent"), child]))
    rec = client.get_execution(ref("child"))
    assert rec.mode == "CHILD_WORKFLOW"
    assert (rec.parent.execution, rec.parent.node_id) == (ref("parent"), "n1")
    assert client.get_execution(ref("parent")).parent is None
    listed = {r.ref.name: r.parent for r in client.list_executions(PROJECT, DOMAIN)}
    assert listed["child"] == rec.parent  # the sweep's listing carries it: no extra call


@pytest.mark.integration
def test_offloaded_outputs_are_no_location_of_the_attempts_own(admin) -> None:
    inline = attempt("inl", "n0", 0)
    inline.inline_outputs = True
    ex = execution("inl", nodes=[SandboxNode("n0", "SUCCEEDED", [inline])])
    _, client = admin(Scenario(executions=[ex]))
    (a,) = client.list_attempts(ref("inl"))
    assert a.output_dir is None
    assert "offloaded_outputs" in a.outputs_unknown and "inline" in a.outputs_unknown


@pytest.mark.integration
def test_array_node_subtasks_are_attempts_of_their_own(admin) -> None:
    from forensics.sandbox.scenario import SandboxSubtask

    subtasks = [
        SandboxSubtask(0, "SUCCEEDED"),
        SandboxSubtask(1, "RETRYABLE_FAILED"),
        SandboxSubtask(1, "SUCCEEDED", retry_attempt=1),
    ]
    node = SandboxNode("n0", "SUCCEEDED", [attempt("maps", "n0", 0, pods=[])], is_array=True)
    node.subtasks = subtasks
    _, client = admin(Scenario(executions=[execution("maps", nodes=[node])]))
    own, *subs = client.list_attempts(ref("maps"))
    assert own.is_array and not own.is_elastic and own.pods == ()
    assert [(s.ref.node_id, s.ref.attempt, s.phase) for s in subs] == [
        ("n0-0-n0", 0, "SUCCEEDED"),
        ("n0-0-n1", 0, "RETRYABLE_FAILED"),
        ("n0-0-n1", 1, "SUCCEEDED"),
    ]
    data = "s3://flyte-metadata/metadata/propeller/gs1-production-maps/n0/data"
    assert [s.output_dir for s in subs] == [f"{data}/0/0/0/", f"{data}/0/1/0/", f"{data}/0/1/1/"]
    assert subs[2].pods == ("maps-n0-0-n1-1",)  # propeller's pod = Admin's external_id here
    assert all(s.is_elastic and s.array_node == "n0" for s in subs)
    assert [s.array_index for s in subs] == [0, 1, 1]
    assert subs[2].ended_at == own.ended_at and subs[2].task_type == "python-task"


@pytest.mark.integration
def test_node_inputs_of_a_map_subtask_are_its_element(admin) -> None:
    node = SandboxNode("n0", "SUCCEEDED", [attempt("maps", "n0", 0, pods=[])], is_array=True)
    node.inputs = {"ckpt": ["s3://b/0/", "s3://b/1/"], "lr": "1e-5"}
    server, client = admin(Scenario(executions=[execution("maps", nodes=[node])]))
    sub = AttemptRef(ref("maps"), "n0-0-n1", 0)
    got = client.get_node_inputs(sub, array_node="n0", array_index=1)
    assert got == {"ckpt": "s3://b/1/", "lr": "1e-5"}
    assert client.get_node_inputs(AttemptRef(ref("maps"), "n0", 0)) == {"lr": "1e-5"}
    (req, _) = server.calls_of("GetNodeExecutionData")
    assert req.id.node_id == "n0"  # Admin has no node execution for a v0 subtask
