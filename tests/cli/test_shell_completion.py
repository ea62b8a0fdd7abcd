"""`--install-completion SHELL` installs that shell's completion (typer's flag alone ignored the
name and installed the running shell's: bash's from a bash prompt, asked for zsh's);
`--show-completion SHELL` prints that shell's script. In an empty HOME, through the CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli import run_process
from support.terminal import one_error_line

pytestmark = pytest.mark.e2e


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "SHELL": "/bin/bash"}


def test_install_completion_zsh_installs_zshs_not_bashs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = run_process("--install-completion", "zsh", env=_env(home), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    script = home / ".zfunc" / "_elastic-audit"
    assert f"zsh completion installed in {script}" in r.stdout
    assert "_ELASTIC_AUDIT_COMPLETE=complete_zsh" in script.read_text()
    assert "fpath+=~/.zfunc" in (home / ".zshrc").read_text()
    assert not (home / ".bashrc").exists() and not (home / ".bash_completions").exists()


def test_install_completion_takes_the_shell_after_an_equals_sign_too(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = run_process("--install-completion=fish", env=_env(home), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    fish = home / ".config" / "fish" / "completions" / "elastic-audit.fish"
    assert "complete_fish" in fish.read_text()
    assert not (home / ".bashrc").exists()


def test_show_completion_prints_the_named_shells_script(tmp_path):
    r = run_process("--show-completion", "zsh", env=_env(tmp_path), cwd=tmp_path)
    assert r.returncode == 0 and "complete_zsh" in r.stdout and "complete_bash" not in r.stdout


def test_a_shell_typer_cannot_complete_is_one_error_line(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = run_process("--install-completion", "tcsh", env=_env(home), cwd=tmp_path)
    one_error_line(r, "--install-completion 'tcsh': not a shell (bash, zsh, fish")
    assert list(home.iterdir()) == []
