"""`elastic-audit demo`: the whole job on a loopback sandbox seeded with the reference incident."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import typer

from forensics.cli import OutputFormat, app, check_output, default_output
from forensics.commands.common import NoProgressOpt, OutputOpt

EXAMPLES = """
Examples:

  elastic-audit demo

  elastic-audit demo -o markdown

  elastic-audit demo --keep-running     # then, in another shell, paste the printed variables and
                                        # try `elastic-audit show gs1:production:azvg5f9v9974m78fvlf7`
"""

DEMO_CONFIG = """\
# elastic-audit demo configuration (written by `elastic-audit demo`)
[flyte]
console_url = "http://localhost:30080/console"

[checkpoints]
input = "checkpoint_dir"
"""


@app.command(epilog=EXAMPLES)
def demo(
    keep_running: bool = typer.Option(
        False,
        "--keep-running",
        help="Print the environment that points every command at the sandbox, and wait until interrupted.",
    ),
    output: OutputFormat = OutputOpt,
    no_progress: bool = NoProgressOpt,
) -> None:
    """Start Loki, Flyte Admin and S3 on loopback, seed the reference incident, run a real scan."""
    fmt = check_output(default_output(output), tuple(OutputFormat))
    from forensics.sandbox.incident import WINDOW_END, WINDOW_START, reference_scenario
    from forensics.sandbox.stack import sandbox

    with tempfile.TemporaryDirectory(prefix="elastic-audit-demo-") as tmp:
        cfg = Path(tmp) / "elastic-audit.toml"
        cfg.write_text(DEMO_CONFIG, encoding="utf-8")
        typer.echo("Starting the sandbox (Loki API, Flyte Admin gRPC, S3) on loopback…", err=True)
        with sandbox(reference_scenario()) as box:
            env = {**box.child_environ(), "ELASTIC_AUDIT_CONFIG": str(cfg)}
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
            rc = subprocess.run(args, env=env, check=False).returncode
            if keep_running:
                for k, v in sorted(box.env.items()):
                    typer.echo(f"{k}={v}")
                typer.echo(f"ELASTIC_AUDIT_CONFIG={cfg}")
                typer.echo(
                    "Sandbox running: export the lines above (e.g. `set -a; . ./sandbox.env`) "
                    "and run scan, show or relaunch. Ctrl-C to stop.",
                    err=True,
                )
                stop = threading.Event()
                signal.signal(signal.SIGTERM, lambda *_: stop.set())
                try:
                    while not stop.wait(3600):
                        pass
                except KeyboardInterrupt:
                    pass
    # The demo worked when the scan ran to completion: findings (exit 1) are its point.
    raise typer.Exit(0 if rc in (0, 1) else rc)
