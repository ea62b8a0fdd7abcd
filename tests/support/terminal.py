"""A clean environment for a child CLI process, and the CLI run on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
from pathlib import Path

from support.cli import CLI

SOURCE_VARS = ("LOKI_", "FLYTE", "AWS_", "ELASTIC_AUDIT_", "COLUMNS", "XDG_")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without anything that points at a source, HOME in tmp_path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SOURCE_VARS)}
    env.update(HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "state"), **extra)
    return env


def run_in_pty(
    args: list[str], env: dict[str, str], cwd: Path, columns: int, *, both: bool = False
) -> str:
    """Run the CLI with stdout (and with `both`, stderr too) on a pseudo-terminal `columns`
    wide; what it printed there."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [*CLI, *args],
        env=env,
        cwd=cwd,
        stdout=slave,
        stderr=slave if both else subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


# A config that gives up fast: one try per source, short timeouts (a dead source fails in seconds).
QUICK_CONFIG = """
[flyte]
retries = 0
retry_backoff = 0.01
timeout = 5
[loki]
retries = 0
retry_backoff = 0.01
timeout = 5
[checkpoints]
input = "checkpoint_dir"
"""


def work_dir(tmp_path: Path, config: str = QUICK_CONFIG) -> Path:
    """`tmp_path/work` with `config` as its ./elastic-audit.toml, and an empty HOME beside it."""
    (tmp_path / "home").mkdir(exist_ok=True)
    w = tmp_path / "work"
    w.mkdir()
    (w / "elastic-audit.toml").write_text(config)
    return w


def one_error_line(r: subprocess.CompletedProcess, fragment: str) -> str:
    """The run failed with exit 2 and one `elastic-audit: error:` line containing `fragment`
    (never a traceback); that line."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("elastic-audit: error:")]
    assert len(lines) == 1 and fragment in lines[0], r.stderr
    return lines[0]


def rows_fit(text: str, columns: int) -> None:
    """Every line fits, but for an identifier longer than the room its column has left (an S3
    URI): it stays whole, alone at the end of its line, past the edge."""
    for line in text.splitlines():
        assert line == line.rstrip(), f"trailing spaces: {line!r}"
        if len(line) > columns:
            word = line.split()[-1]
            assert line.endswith(" " + word), line
            assert len(line) - len(word) <= columns, f"wider than the terminal: {line!r}"
