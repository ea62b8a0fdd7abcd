"""Guard mode end to end (docs/deployment.md): the real CLI, the sandbox, a loopback webhook receiver.

Each test runs its own sandbox: they add incidents to it while it runs and break its Admin.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import grpc
import jsonschema
import pytest
from support import paths
from support.cli import run
from support.expected import EXPECTED_FINDINGS
from support.guard import SECRET_PATH, add_incident
from support.scan import CONFIG, WINDOW, key, point_at

from forensics.model import UTC, rfc3339
from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.stack import sandbox

pytestmark = pytest.mark.integration

# Admin answers UNAVAILABLE at once during an outage: no retries, so the test does not wait.
GUARD_CONFIG = CONFIG.replace("[flyte]\n", "[flyte]\nretries = 0\n")
FIRST = WINDOW  # the first run of a state scans the incident's week


@pytest.fixture
def box():
    with sandbox(reference_scenario()) as b:
        yield b


@pytest.fixture
def env(box, tmp_path, monkeypatch):
    point_at(box, tmp_path, monkeypatch, GUARD_CONFIG)
    monkeypatch.delenv("ELASTIC_AUDIT_NOTIFY", raising=False)
    return tmp_path


def guard(capsys, *args: str) -> tuple[int, dict, str]:
    code, out, err = run(["scan", "--no-progress", "-o", "json", *args], capsys)
    return code, json.loads(out) if out.strip() else {}, err


def names(items: list[dict]) -> set[str]:
    return {i["execution"]["name"] for i in items}


def test_each_finding_is_notified_once_and_a_failed_delivery_is_sent_again(env, box, hook, capsys):
    state = str(env / "state.json")
    # Run 1: the seeded incident and its neighbours, all new, in one POST.
    code, report, err = guard(
        capsys, *FIRST, "--state", state, "--notify", hook.url, "--report", "run1.json"
    )
    assert code == 1, err
    assert json.loads((env / "run1.json").read_text()) == report  # `new` in --report too
    assert len(hook.posts()) == 1
    first = hook.posts()[0]
    assert "azvg5f9v9974m78fvlf7" in names(first["new_findings"])
    assert {key(f) for f in first["new_findings"]} == {key(f) for f in report["findings"]}
    assert first["text"].startswith("elastic-audit: 5 new affected, 1 new suspected")
    assert all(f["new"] is True for f in report["findings"])
    schema = json.loads(paths.SCHEMA.read_text())
    jsonschema.validate(report, schema)

    # A new silent green lands in the live sandbox; run 2 continues from the state.
    add_incident(box, "guardnew00000000001", datetime(2026, 9, 11, 23, 30, tzinfo=UTC))
    code, report, err = guard(
        capsys, "--until", "2026-09-12", "--state", state, "--notify", hook.url
    )
    assert code == 1, err
    assert report["window"] == {"start": "2026-09-10T22:00:00Z", "end": "2026-09-12T00:00:00Z"}
    assert len(hook.posts()) == 2
    assert names(hook.posts()[1]["new_findings"]) == {"guardnew00000000001"}
    assert {f["execution"]["name"]: f["new"] for f in report["findings"]} == {
        "guardnew00000000001": True
    }

    # Run 3: another one, but the webhook fails: exit 3, the secret path never printed.
    add_incident(box, "guardnew00000000002", datetime(2026, 9, 12, 3, 0, tzinfo=UTC))
    hook.status = 503
    code, report, err = guard(
        capsys, "--until", "2026-09-12T06:00:00Z", "--state", state, "--notify", hook.url, "-v"
    )
    assert code == 3
    assert f"notify {hook.base}: HTTP 503 after retries" in err
    assert SECRET_PATH not in err and "SECRET" not in err and "xoxsecret" not in err
    failed = [json.loads(b) for m, _, b in hook.requests if m == "POST"][2:]
    assert len(failed) == 4  # the first try and three retries
    # The first new one is in this window too (the overlap), already notified: not in the POST.
    assert names(report["findings"]) == {"guardnew00000000001", "guardnew00000000002"}
    assert all(names(p["new_findings"]) == {"guardnew00000000002"} for p in failed)
    saved = json.loads(Path(state).read_text())
    assert saved["items"]["finding:gs1:production:guardnew00000000002/n0/0"]["notified"] == ""

    # Run 4: the webhook is back. Its window (04:00-08:00) no longer holds the unnotified
    # finding, but the state does: it is sent again, and only it.
    hook.status = 200
    hook.requests.clear()
    code, report, err = guard(
        capsys, "--until", "2026-09-12T08:00:00Z", "--state", state, "--notify", hook.url
    )
    assert code == 0, err
    assert report["window"]["start"] == "2026-09-12T04:00:00Z" and report["findings"] == []
    assert len(hook.posts()) == 1
    assert names(hook.posts()[0]["new_findings"]) == {"guardnew00000000002"}
    saved = json.loads(Path(state).read_text())
    assert saved["items"]["finding:gs1:production:guardnew00000000002/n0/0"]["notified"] != ""

    # Run 5: nothing new: no POST at all.
    code, _, err = guard(
        capsys, "--until", "2026-09-12T09:00:00Z", "--state", state, "--notify", hook.url
    )
    assert code == 0, err
    assert len(hook.posts()) == 1


def test_an_admin_outage_leaves_a_gap_that_the_next_run_rescans_and_closes(env, box, hook, capsys):
    state = str(env / "state.json")
    box.admin.faults.failures["ListExecutions"] = [grpc.StatusCode.UNAVAILABLE] * 1000
    code, report, err = guard(capsys, *FIRST, "--state", state, "--notify", hook.url)
    assert code == 3, err
    assert report["complete"] is False
    assert {g["source"] for g in report["gaps"]} == {"admin"}
    # What only Admin's sweep finds (the suspected attempt without log evidence, a hashed pod
    # name) is missed while Admin is down.
    missed = {k[2] for k in EXPECTED_FINDINGS} - names(report["findings"])
    assert "j4k8l2z6x0c3v7b1n5m9" in missed
    assert hook.posts()[0]["new_gaps"] and hook.posts()[0]["new_gaps"][0]["source"] == "admin"
    saved = json.loads(Path(state).read_text())
    assert saved["open_gaps"] and saved["open_gaps"][0]["start"] == "2026-09-04T00:00:00Z"

    # Admin is back. Run 2 is asked only for the last hours, but starts at the open gap.
    box.admin.faults.failures.clear()
    code, report, err = guard(
        capsys, "--until", "2026-09-11T01:00:00Z", "--state", state, "--notify", hook.url
    )
    assert code == 1, err
    assert report["window"]["start"] == "2026-09-04T00:00:00Z"
    assert report["complete"] is True
    assert json.loads(Path(state).read_text())["open_gaps"] == []
    assert len(hook.posts()) == 2
    assert names(hook.posts()[1]["new_findings"]) == missed
    assert hook.posts()[1]["new_gaps"] == []


def test_the_first_run_needs_since_and_bad_state_is_never_reset(env, capsys):
    state = env / "state.json"
    code, _, err = guard(capsys, "--state", str(state))
    assert code == 2
    assert f"--since is required for the first run: state {state} does not exist yet" in err
    assert not state.exists()

    for content, why in (
        (b"{not json", "not a JSON document"),
        (b'{"schema": "someone-else", "x": 1}', "not an elastic-audit guard state"),
        (b'{"schema": "elastic-audit/guard-state", "schema_version": 9}', "schema_version 9"),
    ):
        state.write_bytes(content)
        code, _, err = guard(capsys, *FIRST, "--state", str(state))
        assert code == 2
        assert f"state {state}: {why}" in err and "--reset-state" in err
        assert "Traceback" not in err
        assert state.read_bytes() == content  # untouched

    code, _report, err = guard(capsys, *FIRST, "--state", str(state), "--reset-state")
    assert code == 1, err
    assert json.loads(state.read_text())["scanned_until"] == "2026-09-11T00:00:00Z"


def test_a_state_of_another_scope_is_refused(env, capsys):
    state = str(env / "state.json")
    code, _, err = guard(capsys, *FIRST, "--state", state, "--project", "gs1")
    assert code == 1, err
    code, _, err = guard(capsys, "--until", "2026-09-12", "--state", state)
    assert code == 2
    assert "was written for gs1 / the configured domains" in err


def test_slack_payload_has_text_blocks_and_links(env, hook, capsys):
    code, _, err = guard(capsys, *FIRST, "--notify", hook.url, "--notify-format", "slack")
    assert code == 1, err
    (payload,) = hook.posts()
    assert payload["text"].startswith("elastic-audit: 5 new affected")
    assert payload["blocks"][0]["text"]["text"] == f"*{payload['text']}*"
    ref = next(b for b in payload["blocks"][1:] if "azvg5f9v9974m78fvlf7" in b["text"]["text"])
    text = ref["text"]["text"]
    assert (
        "<https://flyte.example.com/console/projects/gs1/domains/production/executions/azvg5f9v9974m78fvlf7|"
        in text
    )
    assert "|logs>" in text and "checkpoint empty" in text


def test_a_webhook_that_cannot_be_reached_never_shows_its_secret(env, capsys):
    url = "http://127.0.0.1:9" + SECRET_PATH  # discard port: connection refused
    code, _, err = guard(capsys, *FIRST, "--notify", url, "-v")
    assert code == 3
    assert "notify http://127.0.0.1:9: ConnectionError after retries" in err
    assert "SECRET" not in err and "xoxsecret" not in err


def test_a_claim_of_a_run_that_died_mid_delivery_is_respected_then_expires(env, hook, capsys):
    state = env / "state.json"
    hook.status = 503
    code, _, err = guard(capsys, *FIRST, "--state", str(state), "--notify", hook.url)
    assert code == 3, err
    hook.requests.clear()
    hook.status = 200

    def claim(minutes_ago: int) -> None:
        doc = json.loads(state.read_text())
        at = datetime.now(UTC) - timedelta(minutes=minutes_ago)
        for entry in doc["items"].values():
            entry["claimed_by"], entry["claimed_at"] = "another-run", rfc3339(at)
        state.write_text(json.dumps(doc))

    claim(1)  # another run is delivering these right now: leave them to it
    code, _, err = guard(capsys, *FIRST, "--state", str(state), "--notify", hook.url)
    assert code == 1, err
    assert hook.posts() == []
    claim(11)  # that run died (the lease is 10 minutes): send them
    code, _, err = guard(capsys, *FIRST, "--state", str(state), "--notify", hook.url)
    assert code == 1, err
    assert len(hook.posts()) == 1 and len(hook.posts()[0]["new_findings"]) == 6
    doc = json.loads(state.read_text())
    assert all(v["notified"] and "claimed_by" not in v for v in doc["items"].values())


def test_an_explicit_window_keeps_the_open_gaps_it_does_not_cover(env, box, capsys):
    state = env / "state.json"
    box.admin.faults.failures["ListExecutions"] = [grpc.StatusCode.UNAVAILABLE] * 1000
    code, first, err = guard(capsys, *FIRST, "--state", str(state))
    assert code == 3, err
    box.admin.faults.failures.clear()
    # An operator rescans the last day by hand: the first six days stay an open gap, and the
    # state's progress mark does not move back.
    code, report, err = guard(
        capsys, "--since", "2026-09-10", "--until", "2026-09-11", "--state", str(state)
    )
    assert report["complete"] is True, err
    saved = json.loads(state.read_text())
    cut = "2026-09-10T00:00:00Z"
    # (a gap without an end, e.g. an unresolved pod's, is open to the end of its window)
    expected = [
        (g["source"], g["start"], min(g["end"] or "2026-09-11T00:00:00Z", cut))
        for g in first["gaps"]
    ]
    assert all(start < cut for _, start, _ in expected)  # all began before the new window
    assert sorted((g["source"], g["start"], g["end"]) for g in saved["open_gaps"]) == sorted(
        expected
    )
    assert saved["scanned_until"] == "2026-09-11T00:00:00Z"
    # The next scheduled run goes back to the open gap and closes it.
    code, report, err = guard(capsys, "--until", "2026-09-11T01:00:00Z", "--state", str(state))
    assert report["window"]["start"] == "2026-09-04T00:00:00Z" and report["complete"], err
    assert json.loads(state.read_text())["open_gaps"] == []


def test_a_pending_attempt_is_notified_once(env, box, hook, capsys):
    state = str(env / "state.json")
    code, _, err = guard(capsys, *FIRST, "--state", state, "--notify", hook.url)
    assert code == 1, err
    # A preempted attempt whose pod is still winding down: signalled, not finished.
    add_incident(box, "guardpend0000000001", datetime(2026, 9, 11, 5, 0, tzinfo=UTC), running=True)
    code, report, err = guard(
        capsys, "--until", "2026-09-11T06:00:00Z", "--state", state, "--notify", hook.url
    )
    assert code == 1, err  # pending is not "nothing found"
    assert names(report["pending"]) == {"guardpend0000000001"}
    (_, second) = hook.posts()
    assert names(second["new_pending"]) == {"guardpend0000000001"}
    assert second["new_findings"] == []
    assert "0 new affected, 0 new suspected, 1 new pending" in second["text"]
    code, report, err = guard(
        capsys, "--until", "2026-09-11T07:00:00Z", "--state", state, "--notify", hook.url
    )
    assert names(report["pending"]) == {"guardpend0000000001"}, err
    assert len(hook.posts()) == 2  # still pending (in the overlap), already notified
