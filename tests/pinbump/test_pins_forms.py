"""Every form of the fork's pin is a pin (issue 43, item 3): moved with its auth form kept and
its token never shown, or reported as one pin-bump cannot move, which fails `--check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.pins import NEW_SHA, OLD_A, OLD_B, run_cli, snapshot

pytestmark = pytest.mark.e2e

TOKEN = "ghs_n0tR3al5ecretT0kenF0rTests000000"  # a literal installation token in a URL
AT_NEW = f"flytekit @ https://github.com/exa-labs/flytekit/archive/{NEW_SHA}.tar.gz\n"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _private_fork(root: Path) -> Path:
    """The issue's tree: flytekit already bumped, the plugin pinned the ways private forks are."""
    return _tree(
        root,
        {
            "requirements.txt": AT_NEW
            + "flytekitplugins-kfpytorch @ git+ssh://git@github.com/exa-labs/flytekit.git@"
            f"{OLD_A}#subdirectory=plugins/flytekit-kf-pytorch\n"
            f"git+https://x-access-token:{TOKEN}@github.com/exa-labs/flytekit@{OLD_B}"
            "#egg=flytekitplugins-envd&subdirectory=plugins/flytekit-envd\n",
            "pyproject.toml": '[project]\nname = "p"\nversion = "1"\ndependencies = [\n'
            f'  "flytekitplugins-pod @ git+https://{TOKEN}@github.com/exa-labs/flytekit.git@'
            f'{OLD_A}#subdirectory=plugins/flytekit-k8s-pod",\n]\n\n[tool.uv.sources]\n'
            f'flytekitplugins-deck = {{ git = "https://x-access-token:{TOKEN}@github.com/'
            f'exa-labs/flytekit", rev = "{OLD_B}" }}\n',
        },
    )


def test_check_sees_ssh_and_token_pins_the_plugin_is_left_on(tmp_path: Path) -> None:
    root = _private_fork(tmp_path / "repo")
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--check", "-o", "json")
    assert proc.returncode == 1, proc.stderr  # was: "all 1 pin(s) already at …", exit 0
    doc = json.loads(proc.stdout)
    assert doc["pins_found"] == 5 and doc["pins_stale"] == 4
    packages = {p["package"] for f in doc["files"] for p in f["pins"]}
    assert packages == {
        "flytekitplugins-kfpytorch",
        "flytekitplugins-envd",
        "flytekitplugins-pod",
        "flytekitplugins-deck",
    }
    assert TOKEN not in proc.stdout + proc.stderr


def test_bump_moves_them_keeping_their_auth_form_and_never_prints_the_token(
    tmp_path: Path,
) -> None:
    root = _private_fork(tmp_path / "repo")
    before = {rel: (root / rel).read_text() for rel in ("requirements.txt", "pyproject.toml")}
    outputs = []
    for mode in (
        ["--dry-run", "-o", "table"],
        ["--dry-run", "-o", "json"],
        ["--dry-run", "-o", "diff"],
    ):
        proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", *mode)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)
    diff = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--dry-run", "-o", "diff")
    assert (
        "x-access-token:***@github.com" in diff.stdout and "https://***@github.com" in diff.stdout
    )
    assert "masks credentials" in diff.stderr and "not apply" in diff.stderr
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    outputs.append(proc.stdout + proc.stderr)
    for out in outputs:
        assert TOKEN not in out
    for rel, text in before.items():  # only the commits moved: the token stays in the file
        after = (root / rel).read_text()
        assert after == text.replace(OLD_A, NEW_SHA).replace(OLD_B, NEW_SHA)
        assert TOKEN in after
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--check", "-o", "table")
    assert proc.returncode == 0, proc.stderr
    assert "all 5 pin(s) already at" in proc.stdout


