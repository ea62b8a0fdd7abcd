"""`elastic-audit demo`: the whole job on a loopback sandbox seeded with the reference incident."""

from __future__ import annotations

import importlib.util
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import typer

from forensics.commands.common import check_writable_file, write_atomically
from forensics.commands.options import (
    NoProgressOpt,
    check_output,
    default_output,
    flag_option,
    output_option,
    value_option,
)
from forensics.errors import UsageError
from forensics.formats import SCAN_FORMATS

EXAMPLES = """
Examples:

  elastic-audit demo

  elastic-audit demo -o markdown

  elastic-audit demo -o html > incident.html

  elastic-audit demo --keep-running --env-file sandbox.env -o table
  # then, in another shell:
  . ./sandbox.env && elastic-audit show gs1:production:azvg5f9v9974m78fvlf7
"""

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


def env_lines(env: dict[str, str]) -> str:
    """`export NAME=value` lines, shell-quoted: `. FILE` works in sh, bash and zsh."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))


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
    output: str | None = output_option(*SCAN_FORMATS),
    no_progress: bool = NoProgressOpt,
) -> None:
    """Start Loki, Flyte Admin and S3 on loopback, seed the reference incident, run a real scan."""
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
            _announce(env, env_file)
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            try:
                while not stop.wait(3600):
                    pass
            except KeyboardInterrupt:
                pass
    # The demo worked when the scan ran to completion: findings (exit 1) are its point.
    raise typer.Exit(0 if rc in (0, 1) else rc)


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
        f"{where}, then run scan, show or relaunch. The variables point at files that go when "
        "the sandbox stops. Ctrl-C to stop.",
        err=True,
    )
