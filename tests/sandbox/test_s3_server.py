"""The sandbox S3 itself: seeding, backdating, faults with S3's own error documents, lifecycle."""

from __future__ import annotations

import logging
import socket
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError
from flyteidl.core.errors_pb2 import ContainerError, ErrorDocument

from forensics.sandbox.s3_server import S3Faults, S3Rule, S3Server
from forensics.sandbox.scenario import (
    SandboxAttempt,
    SandboxExecution,
    SandboxNode,
    SandboxObject,
    SandboxTask,
    Scenario,
)

pytestmark = pytest.mark.integration

UTC = timezone.utc
SIGNAL = datetime(2026, 9, 10, 19, 45, 22, tzinfo=UTC)
SUCCESS = datetime(2026, 9, 10, 19, 45, 29, tzinfo=UTC)
CHECKPOINT = "checkpoints/gs1-distill/run-a/step-1000/model.pt"


def _execution() -> SandboxExecution:
    task = SandboxTask("gs1", "production", "train", "v1")
    ex = SandboxExecution("gs1", "production", "f1a2b3c4d5e6f7a8b9c0", "SUCCEEDED", SIGNAL, SUCCESS)
    attempts = [
        SandboxAttempt(
            0,
            "RETRYABLE_FAILED",
            SIGNAL - timedelta(hours=1),
            SIGNAL - timedelta(minutes=30),
            ["p-n0-0"],
            task,
            write_error=True,
            reason="worker 3 exited with code 1",
        ),
        SandboxAttempt(1, "SUCCEEDED", SIGNAL, SUCCESS, ["p-n0-1"], task, write_outputs=True),
        SandboxAttempt(2, "SUCCEEDED", SIGNAL, SUCCESS, ["p-n0-2"], task),
    ]
    ex.nodes.append(SandboxNode("n0", "SUCCEEDED", attempts))
    return ex


def _scenario() -> Scenario:
    objects = [
        SandboxObject("exa-models", CHECKPOINT, b"weights", SIGNAL - timedelta(hours=3)),
        SandboxObject("exa-models", "checkpoints/fresh/model.pt", b"new"),
        SandboxObject("exa-models", "locked/model.pt", b"x"),
        SandboxObject("exa-models", "public/model.pt", b"x"),
    ]
    # The metadata bucket is not listed: seeding attempt files must create it.
    return Scenario(executions=[_execution()], objects=objects, buckets={"exa-models"})


def client(url: str, retries: int = 0):
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="sandbox",
        aws_secret_access_key="sandbox",
        config=Config(retries={"mode": "standard", "max_attempts": retries}),
    )


@pytest.fixture(scope="module")
def server():
    with S3Server(_scenario()) as s3:
        yield s3


@pytest.fixture
def s3(server):
    server.faults = S3Faults()
    server.requests.clear()
    yield server
    server.faults = S3Faults()


def output_key(attempt: int, name: str) -> tuple[str, str]:
    ex = _execution()
    uri = Scenario().output_dir(ex, ex.nodes[0], attempt) + name
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def test_backdated_object_lists_and_heads_with_its_backdated_time(s3):
    c = client(s3.url)
    listed = c.list_objects_v2(Bucket="exa-models", Prefix="checkpoints/gs1-distill/")
    assert [o["Key"] for o in listed["Contents"]] == [CHECKPOINT]
    assert listed["Contents"][0]["LastModified"] == SIGNAL - timedelta(hours=3)
    head = c.head_object(Bucket="exa-models", Key=CHECKPOINT)
    assert head["LastModified"] == SIGNAL - timedelta(hours=3)


def test_object_without_last_modified_is_stamped_at_seeding(s3):
    c = client(s3.url)
    head = c.head_object(Bucket="exa-models", Key="checkpoints/fresh/model.pt")
    assert datetime.now(UTC) - head["LastModified"] < timedelta(minutes=10)


def test_successful_attempt_has_outputs_pb_written_at_its_end(s3):
    c = client(s3.url)
    bucket, key = output_key(1, "outputs.pb")
    assert bucket == "flyte-metadata"
    got = c.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == b""  # an empty LiteralMap: the task returns nothing
    assert got["LastModified"] == SUCCESS


def test_failed_attempt_has_a_recoverable_error_document(s3):
    bucket, key = output_key(0, "error.pb")
    doc = ErrorDocument.FromString(client(s3.url).get_object(Bucket=bucket, Key=key)["Body"].read())
    assert doc.error.kind == ContainerError.RECOVERABLE
    assert doc.error.message == "worker 3 exited with code 1"
    assert doc.error.timestamp.ToDatetime(tzinfo=UTC) == SIGNAL - timedelta(minutes=30)


