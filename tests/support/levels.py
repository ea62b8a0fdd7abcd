"""The test levels (tests/README.md) and the guard that keeps the fast level in-process.

A test with none of the `LEVELS` markers is of the fast level: tests/conftest.py runs it with
`guard.active` set, and it fails if it starts a process or binds a socket (a server), with a
message naming the marker it needs.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc

LEVELS = ("integration", "e2e", "install")
# Fixtures that start a server or fetch over the network: a test asking for one is not of the
# fast level even when another test of its module started the server (the fixture is cached).
SERVING_FIXTURES = frozenset({"box", "hook", "kfpytorch_sdist", "sdist_tree"})
_SPAWNING = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
    }
)


class NotFastLevel(Exception):
    """A test of the fast level (none of the `LEVELS` markers) started a process or a server."""


class FastLevelGuard:
    """While `active` (a test's node id), Python's audit events for starting a process
    (`subprocess`, `os.fork`/`exec`/`spawn`, `pty`) and binding a socket, and `grpc.server`
    (gRPC binds in C, where no audit event is raised), are refused with `NotFastLevel`; each
    refusal is kept in `seen`, so a test that swallows the exception fails all the same."""

    def __init__(self) -> None:
        self.active: str | None = None
        self.seen: list[str] = []

    def refuse(self, what: str, marker: str) -> None:
        msg = (
            f"{self.active} {what}: the fast level runs in-process only, so mark the test "
            f"`pytest.mark.{marker}` (tests/README.md, the test levels)"
        )
        self.seen.append(msg)
        raise NotFastLevel(msg)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active is None:
            return
        if event in _SPAWNING:
            if _importing():
                return  # a library probing its platform as it is imported, not the test
            what = args[1] if event == "subprocess.Popen" else args[0] if args else ""
            self.refuse(f"started a process ({event} {str(what)[:160]})", "e2e")
        elif event == "socket.bind":
            if _importing():
                return  # urllib3 binds ("::1", 0) as it is imported, to learn whether IPv6 works
            self.refuse(
                f"bound a socket to {args[1]!r} (a server)",
                "integration` (a real client against a loopback server) or `pytest.mark.e2e",
            )

    @contextmanager
    def expecting_refusals(self) -> Iterator[list[str]]:
        """The refusals made inside the block, taken off `seen` (for the guard's own tests)."""
        before = len(self.seen)
        taken: list[str] = []
        try:
            yield taken
        finally:
            taken.extend(self.seen[before:])
            del self.seen[before:]


def _importing() -> bool:
    """Whether a module is being imported: some run a program as they are (croniter runs
    `file` through platform.architecture; keyring's macOS backend, loaded by flytekit's first
    Admin channel, runs ldconfig through ctypes.util.find_library), in whichever test imports
    them first."""
    return any(f.filename.startswith("<frozen importlib") for f in traceback.extract_stack())


guard = FastLevelGuard()
sys.addaudithook(guard.audit)
_grpc_server = grpc.server


def _guarded_grpc_server(*args: Any, **kwargs: Any) -> Any:
    if guard.active is not None:
        guard.refuse("started a gRPC server", "integration")
    return _grpc_server(*args, **kwargs)


grpc.server = _guarded_grpc_server
