"""Errors about a caller's parameter, worded in the caller's terms.

The library knows a value came in as `since` or `project`; only its caller knows what the
person typed it as (the command line: `--since`, `--project`). A ParamError's message is parts:
text, and `Param("since")` wherever the parameter is named; `worded({"since": "--since"})`
reads it with the caller's names, `str()` with the parameter's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from forensics.errors import ConfigError, UsageError


@dataclass(frozen=True)
class Param:
    """A parameter named in a message."""

    name: str


class Named(Exception):
    """An error whose message names parameters; `params` are the ones named."""

    def __init__(self, *parts: str | Param) -> None:
        self.parts = parts
        super().__init__(self.worded({}))

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.name for p in self.parts if isinstance(p, Param)))

    def worded(self, names: Mapping[str, str]) -> str:
        """The message, each parameter called by its name in `names` (else its own name)."""
        return "".join(names.get(p.name, p.name) if isinstance(p, Param) else p for p in self.parts)


class ParamError(Named, UsageError):
    """A parameter's value is malformed, contradictory or unknown."""


class ParamConfigError(Named, ConfigError):
    """A parameter names something the configuration or the world refuses (a state file in a
    directory that does not exist, a state written for another scope)."""
