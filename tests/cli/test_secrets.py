"""No secret is ever printed: Loki bearer token and password, GitHub token, AWS secret key and
session token, Flyte client secret, each a unique sentinel, through every command at every
verbosity (none, `-v`, `-vv` where it exists), right and wrong credentials alike (the sandbox Loki
and GitHub answer 401). botocore's debug log carries `x-amz-security-token` and its canonical
request; `-vv` turns it on, so the test proves the masking, not only the quiet default.

Every run is `python -m forensics ...` in a child process with the sandbox environment, so
logging is configured exactly as in production; the sentinels are searched for in stdout,
stderr and every file the run left behind (reports, audit log), also base64-encoded where a
credential travels that way (HTTP basic auth).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.github_server import serve_github
from support.pins import NEW_SHA, build_tree, fork_network
from support.scan import WINDOW

from forensics.sandbox.incident import reference_scenario
from forensics.sandbox.s3_server import S3Rule
from forensics.sandbox.stack import sandbox

RUN = uuid.uuid4().hex[:12]
LOKI_TOKEN = f"lokitoken-{RUN}-a1"
LOKI_TOKEN_WRONG = f"lokitokenwrong-{RUN}-b2"
LOKI_USER = "auditor"
LOKI_PASSWORD = f"lokipassword-{RUN}-c3"
LOKI_PASSWORD_WRONG = f"lokipasswordwrong-{RUN}-d4"
AWS_SECRET = f"awssecret-{RUN}-e5"
AWS_SESSION = f"awssessiontoken-{RUN}-s9"
FLYTE_SECRET = f"flyteclientsecret-{RUN}-f6"
GITHUB_TOKEN = f"ghp_{RUN}githubtoken0000000g7"
GITHUB_TOKEN_WRONG = f"ghp_{RUN}githubwrong00000h8"

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
CONFIG = """
[flyte]
retries = 1
retry_backoff = 0.01
[loki]
retries = 1
retry_backoff = 0.01
[checkpoints]
input = "checkpoint_dir"
"""


def _forms(secret: str) -> list[bytes]:
    return [secret.encode()]


SENTINELS: list[bytes] = [
    *_forms(LOKI_TOKEN),
    *_forms(LOKI_TOKEN_WRONG),
    *_forms(LOKI_PASSWORD),
    *_forms(LOKI_PASSWORD_WRONG),
    base64.b64encode(f"{LOKI_USER}:{LOKI_PASSWORD}".encode()),
    base64.b64encode(f"{LOKI_USER}:{LOKI_PASSWORD_WRONG}".encode()),
    *_forms(AWS_SECRET),
    *_forms(AWS_SESSION),
    *_forms(FLYTE_SECRET),
    *_forms(GITHUB_TOKEN),
    *_forms(GITHUB_TOKEN_WRONG),
]


def assert_no_secret(where: str, data: bytes) -> None:
    for s in SENTINELS:
        assert s not in data, f"a secret ({s[:14]!r}…) leaked into {where}"


def assert_nothing_left_anywhere(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert_no_secret(str(path), path.read_bytes())


class Runner:
    """Runs `python -m forensics` in `work` with `base_env` plus the run's own variables."""

    def __init__(self, work: Path, base_env: dict[str, str]) -> None:
        self.work = work
        self.base_env = base_env

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        proc = subprocess.run(
            [sys.executable, "-m", "forensics", *args],
            cwd=self.work,
            env={**self.base_env, **(env or {})},
            capture_output=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert_no_secret(f"stdout of {args}", proc.stdout)
        assert_no_secret(f"stderr of {args}", proc.stderr)
        return proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")

    def many(self, jobs: list[tuple[tuple[str, ...], dict[str, str] | None]]) -> list:
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(lambda job: self(*job[0], env=job[1]), jobs))


def _runner(tmp_path: Path, env: dict[str, str]) -> Runner:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "elastic-audit.toml").write_text(CONFIG)
    return Runner(
        work,
        env
        | {
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "AWS_SECRET_ACCESS_KEY": AWS_SECRET,  # moto takes any key; botocore signs with it
            "AWS_SESSION_TOKEN": AWS_SESSION,  # sent as x-amz-security-token on every request
            "FLYTE_CREDENTIALS_CLIENT_ID": "elastic-audit",
            "FLYTE_CREDENTIALS_CLIENT_SECRET": FLYTE_SECRET,
            "GITHUB_TOKEN": GITHUB_TOKEN,
        },
    )