def test_attempt_that_wrote_nothing_has_no_files(s3):
    c = client(s3.url)
    bucket, key = output_key(2, "")
    assert c.list_objects_v2(Bucket=bucket, Prefix=key)["KeyCount"] == 0
    bucket, key = output_key(1, "")
    assert c.list_objects_v2(Bucket=bucket, Prefix=key)["KeyCount"] == 1  # outputs.pb only


def test_bucket_not_seeded_is_no_such_bucket(s3):
    with pytest.raises(ClientError) as e:
        client(s3.url).list_objects_v2(Bucket="never-seeded")
    assert e.value.response["Error"]["Code"] == "NoSuchBucket"


def test_slow_down_is_s3s_error_document_and_botocore_reads_its_code(s3):
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="exa-models")])
    raw = requests.get(f"{s3.url}/exa-models?list-type=2&prefix=checkpoints%2F", timeout=10)
    assert raw.status_code == 503
    assert "<Code>SlowDown</Code>" in raw.text
    assert raw.headers["x-amz-request-id"]
    with pytest.raises(ClientError) as e:
        client(s3.url).list_objects_v2(Bucket="exa-models", Prefix="checkpoints/")
    assert e.value.response["Error"]["Code"] == "SlowDown"


def test_head_errors_have_no_body_as_in_s3(s3):
    s3.faults = S3Faults(access_denied=[S3Rule(bucket="exa-models")])
    raw = requests.head(f"{s3.url}/exa-models/{CHECKPOINT}", timeout=10)
    assert raw.status_code == 403
    assert raw.content == b""
    with pytest.raises(ClientError) as e:
        client(s3.url).head_object(Bucket="exa-models", Key=CHECKPOINT)
    assert e.value.response["Error"]["Code"] == "403"


def test_slow_down_n_times_then_moto_answers(s3):
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="exa-models", prefix="checkpoints/", times=2)])
    c = client(s3.url, retries=3)
    assert c.head_object(Bucket="exa-models", Key=CHECKPOINT)["ContentLength"] == 7
    assert [(r.method, r.status) for r in s3.requests] == [("HEAD", 503)] * 2 + [("HEAD", 200)]


def test_slow_down_hits_only_the_chosen_method_and_prefix(s3):
    s3.faults = S3Faults(slow_down=[S3Rule(bucket="exa-models", prefix="locked/", method="GET")])
    c = client(s3.url)
    assert c.head_object(Bucket="exa-models", Key="locked/model.pt")["ContentLength"] == 1
    assert c.get_object(Bucket="exa-models", Key="public/model.pt")["Body"].read() == b"x"
    with pytest.raises(ClientError):
        c.get_object(Bucket="exa-models", Key="locked/model.pt")


def test_access_denied_covers_a_prefix_and_its_listings_only(s3):
    s3.faults = S3Faults(access_denied=[S3Rule(bucket="exa-models", prefix="locked/")])
    c = client(s3.url)
    with pytest.raises(ClientError) as e:
        c.get_object(Bucket="exa-models", Key="locked/model.pt")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as e:
        c.list_objects_v2(Bucket="exa-models", Prefix="locked/")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    assert c.get_object(Bucket="exa-models", Key="public/model.pt")["Body"].read() == b"x"
    assert c.list_objects_v2(Bucket="exa-models", Prefix="public/")["KeyCount"] == 1


def test_latency_is_added_to_every_request(s3):
    s3.faults = S3Faults(latency=0.3)
    c = client(s3.url)
    started = time.monotonic()
    c.head_object(Bucket="exa-models", Key=CHECKPOINT)
    c.head_object(Bucket="exa-models", Key=CHECKPOINT)
    assert time.monotonic() - started >= 0.6


def test_requests_are_recorded_with_their_status(s3):
    c = client(s3.url)
    c.head_object(Bucket="exa-models", Key=CHECKPOINT)
    with pytest.raises(ClientError):
        c.head_object(Bucket="exa-models", Key="checkpoints/none")
    c.list_objects_v2(Bucket="exa-models", Prefix="checkpoints/")
    got = [(r.method, r.path, r.status, r.is_listing) for r in s3.requests]
    assert got == [
        ("HEAD", f"/exa-models/{CHECKPOINT}", 200, False),
        ("HEAD", "/exa-models/checkpoints/none", 404, False),
        ("GET", "/exa-models", 200, True),
    ]


def test_a_second_server_in_the_same_process_is_refused(server):
    with pytest.raises(RuntimeError, match="another S3Server"):
        S3Server(Scenario()).start()
    assert client(server.url).head_object(Bucket="exa-models", Key=CHECKPOINT)


