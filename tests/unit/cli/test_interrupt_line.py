"""Each command interrupted by Ctrl-C says so, also when several run in one process (the tests'
runner, the Flyte guard task): the line is once per command, not once per process."""

from __future__ import annotations

import importlib

import pytest

# the module (the package's `app` attribute is the typer app it defines)
cli_app = importlib.import_module("forensics.cli.app")


def test_every_interrupted_command_in_one_process_says_it(monkeypatch, capsys):
    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_app, "app", ctrl_c)
    for _ in range(2):
        with pytest.raises(SystemExit) as e:
            cli_app.main(["scan"])
        assert e.value.code == 130
        assert capsys.readouterr().err == "elastic-audit: interrupted\n"