@pytest.mark.integration
def test_loki_aws_and_flyte_secrets_never_printed_by_scan_show_relaunch_right_or_wrong(
    tmp_path,
):
    # One Loki gateway that takes either the bearer token or basic auth, as some do.
    auth = {"bearer_token": LOKI_TOKEN, "basic_auth": (LOKI_USER, LOKI_PASSWORD)}
    with sandbox(reference_scenario(), loki_options=auth) as box:
        run = _runner(tmp_path, box.child_environ())
        bearer = {"LOKI_BEARER_TOKEN": LOKI_TOKEN}
        bearer_wrong = {"LOKI_BEARER_TOKEN": LOKI_TOKEN_WRONG}
        basic = {"LOKI_USERNAME": LOKI_USER, "LOKI_PASSWORD": LOKI_PASSWORD}
        basic_wrong = {"LOKI_USERNAME": LOKI_USER, "LOKI_PASSWORD": LOKI_PASSWORD_WRONG}
        report = str(run.work / "report.json")
        ok_scan, ok_v, ok_quiet, bad_bearer, bad_basic, bad_show, relaunched = run.many(
            [
                (("scan", *WINDOW, "-vv", "-o", "json", "--report", report), bearer),
                (("scan", *WINDOW, "-v", "-o", "json"), bearer),  # -v: every request logged
                (("scan", *WINDOW, "-o", "table"), basic),
                (("scan", *WINDOW, "-vv", "-o", "json"), bearer_wrong),
                (("scan", *WINDOW, "-v", "-o", "markdown"), basic_wrong),
                (("show", INCIDENT, "-vv"), bearer_wrong),
                (
                    ("relaunch", INCIDENT, "-vv", "--yes", "-o", "json"),
                    basic,
                ),  # re-check reads Loki
            ]
        )
        assert ok_scan[0] == ok_v[0] == ok_quiet[0] == 1  # the right token reads Loki: findings
        assert "x-amz-security-token" in ok_scan[1].lower()  # -vv did log the header: masked
        assert bad_bearer[0] == 3 and "HTTP 401" in bad_bearer[1]  # wrong ones are refused
        assert bad_basic[0] == 3 and "HTTP 401" in bad_basic[1]
        assert "401" in bad_show[1]
        assert relaunched[0] == 0 and '"relaunched"' in relaunched[1]

        # Failures on the other two: S3 refuses everything; Flyte auth cannot be completed.
        box.s3.faults.access_denied.append(S3Rule())
        client_credentials = {**bearer, "FLYTE_CREDENTIALS_AUTH_MODE": "client_credentials"}
        token_file = tmp_path / "secret" / "loki-token"  # (outside the trees searched below)
        token_file.parent.mkdir()
        token_file.write_text(LOKI_TOKEN + "\n")
        s3_denied, admin_auth, relaunch_auth = run.many(
            [
                (
                    ("scan", *WINDOW, "-vv", "-o", "json"),
                    {"LOKI_BEARER_TOKEN_FILE": str(token_file)},
                ),
                (("scan", *WINDOW, "-vv", "-o", "json"), client_credentials),
                (
                    ("relaunch", "gs1:production:bq7k2m9x4c8d1f6h3j5n", "-vv", "--yes"),
                    client_credentials,
                ),
            ]
        )
        assert s3_denied[0] == 3 and "forbidden" in s3_denied[1]
        assert admin_auth[0] == 3 and relaunch_auth[0] == 3
    audit = tmp_path / "state" / "elastic-audit" / "audit.jsonl"
    assert len(audit.read_text().splitlines()) == 2  # relaunched, then failed
    for where in (run.work, tmp_path / "state"):
        assert_nothing_left_anywhere(where)


@pytest.mark.integration
def test_github_token_never_printed_by_pin_bump_right_or_wrong(tmp_path):
    tree = build_tree(tmp_path / "repo")
    state, _ = fork_network(fixed=True)
    state.token = GITHUB_TOKEN
    with serve_github(state) as gh:
        run = _runner(tmp_path, {**os.environ, "GITHUB_API_URL": gh.url})
        base = ["pin-bump", NEW_SHA, "--root", str(tree.root)]
        dry, wrong, written = run.many(
            [
                ((*base, "--dry-run", "-o", "json", "--require-fix"), None),
                ((*base, "-o", "json"), {"GITHUB_TOKEN": GITHUB_TOKEN_WRONG}),
                ((*base, "--require-fix", "-o", "table"), None),
            ]
        )
        assert (dry[0], wrong[0], written[0]) == (0, 2, 0)
        assert "401" in wrong[1]
        assert any(
            r.headers.get("Authorization") == f"Bearer {GITHUB_TOKEN}" for r in state.requests
        )
    assert_nothing_left_anywhere(tmp_path / "repo")


