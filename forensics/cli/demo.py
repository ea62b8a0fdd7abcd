"""`elastic-audit demo`: the whole job on a loopback sandbox seeded with the reference incident."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from forensics.cli.common import check_writable_file, write_atomically
from forensics.cli.options import (
    NoProgressOpt,
    check_output,
    default_output,
    flag_option,
    output_option,
    value_option,
)
from forensics.errors import UsageError
from forensics.formats import SCAN_FORMATS

if TYPE_CHECKING:
    from forensics.sandbox.stack import Sandbox

EXAMPLES = """
Examples:

  elastic-audit demo

  elastic-audit demo -o markdown

  elastic-audit demo -o html > incident.html

  elastic-audit demo --keep-running --env-file sandbox.env -o table
  # then, in another shell:
  . ./sandbox.env && elastic-audit show gs1:production:azvg5f9v9974m78fvlf7
  elastic-audit demo --add-incident     # a new silent green, signalled 5 minutes ago
  elastic_audit_deactivate              # your own variables back
"""

ADD_REQUEST = "add-incident.json"  # in the sandbox directory: what --add-incident asks for
# In the sandbox directory too: the pid of the demo serving it, flock-ed for as long as that
# demo runs. `--add-incident` signals a pid only when this file names it and is still locked
# (a lock goes with its process, even on SIGKILL: a reused pid never passes).
PIDFILE = "demo.pid"

# What the sandbox's S3 imports (forensics/sandbox/s3_server.py): the `demo` extra, which a plain
# install lacks. Looked up, not imported: a missing one stops the demo before anything starts.
DEMO_EXTRA_MODULES = ("moto", "flask", "flask_cors", "cheroot")

DEMO_CONFIG = """\
# elastic-audit demo configuration (written by `elastic-audit demo`)
[flyte]
console_url = "http://localhost:30080/console"

[checkpoints]
input = "checkpoint_dir"

