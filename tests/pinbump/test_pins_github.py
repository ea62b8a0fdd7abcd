"""pin-bump against a loopback GitHub: branch reachability, imposters, failures, --require-fix."""

from __future__ import annotations

import json
import socket
import tarfile
from pathlib import Path

import pytest
from support.github_server import Fault, serve_github
from support.pins import (
    CHANGED,
    GOLDEN,
    IMPOSTER,
    NEW_SHA,
    RELEASE_ONLY,
    TIP,
    build_tree,
    fork_network,
    run_cli,
    snapshot,
)
from support.tarballs import member, tarball

from forensics.config import Secret
from forensics.pinbump.github import (
    GitHubClient,
    GitHubError,
    UnsafeArchiveError,
    UnverifiedCommitError,
    extract_tarball,
)


@pytest.fixture
def tree(tmp_path: Path):
    return build_tree(tmp_path)


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.integration
def test_commit_in_masters_history_is_verified_through_compare_then_bumped(tree) -> None:
    state, _ = fork_network()
    with serve_github(state) as gh:
        proc = run_cli(
            NEW_SHA, "--root", str(tree.root), "-o", "json", env={"GITHUB_API_URL": gh.url}
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verified"] == {"branch": "master", "branches_checked": 1}
    paths = [r.path for r in state.requests]
    assert f"/repos/exa-labs/flytekit/commits/{NEW_SHA}" in paths
    assert f"/repos/exa-labs/flytekit/compare/{TIP}...{NEW_SHA}" in paths
    for rel in CHANGED:
        assert (tree.root / rel).read_bytes() == (GOLDEN / rel).read_bytes()


@pytest.mark.e2e
def test_commit_only_on_a_later_page_of_branches_is_verified(tree) -> None:
    state, fork = fork_network()
    for i in range(3):
        fork.branches[f"feature/{i}"] = TIP
    state.page_size = 2  # 5 branches over 3 pages, release/1.16 on the last
    with serve_github(state) as gh:
        proc = run_cli(
            RELEASE_ONLY,
            "--root",
            str(tree.root),
            "--check",
            "-o",
            "json",
            env={"GITHUB_API_URL": gh.url},
        )
    assert proc.returncode == 1, proc.stderr  # verified; the pins are simply stale
    assert json.loads(proc.stdout)["verified"]["branch"] == "release/1.16"
    assert sum(r.path.endswith("/branches") for r in state.requests) == 3


@pytest.mark.integration
@pytest.mark.parametrize("mode", [[], ["--dry-run"], ["--check"]])
def test_imposter_commit_from_another_fork_is_refused_with_nothing_written(tree, mode) -> None:
    state, _ = fork_network()
    before = snapshot(tree.base)
    with serve_github(state) as gh:
        proc = run_cli(IMPOSTER, "--root", str(tree.root), *mode, env={"GITHUB_API_URL": gh.url})
    assert proc.returncode == 2
    assert "on none of the 2 branches of exa-labs/flytekit" in proc.stderr
    assert snapshot(tree.base) == before
    assert proc.stdout == ""


@pytest.mark.integration
def test_commit_unknown_to_the_network_is_refused(tree) -> None:
    state, _ = fork_network()
    before = snapshot(tree.base)
    with serve_github(state) as gh:
        proc = run_cli("ab" * 20, "--root", str(tree.root), env={"GITHUB_API_URL": gh.url})
    assert proc.returncode == 2
    assert f"commit {'ab' * 20} does not exist in exa-labs/flytekit" in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.integration
def test_github_answering_500_is_exit_2_after_retries_and_nothing_written(tree) -> None:
    state, _ = fork_network()
    state.faults.append(Fault(r"/commits/", status=500))
    before = snapshot(tree.base)
    with serve_github(state) as gh:
        proc = run_cli(NEW_SHA, "--root", str(tree.root), env={"GITHUB_API_URL": gh.url})
    assert proc.returncode == 2
    assert "GitHub answered HTTP 500" in proc.stderr
    assert sum("/commits/" in r.path for r in state.requests) == 3  # 1 + 2 retries
    assert snapshot(tree.base) == before


@pytest.mark.integration
def test_one_transient_500_is_retried_and_the_bump_goes_through(tree) -> None:
    state, _ = fork_network()
    state.faults.append(Fault(r"/compare/", status=502, times=1))
    with serve_github(state) as gh:
        proc = run_cli(NEW_SHA, "--root", str(tree.root), env={"GITHUB_API_URL": gh.url})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.integration
def test_unreachable_github_is_exit_2_with_the_reason_and_nothing_written(tree) -> None:
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), env={"GITHUB_API_URL": _closed_port_url()})
    assert proc.returncode == 2
    assert "cannot reach http://127.0.0.1:" in proc.stderr
    assert "connection refused" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.integration
def test_no_verify_never_contacts_github(tree) -> None:
    env = {"GITHUB_API_URL": _closed_port_url()}
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", env=env)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.integration
def test_slow_github_times_out_as_a_typed_error() -> None:
    state, _ = fork_network()
    state.faults.append(Fault(r"/commits/", status=None, delay=1.0))
    with serve_github(state) as gh:
        client = GitHubClient("exa-labs/flytekit", api_url=gh.url, timeout=0.2, retries=0)
        with pytest.raises(GitHubError, match="timed out"):
            client.verify_commit(NEW_SHA)


