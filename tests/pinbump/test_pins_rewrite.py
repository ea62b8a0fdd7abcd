"""pin-bump rewrites: byte-exact golden results, read-only modes, refusals, all-or-nothing."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
from pathlib import Path

import pytest
from support.pins import (
    CHANGED,
    FORK_PIN,
    GOLDEN,
    MONOREPO,
    NEW_SHA,
    OLD_A,
    OLD_B,
    OLD_SHORT,
    UPSTREAM,
    build_tree,
    run_cli,
    run_cli_process,
    snapshot,
)

from forensics.pinbump.discover import discover
from forensics.pinbump.plan import plan_bump

HEX = re.compile(r"([0-9a-f]{7,40})")


@pytest.fixture
def tree(tmp_path: Path):
    return build_tree(tmp_path)


def test_golden_files_differ_from_the_fixture_only_in_the_forks_commits() -> None:
    # Guards the golden files themselves: outside hex runs every byte is the fixture's, and
    # each changed hex run is an old fork commit turned into NEW_SHA.
    for rel in CHANGED:
        before = HEX.split((MONOREPO / rel).read_bytes().decode())
        after = HEX.split((GOLDEN / rel).read_bytes().decode())
        assert len(before) == len(after)
        assert before[0::2] == after[0::2], rel
        moved = [(b, a) for b, a in zip(before[1::2], after[1::2], strict=True) if b != a]
        assert moved and all(b in (OLD_A, OLD_B, OLD_SHORT) and a == NEW_SHA for b, a in moved)
    assert b"\r\n" in (GOLDEN / "services/windows-tool/pyproject.toml").read_bytes()


@pytest.mark.e2e
def test_bump_rewrites_every_fork_pin_to_the_golden_bytes(tree) -> None:
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    after = snapshot(tree.base)
    for rel in CHANGED:
        assert (tree.root / rel).read_bytes() == (GOLDEN / rel).read_bytes(), rel
    untouched = {k for k in before if k.removeprefix("monorepo/") not in CHANGED}
    for key in untouched:
        assert after[key] == before[key], f"{key} changed"
    assert set(after) == set(before), "files appeared or vanished"
    assert (tree.root / "libs/train-requirements.txt").is_symlink()

    summary = json.loads(proc.stdout)
    assert summary["written"] is True
    assert summary["pins_found"] == summary["pins_stale"] == 25
    assert summary["from_commits"] == {OLD_A: 14, OLD_B: 10, OLD_SHORT: 1}
    assert [f["path"] for f in summary["files"]] == list(CHANGED)
    assert summary["stale_locks"] == ["services/windows-tool/uv.lock", "uv.lock"]
    notes = "\n".join(n["message"] for n in summary["notices"])
    assert "'master'" in notes and "'exa/main'" in notes and "--hash" in notes
    assert "uv.lock now stale" in proc.stderr


@pytest.mark.e2e
def test_second_bump_to_the_same_commit_changes_nothing(tree) -> None:
    assert run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify").returncode == 0
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["pins_stale"] == 0
    assert snapshot(tree.base) == before


@pytest.mark.e2e
def test_dry_run_prints_a_diff_that_applies_to_the_golden_bytes_and_writes_nothing(
    tree, tmp_path: Path
) -> None:
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "--dry-run", "-o", "table")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(tree.base) == before
    diff = proc.stdout[: proc.stdout.index("pin-bump exa-labs/flytekit")]
    assert "\r\n" in diff  # the CRLF file's lines keep their line ends
    assert f'-  "flytekit @ https://github.com/exa-labs/flytekit/archive/{OLD_A}' in diff
    # The diff is a real patch: applied to a pristine copy it yields the golden files.
    copy = tmp_path / "patched"
    copy.mkdir()
    for rel in CHANGED:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes((MONOREPO / rel).read_bytes())
    patched = subprocess.run(
        ["patch", "-p1", "--binary", "-d", str(copy)], input=diff.encode(), capture_output=True
    )
    assert patched.returncode == 0, patched.stdout + patched.stderr
    for rel in CHANGED:
        assert (copy / rel).read_bytes() == (GOLDEN / rel).read_bytes(), rel


@pytest.mark.e2e
def test_dry_run_output_diff_is_a_plain_patch_git_apply_accepts(tree, tmp_path: Path) -> None:
    # `pin-bump SHA --dry-run -o diff > bump.patch`: the patch alone on stdout (it was JSON with
    # the diff inside a string), the summary for the person on stderr.
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "--dry-run", "-o", "diff")
    assert proc.returncode == 0, proc.stderr
    assert snapshot(tree.base) == before
    assert proc.stdout.startswith("--- a/") and "pin-bump exa-labs/flytekit" not in proc.stdout
    assert "25 pin(s) in 5 file(s) would move" in proc.stderr
    copy = tmp_path / "patched"
    copy.mkdir()
    for rel in CHANGED:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes((MONOREPO / rel).read_bytes())
    patch = tmp_path / "bump.patch"
    patch.write_bytes(proc.stdout.encode())
    git = ["git", "-c", "core.autocrlf=false", "apply"]
    checked = subprocess.run([*git, "--check", str(patch)], cwd=copy, capture_output=True)
    assert checked.returncode == 0, checked.stderr
    subprocess.run([*git, str(patch)], cwd=copy, check=True, capture_output=True)
    for rel in CHANGED:
        assert (copy / rel).read_bytes() == (GOLDEN / rel).read_bytes(), rel


@pytest.mark.e2e
def test_check_exits_1_on_stale_pins_then_0_once_bumped_and_never_writes(tree) -> None:
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "--check", "-o", "json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["pins_stale"] == 25
    assert snapshot(tree.base) == before
    assert run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify").returncode == 0
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "--check")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "bad", [NEW_SHA[:12], NEW_SHA + "0", "g" * 40, "master", NEW_SHA[:39] + " "]
)
def test_short_or_malformed_sha_is_refused_with_nothing_written(tree, bad: str) -> None:
    before = snapshot(tree.base)
    proc = run_cli(bad, "--root", str(tree.root), "--no-verify")
    assert proc.returncode == 2
    assert "not a full commit SHA" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.e2e
def test_malformed_toml_anywhere_is_refused_with_file_and_line_and_nothing_written(tree) -> None:
    broken = tree.root / "services/broken/pyproject.toml"
    broken.parent.mkdir(parents=True)
    broken.write_text(f'[project]\nname = "broken"\ndependencies = [\n  {FORK_PIN}\n  "b",\n]\n')
    before = snapshot(tree.base)
    for mode in ([], ["--dry-run"], ["--check"]):
        proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", *mode)
        assert proc.returncode == 2, (mode, proc.stderr)
        assert "services/broken/pyproject.toml:5: invalid TOML" in proc.stderr
        assert snapshot(tree.base) == before


@pytest.mark.e2e
def test_malformed_toml_in_a_file_with_a_pin_names_its_line(tree) -> None:
    broken = tree.root / "pyproject.toml"
    text = broken.read_text().replace('lint = ["ruff"]', 'lint = = ["ruff"]')
    broken.write_text(text)
    line = text.splitlines().index('lint = = ["ruff"]') + 1
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify")
    assert proc.returncode == 2
    assert f"pyproject.toml:{line}: invalid TOML: Invalid value" in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.e2e
def test_discovery_skips_venvs_node_modules_git_and_links_out_of_the_root(tree) -> None:
    found = [p.relative_to(tree.root).as_posix() for p in discover(tree.root)]
    assert found == [
        "libs/legacy/requirements-dev.txt",
        "pyproject.toml",
        "requirements/base.in",
        "services/api/pyproject.toml",
        "services/train/pyproject.toml",
        "services/train/requirements.txt",
        "services/windows-tool/pyproject.toml",
    ]


def _pinned_pyproject(where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / "pyproject.toml").write_text(
        f'[project]\nname = "local"\nversion = "1"\ndependencies = [\n  {FORK_PIN},\n]\n'
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    "where",
    [
        "venv/lib/python3.11/site-packages/flytekit_src",  # a venv without pyvenv.cfg
        "venv",
        "tools/.venv",
        "build/lib/site-packages/pkg",  # site-packages under any name of environment
        ".tox/py311",
        ".nox/tests",
        "envs/train/src",  # in a conda environment: any dir holding conda-meta/
    ],
)
def test_discovery_skips_environments_by_name_and_marker(tree, where: str) -> None:
    """docs/commands.md (pin-bump): no edit in site-packages, .venv/venv, .tox, .nox or a conda env, pyvenv.cfg or not."""
    if where.startswith("envs/"):
        (tree.root / "envs/train/conda-meta").mkdir(parents=True)
    _pinned_pyproject(tree.root / where)
    manifest = tree.root / where / "pyproject.toml"
    before = manifest.read_bytes()
    assert manifest.resolve() not in discover(tree.root)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert manifest.read_bytes() == before
    for rel in CHANGED:  # the monorepo's own pins did move
        assert (tree.root / rel).read_bytes() == (GOLDEN / rel).read_bytes()


@pytest.mark.e2e
def test_in_a_git_work_tree_only_tracked_files_are_bumped(tree) -> None:
    """Untracked and ignored manifests are someone's local state, not the monorepo's."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["rm", "-rf", str(tree.root / ".git")], check=True)
    subprocess.run(["git", "init", "-q", str(tree.root)], check=True, env=env)
    subprocess.run(["git", "-C", str(tree.root), "add", "-A"], check=True, env=env)
    (tree.root / ".gitignore").write_text("scratch-ignored/\n")
    _pinned_pyproject(tree.root / "scratch-untracked")
    _pinned_pyproject(tree.root / "scratch-ignored")
    (tree.root / "services/train/requirements-local.txt").write_text(FORK_PIN.strip('"') + "\n")
    found = [p.relative_to(tree.root).as_posix() for p in discover(tree.root)]
    assert "scratch-untracked/pyproject.toml" not in found
    assert "scratch-ignored/pyproject.toml" not in found
    assert "services/train/requirements-local.txt" not in found
    assert "services/train/pyproject.toml" in found
    untouched = {
        rel: (tree.root / rel).read_bytes()
        for rel in (
            "scratch-untracked/pyproject.toml",
            "scratch-ignored/pyproject.toml",
            "services/train/requirements-local.txt",
        )
    }
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    for rel, data in untouched.items():
        assert (tree.root / rel).read_bytes() == data
    for rel in CHANGED:
        assert (tree.root / rel).read_bytes() == (GOLDEN / rel).read_bytes()