@pytest.mark.e2e
def test_demo_and_fix_never_print_the_secrets_in_their_environment(tmp_path):
    run = _runner(
        tmp_path,
        {**os.environ, "LOKI_BEARER_TOKEN": LOKI_TOKEN, "LOKI_PASSWORD": LOKI_PASSWORD},
    )
    demo, fix = run.many([(("demo", "-o", "json", "--no-progress"), None), (("fix", "show"), None)])
    assert demo[0] == 0 and fix[0] == 0
    assert_nothing_left_anywhere(run.work)


@pytest.mark.parametrize("secret", [LOKI_TOKEN, FLYTE_SECRET])
def test_reprs_of_configured_clients_hide_the_secret(tmp_path, monkeypatch, secret):
    from forensics.config import load_settings
    from forensics.sources import Sources

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOKI_BEARER_TOKEN", LOKI_TOKEN)
    monkeypatch.setenv("FLYTE_CREDENTIALS_CLIENT_SECRET", FLYTE_SECRET)
    monkeypatch.setenv("FLYTE_PLATFORM_URL", "127.0.0.1:9")
    monkeypatch.setenv("FLYTE_PLATFORM_INSECURE", "True")
    settings = load_settings(env=dict(os.environ))
    sources = Sources.from_settings(settings)
    objects = [settings, settings.loki, settings.flyte, sources, sources.loki, sources.admin]
    objects.append(sources.store)
    for obj in objects:
        assert secret not in repr(obj) and secret not in str(obj)


def test_a_secret_registered_at_run_time_is_masked_in_every_log_record(capsys):
    # For credentials that are not in the environment (a webhook URL given as a flag): the
    # filter in forensics/cli/verbosity.py masks them in any logger's records, at any level.
    import logging

    from forensics.cli.verbosity import add_secret, setup_logging

    webhook = f"https://hooks.example.com/services/{RUN}/webhooksecret"
    setup_logging(2)
    add_secret(webhook)
    path = webhook.removeprefix("https://hooks.example.com")
    logging.getLogger("urllib3.connectionpool").debug('"POST %s HTTP/1.1" 200', path)
    logging.getLogger("forensics.notify").info("notified %s", webhook)
    err = capsys.readouterr().err
    assert webhook not in err and path not in err and err.count("***") == 2


# -- credentials inside URLs (issue 43 item 1) ---------------------------------------------------

URL_PASSWORDS = {
    name: f"urlpw{name}-{RUN}-x9"
    for name in ("loki", "prom", "s3", "hook", "push", "flyte", "github", "bad")
}
URL_USERS = {name: f"{name}user" for name in URL_PASSWORDS}


