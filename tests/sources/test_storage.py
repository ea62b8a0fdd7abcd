"""ObjectStore (boto3) against the sandbox S3 (moto's server) over a real socket."""

from __future__ import annotations

import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from forensics.errors import ConfigError, FailureKind, SourceError
from forensics.model import ObjectCheck
from forensics.sandbox.s3_server import S3Faults, S3Rule, S3Server
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxNode,
    SandboxObject,
    SandboxTask,
    Scenario,
)
from forensics.sources.storage import ObjectStore

pytestmark = pytest.mark.integration

UTC = timezone.utc
SIGNAL = datetime(2026, 9, 10, 19, 45, 22, tzinfo=UTC)
RUN = "checkpoints/gs1-distill/bigmodel-c42-nem1b-a2-lr5em5-v1"
BIG = "checkpoints/sweep/huge-run"
SECRET_KEY = "wJalrXUtnFEMI-very-secret-value"
ACCESS_KEY = "AKIAEXAMPLEKEYID0001"
PAGED = 2_500  # three ListObjectsV2 pages
HUGE = 20_000


def _execution() -> SandboxExecution:
    task = SandboxTask("gs1", "production", "train", "v1")
    ex = SandboxExecution("gs1", "production", "azvg5f9v9974m78fvlf7", "SUCCEEDED", SIGNAL, SIGNAL)
    attempts = [
        # attempt 0 finished normally and wrote outputs; attempt 1 was preempted and did not
        SandboxAttempt(0, "SUCCEEDED", SIGNAL, SIGNAL, ["p-0"], task, write_outputs=True),
        SandboxAttempt(1, "SUCCEEDED", SIGNAL, SIGNAL, ["p-1"], task),
    ]
    ex.nodes.append(SandboxNode("n0", "SUCCEEDED", attempts))
    return ex


def _scenario() -> Scenario:
    base = SIGNAL - timedelta(days=2)
    objects = [
        # written every 30 s, in an order unrelated to key order: the newest is not the last key
        SandboxObject(
            "exa-models",
            f"{RUN}/step-{(i * 7) % PAGED:05d}.pt",
            b"w",
            base + timedelta(seconds=30 * i),
        )
        for i in range(PAGED)
    ]
    objects += [
        # a sibling run whose name starts with the same characters
        SandboxObject("exa-models", f"{RUN}-retry/step-00001.pt", b"w", SIGNAL),
        SandboxObject("exa-models", "checkpoints/marker-only/", b""),
        SandboxObject("exa-models", "locked/run/step-1.pt", b"w"),
        SandboxObject("small-bucket", "a", b"1", base),
        SandboxObject("small-bucket", "dir/b", b"2", base + timedelta(hours=1)),
    ]
    objects += [
        # in a bucket of their own: moto filters a bucket's every key for each listing page
        SandboxObject("exa-sweeps", f"{BIG}/{i:06d}", b"", base + timedelta(seconds=i % 9_973))
        for i in range(HUGE)
    ]
    return Scenario(executions=[_execution()], objects=objects, buckets={"exa-models"})


@pytest.fixture(scope="module")
def s3():
    with S3Server(_scenario()) as server:
        yield server