@pytest.mark.e2e
def test_package_filter_moves_only_the_named_plugin_everywhere(tree) -> None:
    plan = plan_bump(tree.root, NEW_SHA, packages=["FlyteKitPlugins_KFPyTorch"])
    moved = [p for c in plan.changes for p in c.pins]
    assert {p.package for p in moved} == {"flytekitplugins-kfpytorch"}
    assert len(moved) == 7
    assert {p.package for p in plan.unselected} == {
        "flytekit",
        "flytekit-sidecar",
        "flytekitplugins-deck-standard",
        "flytekitplugins-envd",
        "flytekitplugins-papermill",
        "flytekitplugins-pod",
    }
    after = {c.rel: c.after for c in plan.changes}
    assert (
        f"flytekit @ https://github.com/exa-labs/flytekit/archive/{OLD_A}"
        in after["pyproject.toml"]
    )


@pytest.mark.e2e
def test_package_that_matches_no_pin_is_refused(tree) -> None:
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "--package", "flytekitt")
    assert proc.returncode == 2
    assert "--package flytekitt matches no pin" in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.e2e
def test_other_repository_pins_and_comments_stay_even_with_the_same_commit(tree) -> None:
    plan = plan_bump(tree.root, NEW_SHA)
    after = {c.rel: c.after for c in plan.changes}
    root = after["pyproject.toml"]
    assert (
        f"# the fork carries the preemption fix; was https://github.com/exa-labs/flytekit/archive/{OLD_A}"
        in root
    )
    assert f'last-audited = "{OLD_A}"' in root
    assert (
        f'upstream-thing = {{ git = "https://github.com/flyteorg/flytekit", rev = "{UPSTREAM}" }}'
        in root
    )
    reqs = after["services/train/requirements.txt"]
    assert (
        f"# old: flytekitplugins-kfpytorch @ https://github.com/exa-labs/flytekit/archive/{OLD_SHORT}.tar.gz"
        in reqs
    )
    assert "libs/legacy/requirements-dev.txt" not in after


