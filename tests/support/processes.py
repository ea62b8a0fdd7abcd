"""What the tests that run a real server binary share: a free loopback port, and stopping it."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 20 s: the server is gone when this returns."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