@pytest.mark.integration
def test_token_is_sent_as_bearer_and_never_printed(tree) -> None:
    token = "ghp_s3cr3tT0kenThatMustNeverLeak0123456789"
    state, _ = fork_network()
    state.token = token
    with serve_github(state) as gh:
        ok = run_cli(
            NEW_SHA,
            "--root",
            str(tree.root),
            "--dry-run",
            "-o",
            "json",
            env={"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": token},
        )
        wrong = run_cli(
            NEW_SHA,
            "--root",
            str(tree.root),
            env={"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": token[::-1]},
        )
        anonymous = run_cli(NEW_SHA, "--root", str(tree.root), env={"GITHUB_API_URL": gh.url})
    assert ok.returncode == 0, ok.stderr
    assert state.requests[0].headers["Authorization"] == f"Bearer {token}"
    assert wrong.returncode == 2 and "rejected the token (401" in wrong.stderr
    assert anonymous.returncode == 2 and "set GITHUB_TOKEN" in anonymous.stderr
    for proc in (ok, wrong, anonymous):
        assert token not in proc.stdout + proc.stderr
        assert token[::-1] not in proc.stdout + proc.stderr
    client = GitHubClient("exa-labs/flytekit", token=Secret(token))
    assert token not in repr(client)


# --------------------------------------------------------------------------- --require-fix


@pytest.mark.integration
def test_require_fix_accepts_a_commit_whose_plugin_carries_the_fix(tree) -> None:
    state, _ = fork_network(fixed=True)
    with serve_github(state) as gh:
        proc = run_cli(
            NEW_SHA,
            "--root",
            str(tree.root),
            "--require-fix",
            "-o",
            "json",
            env={"GITHUB_API_URL": gh.url},
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fix"]["status"] == "fixed"
    paths = [r.path for r in state.requests]
    assert f"/repos/exa-labs/flytekit/tarball/{NEW_SHA}" in paths
    assert f"/_codeload/exa-labs/flytekit/legacy.tar.gz/{NEW_SHA}" in paths  # redirect followed
    for rel in CHANGED:
        assert (tree.root / rel).read_bytes() == (GOLDEN / rel).read_bytes()


@pytest.mark.integration
@pytest.mark.parametrize(("fixed", "status"), [(False, "vulnerable"), (None, "unknown")])
def test_require_fix_refuses_a_commit_without_the_fix_and_writes_nothing(
    tree, fixed, status
) -> None:
    state, _ = fork_network(fixed=fixed)
    before = snapshot(tree.base)
    with serve_github(state) as gh:
        proc = run_cli(
            NEW_SHA, "--root", str(tree.root), "--require-fix", env={"GITHUB_API_URL": gh.url}
        )
    assert proc.returncode == 2
    assert f"does not carry the plugin fix ({status}:" in proc.stderr
    assert snapshot(tree.base) == before


HOSTILE = {
    "path with '..'": (member("top/../../escaped.py"), b"x"),
    "absolute path": (member("/tmp/escaped.py"), b"x"),
    "link out of the archive": (member("top/link", tarfile.SYMTYPE, "../../../etc"), None),
    "link to an absolute path": (member("top/hard", tarfile.LNKTYPE, "/etc/passwd"), None),
    "device or fifo": (member("top/null", tarfile.CHRTYPE), None),
}


@pytest.mark.parametrize("why", sorted(HOSTILE))
def test_hostile_archive_members_are_refused_before_extraction(tmp_path: Path, why) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(tarball((member("top/ok.txt"), b"fine"), HOSTILE[why]))
    with pytest.raises(UnsafeArchiveError, match=why):
        extract_tarball(archive, tmp_path / "src")
    assert not (tmp_path / "src").exists()  # refused before anything was unpacked


def test_archive_with_internal_links_unpacks_to_its_top_directory(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(
        tarball(
            (member("top/pkg/real.py"), b"print(1)\n"),
            (member("top/pkg/alias.py", tarfile.SYMTYPE, "real.py"), None),
        )
    )
    top = extract_tarball(archive, tmp_path / "src")
    assert top == tmp_path / "src/top"
    assert (top / "pkg/alias.py").read_text() == "print(1)\n"


@pytest.mark.e2e
def test_path_traversal_archive_from_github_is_refused_with_nothing_written(tree) -> None:
    state, fork = fork_network(fixed=True)
    fork.archives[NEW_SHA] = tarball((member("exa-top/../../../pwned.txt"), b"pwned"))
    before = snapshot(tree.base)
    with serve_github(state) as gh:
        proc = run_cli(
            NEW_SHA, "--root", str(tree.root), "--require-fix", env={"GITHUB_API_URL": gh.url}
        )
    assert proc.returncode == 2
    assert "path with '..'" in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.integration
def test_oversized_archive_is_refused_while_streaming(tmp_path: Path) -> None:
    state, _ = fork_network(fixed=True)
    with serve_github(state) as gh:
        client = GitHubClient("exa-labs/flytekit", api_url=gh.url)
        with pytest.raises(UnsafeArchiveError, match=r"limit 1024"):
            client.download_tarball(NEW_SHA, tmp_path, limit=1024)
        assert client.download_tarball(NEW_SHA, tmp_path).name.startswith("exa-labs-flytekit-")
    assert not list((tmp_path).glob("*.py"))


@pytest.mark.integration
def test_verify_commit_rejects_an_imposter_at_library_level() -> None:
    state, _ = fork_network()
    with serve_github(state) as gh:
        client = GitHubClient("Exa-Labs/FlyteKit", api_url=gh.url)
        assert client.verify_commit(TIP).branch == "master"  # a tip: no compare needed
        with pytest.raises(UnverifiedCommitError):
            client.verify_commit(IMPOSTER)