def _refused(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_stop_closes_the_port_and_forgets_the_scenario(server):
    url = server.url
    server.stop()
    try:
        assert _refused(url)
        with S3Server(Scenario(buckets={"other-bucket"})) as fresh:
            names = [b["Name"] for b in client(fresh.url).list_buckets()["Buckets"]]
            assert names == ["other-bucket"]
    finally:
        server.start()  # the module fixture's server, for any test after this one
    assert client(server.url).head_object(Bucket="exa-models", Key=CHECKPOINT)


def test_naive_last_modified_is_refused_and_leaves_nothing_running(server):
    server.stop()
    try:
        naive = Scenario(objects=[SandboxObject("exa-models", "k", b"", datetime(2026, 9, 10))])
        bad = S3Server(naive)
        with pytest.raises(ValueError, match="timezone-aware"):
            bad.start()
        with S3Server(Scenario(buckets={"after-failure"})) as fresh:
            names = [b["Name"] for b in client(fresh.url).list_buckets()["Buckets"]]
            assert names == ["after-failure"]
    finally:
        server.start()


def test_connections_stay_open_across_requests_as_s3_keeps_them(s3, caplog):
    # boto3 over one connection for a HEAD that finds, a HEAD that misses (404), an error
    # document and a listing: a server that closed after each answer would make every request
    # pay a new TCP connection (and a new server thread), which real S3 never charges.
    c = client(s3.url)
    with caplog.at_level(logging.DEBUG, logger="urllib3.connectionpool"):
        c.head_object(Bucket="exa-models", Key=CHECKPOINT)
        with pytest.raises(ClientError):
            c.head_object(Bucket="exa-models", Key="checkpoints/none")
        with pytest.raises(ClientError):
            c.get_object(Bucket="no-such-bucket", Key="key")
        c.list_objects_v2(Bucket="exa-models", Prefix="checkpoints/")
        c.head_object(Bucket="exa-models", Key=CHECKPOINT)
    # urllib3 logs each connect: the first one, and any reconnect after the server closed one
    connects = ("Starting new HTTP connection", "Resetting dropped connection")
    opened = [r for r in caplog.records if r.getMessage().startswith(connects)]
    assert [r.status for r in s3.requests] == [200, 404, 404, 200, 200]
    assert len(opened) == 1


def test_server_errors_go_to_the_log_not_to_stderr(s3, capfd, caplog, monkeypatch):
    # cheroot prints a failing request's traceback to stderr; the demo's stderr is the scan's
    def broken(environ, start_response):
        raise RuntimeError("sandbox bug")

    monkeypatch.setattr(s3._server, "wsgi_app", broken)
    # As in a fresh process: no stderr handler left by a CLI run earlier in this one.
    root = logging.getLogger()
    mine = [h for h in root.handlers if not getattr(h, "_elastic_audit", False)]
    monkeypatch.setattr(root, "handlers", mine)
    with caplog.at_level(logging.DEBUG, logger="forensics.sandbox.s3_server"):
        response = requests.get(f"{s3.url}/exa-models/key", timeout=10)
    assert response.status_code == 500
    assert "sandbox bug" in caplog.text
    assert "sandbox bug" not in capfd.readouterr().err


def _keys(pages) -> list[str]:
    return [o["Key"] for page in pages for o in page.get("Contents", ())]


@pytest.mark.parametrize(
    ("prefix", "start_after", "max_keys"),
    [
        ("", "", 1000),
        ("checkpoints/", "", 1),
        ("checkpoints/", "checkpoints/fresh/model.pt", 1000),
        ("checkpoints/", "checkpoints/a", 1),  # a StartAfter that is no key
        ("", "locked/model.pt", 2),
        ("public/", "zzz", 5),
        ("no-such/", "", 5),
    ],
)
def test_listings_page_as_s3_does(s3, prefix, start_after, max_keys):
    """ListObjectsV2 as the S3 API Reference has it: keys in UTF-8 binary order, only those after
    StartAfter, at most MaxKeys a page, and a ContinuationToken that goes on from the last page."""
    seeded = sorted(
        o.key
        for o in _scenario().objects
        if o.bucket == "exa-models" and o.key.startswith(prefix) and o.key > start_after
    )
    args = {"Bucket": "exa-models", "Prefix": prefix, "MaxKeys": max_keys}
    if start_after:
        args["StartAfter"] = start_after
    pages = list(client(s3.url).get_paginator("list_objects_v2").paginate(**args))
    assert _keys(pages) == seeded
    assert all(len(p.get("Contents", ())) <= max_keys for p in pages)
    assert [p["IsTruncated"] for p in pages] == [True] * (len(pages) - 1) + [False]
    assert all(p["KeyCount"] == len(p.get("Contents", ())) for p in pages)


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"Prefix": "checkpoints/"},
        {"Prefix": "checkpoints/", "StartAfter": "checkpoints/a"},
        {"MaxKeys": 2},
        {"Prefix": "no-such/"},
        {"Prefix": "odd/"},  # keys XML and URLs must escape
        {"Prefix": "sums/"},  # a checksum algorithm
        {"Delimiter": "/"},  # moto's own answer
        {"FetchOwner": True},  # moto's own answer
    ],
)
def test_listing_pages_answer_as_moto_answers(s3, args):
    """The front answers plain ListObjectsV2 pages from its index: what boto3 reads of them is
    what it reads of moto's own page, tokens aside."""
    c = client(s3.url)
    moto = client("http://{}:{}".format(*s3._moto.get_host_and_port()))
    c.put_object(Bucket="exa-models", Key="odd/a&b <c> 'd\" é+f.pt", Body=b"1")
    c.put_object(Bucket="exa-models", Key="sums/x", Body=b"1", ChecksumAlgorithm="SHA256")

    def read(via) -> dict:
        page = via.list_objects_v2(Bucket="exa-models", **args)
        page.pop("ResponseMetadata")
        return {k: v for k, v in page.items() if k != "NextContinuationToken"}

    try:
        ours, theirs = read(c), read(moto)
        assert ours == theirs
    finally:
        c.delete_object(Bucket="exa-models", Key="odd/a&b <c> 'd\" é+f.pt")
        c.delete_object(Bucket="exa-models", Key="sums/x")