@pytest.mark.e2e
def test_requirement_split_across_a_continuation_inside_the_commit_cannot_move(
    tmp_path: Path,
) -> None:
    (tmp_path / "requirements.txt").write_text(
        f"flytekit @ https://github.com/exa-labs/flytekit/archive/{OLD_A[:20]}\\\n"
        f"{OLD_A[20:]}.tar.gz\n"
    )
    before = snapshot(tmp_path)
    proc = run_cli(NEW_SHA, "--root", str(tmp_path), "--no-verify", "--check")
    assert proc.returncode == 1, proc.stderr
    assert "cannot move: requirements.txt:1: the commit is split across lines" in proc.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.e2e
def test_unparseable_requirement_naming_the_fork_cannot_move_and_is_named(
    tmp_path: Path,
) -> None:
    (tmp_path / "requirements-ci.txt").write_text(
        f"pandas\nflytekit @@ https://github.com/exa-labs/flytekit/archive/{OLD_A}.tar.gz\n"
    )
    proc = run_cli(NEW_SHA, "--root", str(tmp_path), "--no-verify", "--check")
    assert proc.returncode == 1, proc.stderr
    assert "cannot move: requirements-ci.txt:2: cannot parse it as a requirement" in proc.stderr


@pytest.mark.e2e
def test_read_only_file_refuses_before_writing_anything(tree) -> None:
    target = tree.root / "services/train/requirements.txt"
    target.chmod(0o444)
    before = snapshot(tree.base)
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify")
    assert proc.returncode == 2
    assert "read-only" in proc.stderr and "nothing written" in proc.stderr
    assert snapshot(tree.base) == before