@pytest.fixture
def env(s3, monkeypatch):
    """Only boto3's standard environment points the store at the sandbox."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3.faults = S3Faults()
    s3.requests.clear()
    yield
    s3.faults = S3Faults()


@pytest.fixture
def store(env) -> ObjectStore:
    return ObjectStore.default()


def output_dir(attempt: int) -> str:
    ex = _execution()
    return Scenario().output_dir(ex, ex.nodes[0], attempt)


# -- outputs.pb --------------------------------------------------------------------------------


def test_store_finds_the_endpoint_through_AWS_ENDPOINT_URL_S3(store, s3):
    assert store.endpoint == s3.url
    assert store.outputs_check(output_dir(0)).state == "present"
    assert s3.requests[-1].method == "HEAD"


def test_attempt_that_wrote_outputs_is_present(store):
    assert store.outputs_check(output_dir(0)).state == "present"


def test_preempted_attempt_without_outputs_is_missing(store):
    check = store.outputs_check(output_dir(1))
    assert (check.state, check.reason) == ("missing", None)


def test_output_dir_without_trailing_slash_checks_the_same_object(store, s3):
    assert store.outputs_check(output_dir(1).rstrip("/")).state == "missing"
    assert s3.requests[0].path.endswith("/n0/data/1/outputs.pb")


def test_forbidden_outputs_are_unknown_never_missing(store, s3):
    s3.faults = S3Faults(access_denied=[S3Rule(bucket="flyte-metadata")])
    check = store.outputs_check(output_dir(1))
    assert check.state == "unknown"
    assert check.reason.startswith("forbidden")
    assert "403" in check.reason


def test_missing_bucket_is_unknown_never_missing(store):
    check = store.check_object("s3://no-such-metadata-bucket/metadata/n0/data/0/outputs.pb")
    assert (check.state, check.reason) == ("unknown", "no such bucket")
    # a HEAD 404 has no body; the GET's error document is what tells the two apart
    assert store.calls == {"HeadObject": 1, "GetObject": 1}


def test_missing_key_in_a_bucket_already_seen_costs_one_call(store):
    assert store.outputs_check(output_dir(0)).state == "present"
    assert store.outputs_check(output_dir(1)).state == "missing"
    assert store.calls == {"HeadObject": 2}


def test_slow_down_twice_then_success_is_retried_by_botocore(store, s3):
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="flyte-metadata", method="HEAD", times=2)])
    assert store.outputs_check(output_dir(0)).state == "present"
    assert [r.status for r in s3.requests] == [503, 503, 200]
    assert store.calls == {"HeadObject": 3}  # every request sent, retries included


def test_permanent_slow_down_is_unknown_throttled(env, s3):
    store = ObjectStore.default(retries=1)  # the default 4 retries back off for ~8 s
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="flyte-metadata")])
    check = store.outputs_check(output_dir(1))
    assert check.state == "unknown"
    assert check.reason.startswith("throttled")
    assert "2 attempts" in check.reason
    assert [r.status for r in s3.requests] == [503, 503]


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("gs://flyte-metadata/metadata/n0/data/0/outputs.pb", "unsupported scheme gs://"),
        ("abfs://container@account/outputs.pb", "unsupported scheme abfs://"),
        ("/var/flyte/metadata/n0/data/0/outputs.pb", "unsupported location"),
        ("file:///tmp/outputs.pb", "unsupported scheme file://"),
        ("s3:///outputs.pb", "malformed URI"),
        ("s3://flyte-metadata", "malformed URI"),
        ("s3://Not_A Bucket!/outputs.pb", "malformed URI"),
    ],
)
def test_unreadable_location_is_unknown_with_reason(store, s3, uri, reason):
    check = store.check_object(uri)
    assert check.state == "unknown"
    assert reason in check.reason
    assert s3.requests == []


def test_concurrent_checks_share_a_pool_sized_for_the_workers(env, caplog):
    store = ObjectStore.default(workers=16)
    uris = [output_dir(i % 2) + "outputs.pb" for i in range(160)]
    with caplog.at_level(logging.WARNING, logger="urllib3"), ThreadPoolExecutor(16) as pool:
        states = list(pool.map(store.check_object, uris))
    assert [c.state for c in states] == ["present", "missing"] * 80
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]


# -- checkpoint prefixes -----------------------------------------------------------------------


def test_checkpoint_listing_over_1000_objects_is_paginated(store, s3):
    listing = store.list_prefix(f"s3://exa-models/{RUN}/")
    assert (listing.state, listing.objects) == ("present", PAGED)
    assert listing.latest == SIGNAL - timedelta(days=2) + timedelta(seconds=30 * (PAGED - 1))
    assert store.calls["ListObjectsV2"] >= 2
    assert sum(r.is_listing for r in s3.requests) == store.calls["ListObjectsV2"]


def test_prefix_without_slash_lists_the_same_prefix_not_its_siblings(store):
    bare = store.list_prefix(f"s3://exa-models/{RUN}")
    slashed = store.list_prefix(f"s3://exa-models/{RUN}/")
    assert bare == slashed
    assert bare.uri == f"s3://exa-models/{RUN}/"
    assert bare.objects == PAGED  # not the `-retry` sibling's object


def test_empty_checkpoint_prefix_is_empty(store):
    listing = store.list_prefix("s3://exa-models/checkpoints/never-written/")
    assert (listing.state, listing.objects, listing.latest, listing.reason) == (
        "empty",
        0,
        None,
        None,
    )


def test_folder_marker_alone_is_not_a_checkpoint(store):
    assert store.list_prefix("s3://exa-models/checkpoints/marker-only").state == "empty"


@pytest.mark.parametrize("uri", ["s3://small-bucket", "s3://small-bucket/"])
def test_bucket_root_lists_the_whole_bucket(store, uri):
    listing = store.list_prefix(uri)
    assert (listing.uri, listing.objects) == ("s3://small-bucket/", 2)
    assert listing.latest == SIGNAL - timedelta(days=2) + timedelta(hours=1)


def test_listing_a_missing_bucket_is_unknown_never_empty(store):
    listing = store.list_prefix("s3://deleted-bucket/checkpoints/run/")
    assert (listing.state, listing.reason) == ("unknown", "no such bucket")


def test_listing_a_forbidden_prefix_is_unknown_never_empty(store, s3):
    s3.faults = S3Faults(access_denied=[S3Rule(bucket="exa-models", prefix="locked/")])
    listing = store.list_prefix("s3://exa-models/locked/run")
    assert listing.state == "unknown"
    assert listing.reason == "forbidden (403 AccessDenied)"


def test_listing_throttled_for_good_is_unknown_never_empty(env, s3):
    store = ObjectStore.default(retries=1)
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="exa-models", prefix=RUN)])
    listing = store.list_prefix(f"s3://exa-models/{RUN}")
    assert listing.state == "unknown"
    assert listing.reason.startswith("throttled (503 SlowDown")


def test_listing_throttled_mid_way_recovers_and_counts_every_page(store, s3):
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="exa-models", prefix=RUN, times=1)])
    assert store.list_prefix(f"s3://exa-models/{RUN}").objects == PAGED
    assert [r.status for r in s3.requests][:2] == [503, 200]


@pytest.mark.parametrize("uri", ["gs://exa-models/checkpoints/", "checkpoints/run/", "s3://"])
def test_listing_an_unreadable_location_is_unknown(store, uri):
    listing = store.list_prefix(uri)
    assert listing.state == "unknown"
    assert listing.reason


def test_prefix_with_twenty_thousand_objects_is_counted_exactly(store):
    listing = store.list_prefix(f"s3://exa-sweeps/{BIG}")
    assert (listing.state, listing.objects) == ("present", HUGE)
    assert listing.latest == SIGNAL - timedelta(days=2) + timedelta(seconds=9_972)
    assert store.calls["ListObjectsV2"] == HUGE // 1000


# -- configuration and errors ------------------------------------------------------------------


def test_explicit_client_is_used_as_given(s3):
    client = boto3.client(
        "s3",
        endpoint_url=s3.url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    store = ObjectStore(client)
    assert store.list_prefix("s3://small-bucket").objects == 2
    assert store.calls == {"ListObjectsV2": 1}


def test_AWS_REGION_wins_over_AWS_DEFAULT_REGION(env, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert ObjectStore.default().region == "eu-west-1"


def test_unknown_AWS_PROFILE_is_a_configuration_error(env, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_PROFILE", "incident-readonly")
    with pytest.raises(ConfigError, match="incident-readonly"):
        ObjectStore.default()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_endpoint_is_unknown_and_never_shows_credentials(env, monkeypatch):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    store = ObjectStore.default(retries=0)
    check = store.outputs_check(output_dir(0))
    listing = store.list_prefix(f"s3://exa-models/{RUN}")
    for reason in (check.reason, listing.reason):
        assert reason.startswith(f"cannot reach S3 {endpoint}")
    shown = " ".join([check.reason, listing.reason, repr(store), str(check), str(listing)])
    assert SECRET_KEY not in shown
    assert ACCESS_KEY not in shown


def test_forbidden_reason_never_shows_credentials(store, s3):
    s3.faults = S3Faults(access_denied=[S3Rule()])
    shown = " ".join(
        [
            store.outputs_check(output_dir(0)).reason,
            store.list_prefix(f"s3://exa-models/{RUN}").reason,
        ]
    )
    assert SECRET_KEY not in shown
    assert ACCESS_KEY not in shown


def test_requests_name_the_tool_in_their_user_agent(store):
    # S3 access logs and a proxy's logs show which tool made the calls; botocore's own parts stay
    sent: list[str] = []

    def record(request, **_):
        agent = request.headers["User-Agent"]  # bytes once the request is prepared
        sent.append(agent.decode() if isinstance(agent, bytes) else agent)

    store._client.meta.events.register("before-send.s3", record)
    store.outputs_check(output_dir(0))
    store.outputs_check(output_dir(1))
    assert len(sent) == 2
    for agent in sent:
        assert agent.startswith("elastic-audit/0.1.0 Boto3/")
        assert " Botocore/" in agent and " Python/" in agent


def test_a_listing_page_answers_for_every_key_in_the_range_it_covers(store, s3):
    """`list_from` is one ListObjectsV2 page in S3's key order: a key it covers and does not
    hold is missing, as a HEAD says; what lies past a truncated page is not answered."""
    run = f"{RUN}/step-"
    page = store.list_from("exa-models", run, f"{run}00009.pt", max_keys=3)
    assert not isinstance(page, ObjectCheck)
    assert sorted(page.keys) == [f"{run}{i:05d}.pt" for i in (10, 11, 12)]
    assert page.last == f"{run}00012.pt"  # truncated: the range ends at its last key
    assert page.covers(f"{run}00010.5.pt") and page.check(f"{run}00010.5.pt").state == "missing"
    assert page.check(f"{run}00011.pt").state == "present"
    assert not page.covers(f"{run}00009.pt")  # StartAfter itself is not in the range
    assert not page.covers(f"{run}00013.pt")  # past the page
    assert not page.covers(f"{RUN}-retry/step-00001.pt")  # not under the prefix
    last = store.list_from("exa-models", run, f"{run}02498.pt")
    assert not isinstance(last, ObjectCheck) and last.keys == {f"{run}02499.pt"}
    assert last.last is None and last.covers(f"{run}09999.pt")  # complete: to the prefix's end
    for key in (f"{run}00011.pt", f"{run}00010.5.pt"):
        head = store.check_object(f"s3://exa-models/{key}")
        assert page.check(key) == head
    assert store.list_from("never-seeded", "", "").state == "unknown"


def test_a_listing_refused_is_unknown_not_empty(store, s3):
    # A role with s3:GetObject but no s3:ListBucket: the scan then HEADs each (callplan.walk).
    s3.faults = S3Faults(access_denied=[S3Rule(method="GET", prefix=f"{RUN}/")])
    page = store.list_from("exa-models", f"{RUN}/", "")
    assert isinstance(page, ObjectCheck) and page.state == "unknown"
    assert "AccessDenied" in (page.reason or "")


def test_a_truncated_page_without_keys_answers_nothing(store):
    # A listing that says it goes on but lists nothing covers no range: trusting it would make
    # every key after StartAfter "missing".
    from botocore.stub import Stubber

    with Stubber(store._client) as stub:
        stub.add_response("list_objects_v2", {"IsTruncated": True, "KeyCount": 0})
        page = store.list_from("exa-models", "run/", "run/a")
    assert isinstance(page, ObjectCheck) and page.state == "unknown"
    assert "truncated listing page without keys" in (page.reason or "")


@pytest.mark.parametrize(
    "second",
    [
        {"IsTruncated": True},  # no token to go on from
        {"IsTruncated": True, "NextContinuationToken": "t1"},  # the token it gave before
    ],
    ids=["no-token", "repeated-token"],
)
def test_a_listing_cut_short_is_unknown_never_a_count(store, second):
    # botocore's paginator ends quietly where a truncated page gives no token; a checkpoint
    # count (and the checkpoint write times) from such a listing would pass a part for the whole.
    from botocore.stub import Stubber

    first = {
        "IsTruncated": True,
        "NextContinuationToken": "t1",
        "Contents": [{"Key": "run/ckpt/a.pt", "LastModified": SIGNAL, "Size": 1}],
    }
    with Stubber(store._client) as stub:
        for page in (first, second, first, second):
            stub.add_response(
                "list_objects_v2", {**page, "KeyCount": len(page.get("Contents", []))}
            )
        listing = store.list_prefix("s3://exa-models/run/ckpt")
        with pytest.raises(SourceError) as raised:
            store.object_times("s3://exa-models/run/ckpt")
    assert (listing.state, listing.failure) == ("unknown", FailureKind.BAD_ANSWER)
    assert "truncated listing page without a new continuation token" in (listing.reason or "")
    assert raised.value.kind == FailureKind.BAD_ANSWER