# Kubernetes events shipped by Grafana Alloy (docs/configuration.md): a second witness
[k8s_events]
enabled = true
"""


DEACTIVATE = "elastic_audit_deactivate"


def env_lines(env: dict[str, str]) -> str:
    """`export NAME=value` lines, shell-quoted: `. FILE` works in sh, bash and zsh.

    The values they replace (the user's own AWS keys, say) are kept first, once, and the
    `elastic_audit_deactivate` function the file defines puts them back (or unsets what was
    not set), as a virtualenv's `deactivate` does."""
    names = sorted(env)
    keep = "".join(
        f'  if [ -n "${{{k}+x}}" ]; then export _ELASTIC_AUDIT_OLD_{k}="${k}"; fi\n' for k in names
    )
    restore = "".join(
        f'  if [ -n "${{_ELASTIC_AUDIT_OLD_{k}+x}}" ]; then export {k}="$_ELASTIC_AUDIT_OLD_{k}"; '
        f"unset _ELASTIC_AUDIT_OLD_{k}; else unset {k}; fi\n"
        for k in names
    )
    return (
        "# elastic-audit demo sandbox: `. THIS_FILE` points elastic-audit at it;\n"
        f"# `{DEACTIVATE}` puts back what it replaced.\n"
        'if [ -z "${_ELASTIC_AUDIT_SANDBOX+x}" ]; then\n'
        "  export _ELASTIC_AUDIT_SANDBOX=1\n"
        + keep
        + "fi\n"
        + "".join(f"export {k}={shlex.quote(env[k])}\n" for k in names)
        + f"{DEACTIVATE}() {{\n"
        + restore
        + f"  unset _ELASTIC_AUDIT_SANDBOX; unset -f {DEACTIVATE}\n}}\n"
    )


def demo(
    keep_running: bool = flag_option(
        "--keep-running",
        help="Keep the sandbox up after the scan and print the environment that points every "
        "command at it; wait until interrupted.",
    ),
    env_file: str | None = value_option(
        "--env-file",
        "FILE",
        "With --keep-running: write that environment to FILE (`. FILE` to use it).",
    ),
    add_incident: bool = flag_option(
        "--add-incident",
        help="Add a new silent green (signalled 5 minutes ago) to the demo running with "
        "--keep-running whose env file this shell sourced; print its execution.",
    ),
    output: str | None = output_option(*SCAN_FORMATS),
    no_progress: bool = NoProgressOpt,
) -> None:
    """Start Loki, Flyte Admin and S3 on loopback, seed the reference incident, run a real scan."""
    if add_incident:
        if keep_running or env_file:
            raise UsageError("--add-incident talks to a running demo; start none with it")
        _ask_running_demo()
        return
    fmt = check_output(default_output(output), SCAN_FORMATS)
    if env_file is not None:
        if not keep_running:
            raise UsageError("--env-file needs --keep-running (the sandbox stops with the demo)")
        check_writable_file(env_file, "--env-file")
    _require_demo_extra()
    from forensics.sandbox.incident import WINDOW_END, WINDOW_START, reference_scenario
    from forensics.sandbox.stack import sandbox

    typer.echo("Starting the sandbox (Loki API, Flyte Admin gRPC, S3) on loopback…", err=True)
    with sandbox(reference_scenario()) as box:
        # The sandbox's own directory (it holds its flytectl config) also holds the demo's
        # config and audit log: relaunches against the sandbox never reach the user's real log,
        # and all of it goes when the sandbox stops.
        home = Path(box.env["FLYTECTL_CONFIG"]).parent
        cfg = home / "elastic-audit.toml"
        cfg.write_text(DEMO_CONFIG, encoding="utf-8")
        env = {
            **box.env,
            "ELASTIC_AUDIT_CONFIG": str(cfg),
            "ELASTIC_AUDIT_AUDIT_LOG": str(home / "audit.jsonl"),
            "ELASTIC_AUDIT_DEMO_PID": str(os.getpid()),
        }
        args = [
            sys.executable,
            "-m",
            "forensics",
            "scan",
            "--since",
            WINDOW_START.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "--until",
            WINDOW_END.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "--config",
            str(cfg),
            "-o",
            fmt.value,
        ]
        if no_progress:
            args.append("--no-progress")
        typer.echo("+ elastic-audit " + " ".join(args[3:]), err=True)
        rc = subprocess.run(args, env=box.child_environ() | env, check=False).returncode
        if keep_running:
            with _pidfile(home):
                _announce(env, env_file)
                _serve(box, home)
    # The demo worked when the scan ran to completion: findings (exit 1) are its point.
    raise typer.Exit(0 if rc in (0, 1) else rc)


@contextlib.contextmanager
def _pidfile(home: Path) -> Iterator[None]:
    """`home/demo.pid`: this process's pid, exclusively locked while the block runs."""
    with open(home / PIDFILE, "w", encoding="ascii") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield


def _proven_demo(pid: str, home: Path) -> None:
    """Refuse (one line) unless `pid` is the demo serving `home`: its pidfile names that pid
    and is locked, so the process that wrote it still runs. Never signal anything else."""
    from forensics.errors import ConfigError

    path = home / PIDFILE
    refuse = f"--add-incident: ELASTIC_AUDIT_DEMO_PID={pid} is not a demo running in {home}"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise ConfigError(f"{refuse} ({path}: {e.strerror or e}); nothing signalled") from None
    try:
        written = os.read(fd, 64).decode("ascii", "replace").strip()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            alive = False  # nobody holds the lock: the demo that wrote the file is gone
        except BlockingIOError:
            alive = True
    finally:
        os.close(fd)
    if not alive:
        raise ConfigError(
            f"{refuse} (the demo that wrote {path} has stopped); nothing signalled; "
            "`elastic_audit_deactivate` forgets its variables"
        )
    if written != pid:
        raise ConfigError(f"{refuse} (that demo is pid {written}); nothing signalled")


def _serve(box: Sandbox, home: Path) -> None:
    """Wait until SIGTERM or Ctrl-C; on SIGUSR1 (`demo --add-incident`) add the incident that
    the request file in `home` describes, and delete the file to say it is done."""
    wake, stop = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: (stop.set(), wake.set()))
    signal.signal(signal.SIGUSR1, lambda *_: wake.set())
    try:
        while not stop.is_set():
            wake.wait(3600)
            wake.clear()
            request = home / ADD_REQUEST
            if request.exists():
                _add_requested(box, request)
    except KeyboardInterrupt:
        pass