# Lines that name the fork where a dependency is declared but hold no pin pin-bump can rewrite.
UNMOVABLE = [
    pytest.param(
        "requirements.txt",
        f"flytekit @ https://api.github.com/repos/exa-labs/flytekit/tarball/{OLD_A}\n",
        "requirements.txt:2: a URL of the fork in a form pin-bump cannot rewrite",
        id="api-tarball",
    ),
    pytest.param(
        "requirements.txt",
        f"flytekit @ git+ssh://git@github.com:exa-labs/flytekit.git@{OLD_A}\n",
        "requirements.txt:2: a URL of the fork in a form pin-bump cannot rewrite",
        id="ssh-url-with-scp-colon",
    ),
    pytest.param(
        "requirements.txt",
        f"flytekit @@ git+https://{TOKEN}@github.com/exa-labs/flytekit@{OLD_A}\n",
        "requirements.txt:2: cannot parse it as a requirement",
        id="unparseable-with-token",
    ),
    pytest.param(
        "requirements.txt",
        "--find-links https://github.com/exa-labs/flytekit/releases/download/v1.16.31/\n",
        "requirements.txt:2: an option line, not a requirement",
        id="option-line",
    ),
    pytest.param(
        "pyproject.toml",
        '[project]\nname = "p"\nversion = "1"\ndependencies = [\n'
        f'  "flytekit @ https://github.com/exa-labs/flytekit/tarball/{OLD_A}",\n]\n',
        "pyproject.toml:5: project.dependencies[0]: a URL of the fork in a form",
        id="pyproject-tarball",
    ),
    pytest.param(
        "pyproject.toml",
        '[project]\nname = "p"\nversion = "1"\n\n[tool.uv.sources]\n'
        f'flytekit = {{ git = "https://github.com/exa-labs/flytekit.git@{OLD_A}" }}\n',
        "pyproject.toml:6: tool.uv.sources.flytekit.git: a git remote of the fork",
        id="uv-rev-inside-git",
    ),
    pytest.param(
        "pyproject.toml",
        '[project]\nname = "p"\nversion = "1"\n\n[tool.poetry.dependencies]\n'
        f'flytekit = {{ url = "https://github.com/exa-labs/flytekit/zipball/{OLD_A}" }}\n',
        "pyproject.toml:6: tool.poetry.dependencies.flytekit.url: a URL of the fork",
        id="poetry-zipball",
    ),
]


@pytest.mark.parametrize(("rel", "text", "said"), UNMOVABLE)
def test_a_pin_it_cannot_move_is_named_and_fails_check(
    tmp_path: Path, rel: str, text: str, said: str
) -> None:
    root = tmp_path / "repo"
    if rel == "requirements.txt":
        _tree(root, {rel: AT_NEW + text})
    else:
        _tree(root, {"requirements.txt": AT_NEW, rel: text})
    before = snapshot(root)
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--check", "-o", "json")
    assert proc.returncode == 1, proc.stderr  # was 0: "all 1 pin(s) already at …"
    assert f"cannot move: {said}" in proc.stderr
    doc = json.loads(proc.stdout)
    path, line = said.split(":")[:2]
    assert [(u["path"], u["line"]) for u in doc["cannot_move"]] == [(path, int(line))]
    assert TOKEN not in proc.stdout + proc.stderr
    for mode in ([], ["--dry-run"]):  # never an all-clear, whatever the mode
        proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "-o", "table", *mode)
        assert proc.returncode == 1, proc.stderr
        assert "all 1 pin(s) already at" not in proc.stdout
        assert "1 pin(s) it cannot move" in proc.stdout
        assert TOKEN not in proc.stdout + proc.stderr
    assert snapshot(root) == before


def test_the_movable_pins_move_and_the_run_still_fails_on_the_one_it_cannot(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path / "repo",
        {
            "requirements.txt": f"flytekit @ git+ssh://git@github.com/exa-labs/flytekit@{OLD_A}\n"
            f"flytekitplugins-x @ https://api.github.com/repos/exa-labs/flytekit/tarball/{OLD_A}\n"
        },
    )
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "-o", "json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["written"] is True
    lines = (root / "requirements.txt").read_text().splitlines()
    assert lines[0].endswith(f"@{NEW_SHA}") and lines[1].endswith(f"/tarball/{OLD_A}")
    assert "1 pin(s) of exa-labs/flytekit it cannot move: edit them by hand" in proc.stderr


def test_a_fork_url_outside_any_dependency_is_not_a_pin(tmp_path: Path) -> None:
    # [project.urls], a description: the repository named, nothing installed from it.
    root = _tree(
        tmp_path / "repo",
        {
            "requirements.txt": AT_NEW,
            "pyproject.toml": '[project]\nname = "p"\nversion = "1"\n'
            'description = "our fork, git@github.com:exa-labs/flytekit.git"\n'
            '[project.urls]\nSource = "https://github.com/exa-labs/flytekit"\n',
        },
    )
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "cannot move" not in proc.stderr


def test_a_vcs_url_without_a_revision_floats_and_is_noted(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "repo",
        {
            "requirements.txt": AT_NEW
            + "flytekitplugins-x @ git+ssh://git@github.com/exa-labs/flytekit.git\n"
        },
    )
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "requirements.txt:2: not pinned to a commit (the default branch)" in proc.stderr


def test_a_tree_whose_only_pin_cannot_move_is_named_not_called_pinless(tmp_path: Path) -> None:
    # Not "no pin of exa-labs/flytekit under …" (a --repo typo's message): the pin is named.
    url = f"https://api.github.com/repos/exa-labs/flytekit/tarball/{OLD_A}"
    root = _tree(tmp_path / "repo", {"requirements.txt": f"flytekit @ {url}\n"})
    proc = run_cli(NEW_SHA, "--root", str(root), "--no-verify", "--check", "-o", "table")
    assert proc.returncode == 1, proc.stderr
    assert "no pin of" not in proc.stderr
    assert proc.stdout.splitlines()[1:] == [
        "1 pin(s) it cannot move, left as they are: requirements.txt:1"
    ]
