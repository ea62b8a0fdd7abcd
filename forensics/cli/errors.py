"""An error as the command line says it: one line, parameters called by their flags."""

from __future__ import annotations

from forensics.params import Named

# A parameter whose flag is not `--` and its name with `-` for `_`.
FLAGS = {"output": "-o"}


def flag(param: str) -> str:
    """The flag a library parameter is given by: `since` → `--since`, `reset_state` →
    `--reset-state`, `output` → `-o`."""
    return FLAGS.get(param, "--" + param.replace("_", "-"))


def message(error: BaseException) -> str:
    """The error's text, each parameter it names called by its flag."""
    if isinstance(error, Named):
        return error.worded({p: flag(p) for p in error.params})
    return str(error)