def _add_requested(box: Sandbox, request: Path) -> None:
    from forensics.sandbox.live import add_incident
    from forensics.timeutil import fromisoformat

    asked = json.loads(request.read_text(encoding="utf-8"))
    at = fromisoformat(asked["signal_at"])
    execution = add_incident(box, asked["name"], at)
    request.unlink()
    typer.echo(
        f"elastic-audit: demo: added {execution} (SIGTERM at {asked['signal_at']})", err=True
    )


def _ask_running_demo() -> None:
    """Ask the running demo (its pid and directory from the sourced env file) for an incident."""
    import secrets
    import time
    from datetime import datetime, timedelta

    from forensics.errors import ConfigError
    from forensics.model import UTC, rfc3339

    pid, config = os.environ.get("ELASTIC_AUDIT_DEMO_PID"), os.environ.get("ELASTIC_AUDIT_CONFIG")
    if not (pid and pid.isdigit() and config):
        raise UsageError(
            "--add-incident: no running demo in this shell's environment (start `elastic-audit "
            "demo --keep-running --env-file sandbox.env`, then `. ./sandbox.env`)"
        )
    home = Path(config).parent
    _proven_demo(pid, home)
    name = "n" + secrets.token_hex(10)[:19]  # a Flyte-like name: 20 characters, [a-z0-9]
    at = rfc3339(datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5))
    try:
        write_atomically(str(home / ADD_REQUEST), json.dumps({"name": name, "signal_at": at}))
        os.kill(int(pid), signal.SIGUSR1)
    except (OSError, ProcessLookupError) as e:
        raise ConfigError(
            f"--add-incident: the demo (pid {pid}, {home}) is not running ({e.strerror or e}); "
            "`elastic_audit_deactivate` forgets its variables"
        ) from None
    deadline = time.monotonic() + 30
    while (home / ADD_REQUEST).exists():
        if time.monotonic() > deadline:
            raise ConfigError(f"--add-incident: the demo (pid {pid}) did not answer in 30 s")
        time.sleep(0.1)
    typer.echo(f"elastic-audit: added a silent green to the demo: SIGTERM at {at}", err=True)
    typer.echo(f"gs1:production:{name}")


def _require_demo_extra() -> None:
    """One usage error naming the fix when the `demo` extra is not installed."""
    missing = [m for m in DEMO_EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"demo needs the demo extra ({', '.join(missing)} not installed): "
            "pip install 'elastic-audit[demo]'"
        )


def _announce(env: dict[str, str], env_file: str | None) -> None:
    """The environment goes to FILE, or to stdout on a terminal; never into a piped report."""
    text = env_lines(env)
    if env_file is not None:
        write_atomically(env_file, text)
        # `. FILE` searches PATH unless FILE holds a slash.
        source = env_file if "/" in env_file else f"./{env_file}"
        where = f"Sandbox running; its environment is in {env_file}: `. {source}`"
    elif sys.stdout.isatty():
        typer.echo(text, nl=False)
        where = "Sandbox running: paste the lines above into another shell"
    else:
        # stdout holds the scan's report (a pipe or a file): keep it parseable.
        typer.echo(text, err=True, nl=False)
        where = "Sandbox running: paste the lines above (or use --env-file FILE)"
    typer.echo(
        f"{where}, then run scan, show or relaunch. It replaces {', '.join(sorted(env))} in "
        f"that shell (your own AWS keys included); `{DEACTIVATE}` puts them back. The "
        "variables point at files that go when the sandbox stops. Ctrl-C to stop.",
        err=True,
    )
    typer.echo(ONLY_LOST_HINT, err=True)


# What `relaunch --only-lost` would re-run of the reference incident (docs/commands.md).
ONLY_LOST_HINT = (
    "Try: elastic-audit relaunch gs1:production:azvg5f9v9974m78fvlf7 --only-lost --dry-run "
    "(re-runs only the lost node, from its recorded inputs)"
)