def test_plain_listings_are_answered_by_the_front_and_the_rest_by_moto(s3, monkeypatch):
    answered = []
    page = s3.listings.page
    monkeypatch.setattr(s3.listings, "page", lambda *a: answered.append(page(*a)) or answered[-1])
    c = client(s3.url)
    c.list_objects_v2(Bucket="exa-models", Prefix="checkpoints/")
    c.list_objects_v2(Bucket="exa-models", Delimiter="/")
    with pytest.raises(ClientError) as e:
        c.list_objects_v2(Bucket="never-seeded")
    assert e.value.response["Error"]["Code"] == "NoSuchBucket"
    assert [body is not None for body in answered] == [True, False, False]


def test_keys_that_need_escaping_round_trip_through_the_fault_front(s3):
    # The front passes the request's own URI on: keys with XML and URL metacharacters and
    # non-ASCII letters are stored, listed (URL-encoded, as botocore asks) and read back.
    c = client(s3.url)
    odd = "odd/a&b <c> 'd\" é+f%20g.pt"
    c.put_object(Bucket="exa-models", Key=odd, Body=b"odd", Metadata={"run": "a"})
    try:
        assert _keys([c.list_objects_v2(Bucket="exa-models", Prefix="odd/")]) == [odd]
        got = c.get_object(Bucket="exa-models", Key=odd)
        assert got["Body"].read() == b"odd"
        assert got["Metadata"] == {"run": "a"}
    finally:
        c.delete_object(Bucket="exa-models", Key=odd)


def test_a_conditional_write_is_answered_as_s3_answers_it(s3):
    c = client(s3.url)
    key = "state/guard.json"
    try:
        first = c.put_object(Bucket="exa-models", Key=key, Body=b"1", IfNoneMatch="*")
        with pytest.raises(ClientError) as e:
            c.put_object(Bucket="exa-models", Key=key, Body=b"2", IfNoneMatch="*")
        assert e.value.response["Error"]["Code"] == "PreconditionFailed"
        c.put_object(Bucket="exa-models", Key=key, Body=b"3", IfMatch=first["ETag"])
        assert c.get_object(Bucket="exa-models", Key=key)["Body"].read() == b"3"
    finally:
        c.delete_object(Bucket="exa-models", Key=key)


def test_the_sandbox_uses_only_motos_public_names():
    """moto's documented server and reset API, and its S3 backend's public methods: a sandbox
    that survives `pip install -U moto` (issue 44)."""
    import ast
    from pathlib import Path

    import forensics.sandbox

    allowed = {
        ("moto.server", "ThreadedMotoServer"),
        ("moto.core", "DEFAULT_ACCOUNT_ID"),
        ("moto.s3.models", "s3_backends"),
    }
    used = set()
    for path in Path(forensics.sandbox.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("moto"):
                used.update((node.module, a.name) for a in node.names)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("moto") for a in node.names), path
    assert used <= allowed
    assert ("moto.server", "ThreadedMotoServer") in used


def test_a_write_over_http_is_listed_at_once(s3):
    c = client(s3.url)
    listed = c.list_objects_v2(Bucket="exa-models", Prefix="fresh-")
    assert listed["KeyCount"] == 0
    c.put_object(Bucket="exa-models", Key="fresh-a", Body=b"1")
    assert [
        o["Key"] for o in c.list_objects_v2(Bucket="exa-models", Prefix="fresh-")["Contents"]
    ] == ["fresh-a"]
    c.delete_object(Bucket="exa-models", Key="fresh-a")
    assert c.list_objects_v2(Bucket="exa-models", Prefix="fresh-")["KeyCount"] == 0