def _with_userinfo(url: str, name: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{URL_USERS[name]}:{URL_PASSWORDS[name]}@{rest}"


def _basic(name: str) -> str:
    return "Basic " + base64.b64encode(f"{URL_USERS[name]}:{URL_PASSWORDS[name]}".encode()).decode()


def _assert_no_url_password(where: str, data: bytes) -> None:
    for name, password in URL_PASSWORDS.items():
        for form in (password, _basic(name).removeprefix("Basic ")):
            assert form.encode() not in data, f"the {name} URL's password leaked into {where}"


def _dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_credentials_inside_every_url_are_masked_in_every_channel_and_still_sent(tmp_path):
    from support.guard import SECRET_PATH, HTTPRecorder

    from forensics.sandbox.prometheus_server import PrometheusServer

    hook, gateway, prometheus = HTTPRecorder(), HTTPRecorder(), PrometheusServer()
    loki_auth = {"basic_auth": (URL_USERS["loki"], URL_PASSWORDS["loki"])}
    with prometheus as prom_url, sandbox(reference_scenario(), loki_options=loki_auth) as box:
        env = box.child_environ()
        loki = _with_userinfo(env["LOKI_ADDR"], "loki")
        env["LOKI_ADDR"] = loki
        env["AWS_ENDPOINT_URL_S3"] = _with_userinfo(env["AWS_ENDPOINT_URL_S3"], "s3")
        run = _runner(tmp_path, env)
        with (run.work / "elastic-audit.toml").open("a") as f:
            f.write(
                f'[k8s_events]\nenabled = true\nurl = "{loki}/"\n'
                f'[prometheus]\nurl = "{_with_userinfo(prom_url, "prom")}"\n'
            )
        notify = _with_userinfo(hook.base, "hook") + SECRET_PATH
        guard = [
            "--notify", notify, "--pushgateway", _with_userinfo(gateway.base, "push"),
        ]  # fmt: skip
        dead_loki = {"LOKI_ADDR": _with_userinfo(f"http://127.0.0.1:{_dead_port()}", "loki")}
        dead_github = {
            "GITHUB_API_URL": _with_userinfo(f"http://127.0.0.1:{_dead_port()}", "github")
        }
        flyte = {"FLYTE_PLATFORM_URL": f"{URL_USERS['flyte']}:{URL_PASSWORDS['flyte']}@127.0.0.1:1"}
        tree = build_tree(tmp_path / "repo")
        jobs: list[tuple[tuple[str, ...], dict[str, str] | None]] = [
            (("scan", *WINDOW, "-vv", "-o", "json", "--report", "ok.json",
              "--state", "ok-state.json", *guard), None),
            (("scan", *WINDOW, "-vv", "-o", "json", "--report", "gaps.json",
              "--state", "gaps-state.json", *guard), dead_loki),
            (("config",), None),
            (("config", "-o", "json"), flyte),
            (("scan", *WINDOW, "--loki-url", _with_userinfo("http://127.0.0.1:x", "bad")), None),
            (("pin-bump", NEW_SHA, "--root", str(tree.root), "--dry-run", "--require-fix"), dead_github),
        ]  # fmt: skip
        outputs = run.many(jobs)  # also checks the other secrets of the environment
        for (args, _), (_, text) in zip(jobs, outputs, strict=True):
            _assert_no_url_password(f"stdout or stderr of {args[:2]}", text.encode())
        hook.close()
        gateway.close()
    (
        (ok, ok_text),
        (gaps, gaps_text),
        (shown, table),
        (flyte_code, flyte_text),
        (bad, bad_text),
        (
            pins,
            pins_text,
        ),
    ) = outputs
    # Every server got its URL's credentials: Loki (events read too), Prometheus, the webhook
    # and the Pushgateway; S3 ignores user info (SigV4 signs), and the scan is complete.
    assert ok == 1, ok_text[-2000:]
    report = json.loads((run.work / "ok.json").read_text())
    assert report["complete"] is True and report["findings"]
    assert prometheus.authorizations and set(prometheus.authorizations) == {_basic("prom")}
    assert set(hook.authorizations) == {_basic("hook")} and hook.posts()
    assert set(gateway.authorizations) == {_basic("push")}
    for method, path, body in hook.requests + gateway.requests:  # the webhook's JSON, metrics
        _assert_no_url_password(f"the body of {method} {path}", body)
    assert any(b"cannot connect to Loki" in body for _, _, body in hook.requests)  # new_gaps
    assert gaps == 3 and "cannot connect to Loki at http://127.0.0.1:" in gaps_text
    gap_report = json.loads((run.work / "gaps.json").read_text())
    assert any("Loki" in g["error"] for g in gap_report["gaps"])
    # `config` says the credentials are there, masked, and where they came from
    assert shown == 0 and "***" in table and "LOKI_ADDR" in table
    # gRPC would resolve user:password as part of the host name: refused, in one masked line
    assert flyte_code == 2 and len(flyte_text.strip().splitlines()) == 1
    assert f"{URL_USERS['flyte']}:***@127.0.0.1:1" in flyte_text
    assert "gRPC cannot use" in flyte_text
    assert bad == 2 and len(bad_text.strip().splitlines()) == 1 and "badu" in bad_text
    assert pins != 0 and "cannot reach http://githubuser:***@127.0.0.1:" in pins_text
    files = [p for p in run.work.rglob("*") if p.is_file() and p.name != "elastic-audit.toml"]
    assert {"ok.json", "gaps.json", "ok-state.json", "gaps-state.json"} <= {p.name for p in files}
    for path in files:  # the reports and the guard's state files
        _assert_no_url_password(str(path), path.read_bytes())
