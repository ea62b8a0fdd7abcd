"""Flags shared by scan, show and relaunch, and the helpers that turn them into objects."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import typer

from forensics.cli import OutputFormat
from forensics.config import Settings, load_settings
from forensics.fsutil import write_atomic

ConfigOpt = typer.Option(
    None,
    "--config",
    help="Config file (default ./elastic-audit.toml, then $XDG_CONFIG_HOME/elastic-audit/config.toml).",
    show_default=False,
)
LokiUrlOpt = typer.Option(
    None,
    "--loki-url",
    help="Loki base URL (else LOKI_ADDR, config [loki] url, http://localhost:3100).",
    show_default=False,
)
FlyteConfigOpt = typer.Option(
    None,
    "--flyte-config",
    help="flytectl/flytekit YAML (else FLYTECTL_CONFIG, ~/.flyte/config.yaml; FLYTE_PLATFORM_URL overrides).",
    show_default=False,
)
CheckpointInputOpt = typer.Option(
    None,
    "--checkpoint-input",
    help="Execution input holding the checkpoint URI.",
    show_default=False,
)
CheckpointTemplateOpt = typer.Option(
    None,
    "--checkpoint-template",
    help="Checkpoint URI template; fields: project, domain, name, node_id, inputs.X, labels.X.",
    show_default=False,
)
WorkersOpt = typer.Option(
    None,
    "--workers",
    min=1,
    max=256,
    help="Concurrent requests per source (default 8).",
    show_default=False,
)
OutputOpt = typer.Option(
    None,
    "-o",
    "--output",
    help="table (default on a terminal), json, csv, markdown.",
    show_default=False,
    case_sensitive=False,
)
NoProgressOpt = typer.Option(
    False,
    "--no-progress",
    help="No progress bar (there is none anyway when stderr is not a terminal).",
)
VerboseOpt = typer.Option(
    False,
    "-v",
    "--verbose",
    help="Log requests and decisions to stderr (secrets are never logged).",
)


def settings_from_flags(
    *,
    config: str | None,
    loki_url: str | None,
    flyte_config: str | None,
    checkpoint_input: str | None = None,
    checkpoint_template: str | None = None,
    workers: int | None = None,
) -> Settings:
    return load_settings(
        config=config,
        loki_url=loki_url,
        flyte_config=flyte_config,
        checkpoint_input=checkpoint_input,
        checkpoint_template=checkpoint_template,
        workers=workers,
    )


def check_scope_names(project: list[str], domain: list[str]) -> None:
    """Refuse (exit 2) a --project/--domain that is not a Flyte name, before any config loads."""
    from forensics.config import FLYTE_NAME
    from forensics.errors import UsageError

    for name, values in (("--project", project), ("--domain", domain)):
        for v in values:
            if not FLYTE_NAME.fullmatch(v):
                raise UsageError(
                    f"{name} {v!r}: Flyte {name[2:]} names are letters, digits, - and _"
                )


def check_domains(domain: list[str], settings: Settings) -> None:
    """Refuse (exit 2) a --domain that `[flyte] domains` does not list.

    Without `[flyte] domains` each project's domains come from Admin, which the scan checks
    --project and --domain against before it reads anything (exit 2 naming the unknown one).
    """
    from forensics.errors import ConfigError

    if not settings.flyte.domains_configured:
        return
    unknown = [d for d in domain if d not in settings.flyte.domains]
    if unknown:
        raise ConfigError(
            f"--domain {unknown[0]!r} is not one of the configured domains "
            f"({', '.join(settings.flyte.domains)}; set [flyte] domains in the config file)"
        )


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="elastic-audit: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    if not verbose:
        for noisy in ("flytekit", "botocore", "urllib3", "grpc"):
            logging.getLogger(noisy).setLevel(logging.ERROR)


def write_atomically(path: str, text: str) -> None:
    """Write `text` to `path` via a temp file in the same directory and a rename: all or nothing."""
    write_atomic(path, text.encode("utf-8"))


def check_writable_file(path: str, flag: str) -> None:
    """Refuse (exit 2) a file path that write_atomically could not write: say so up front."""
    from forensics.errors import UsageError

    if not path.strip():
        raise UsageError(f"{flag}: empty file name")
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"{flag} {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: directory {directory} is not writable")


def emit(text: str) -> None:
    """Data to stdout, nothing else."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


__all__ = ["OutputFormat"]