@pytest.mark.e2e
def test_write_failing_mid_way_restores_every_file_already_written(tree) -> None:
    # A file-size limit makes the last write fail after four files were already replaced
    # (EFBIG: python ignores SIGXFSZ). Works as root too, unlike permission tricks.
    big = tree.root / "zz-big/requirements.txt"
    big.parent.mkdir()
    big.write_text(FORK_PIN.strip('"') + "\n" + "# padding\n" * 20_000)
    limit = 64 * 1024
    assert big.stat().st_size > limit > max((tree.root / rel).stat().st_size for rel in CHANGED)
    before = snapshot(tree.base)

    def cap_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = run_cli_process(
        NEW_SHA, "--root", str(tree.root), "--no-verify", preexec_fn=cap_file_size
    )
    assert proc.returncode == 2, proc.stderr
    assert "zz-big/requirements.txt failed" in proc.stderr
    assert "every file was restored" in proc.stderr
    assert snapshot(tree.base) == before  # bytes and mtimes; no temporary files left


@pytest.mark.e2e
def test_table_summary_lists_files_pins_and_old_commits(tree) -> None:
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--no-verify", "-o", "table")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for rel in CHANGED:
        assert rel in out
    assert f"25 pin(s) in 5 file(s) moved, from: {OLD_A[:12]} (14), {OLD_B[:12]} (10)" in out
    assert "uv.lock stale: uv.lock" in out


def test_dry_run_and_check_together_is_a_usage_error(tree) -> None:
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--dry-run", "--check")
    assert proc.returncode == 2 and "cannot be combined" in proc.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [[], ["--check"], ["--dry-run"]])
def test_no_pins_at_all_is_refused_not_an_all_clear(tmp_path: Path, mode: list[str]) -> None:
    # A tree without pins of the repo (or a --repo typo) is a mistake, never "all 0 pins at SHA".
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["a"]\n')
    proc = run_cli(NEW_SHA, "--root", str(tmp_path), "-o", "json", *mode)
    assert proc.returncode == 2, proc.stderr  # no network needed either
    assert proc.stdout == ""
    assert "no pin of exa-labs/flytekit" in proc.stderr and "--repo" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.e2e
def test_a_repo_typo_finds_no_pin_and_is_refused(tree) -> None:
    proc = run_cli(NEW_SHA, "--root", str(tree.root), "--repo", "exa-labs/flytkit", "--check")
    assert proc.returncode == 2 and "no pin of exa-labs/flytkit" in proc.stderr


@pytest.mark.e2e
def test_root_defaults_to_the_git_top_level(tree) -> None:
    sub = tree.root / "services/train"
    env_git = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    git_dir = tree.root / ".git"
    subprocess.run(["rm", "-rf", str(git_dir)], check=True)
    subprocess.run(["git", "init", "-q", str(tree.root)], check=True, env={**os.environ, **env_git})
    # In a work tree pin-bump reads only tracked files.
    subprocess.run(
        ["git", "-C", str(tree.root), "add", "-A"], check=True, env={**os.environ, **env_git}
    )
    proc = run_cli(NEW_SHA, "--no-verify", "--check", "-o", "json", cwd=sub)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["root"] == str(tree.root.resolve())
