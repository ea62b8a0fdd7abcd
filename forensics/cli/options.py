"""Options several commands share, declared once, and the `-o/--output` option.

Each is a typer.Option a command names as a parameter's default, as typer documents (`workers:
int | None = WorkersOpt`). The source options (scan, show, relaunch, watch, config), the scope
options and the guard options (scan, watch) come in groups: the command declares each option of
the group and builds one object from them (`SourceFlags`, `ScopeFlags`, `GuardFlags`) that does
what the group is for. Every option names its value (`metavar=`); flags take none.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import typer

from forensics.cli.common import check_domains, check_scope_names, check_writable_file
from forensics.config import Settings, load_settings
from forensics.errors import UsageError
from forensics.formats import OutputFormat
from forensics.guard.run import GuardOptions

if TYPE_CHECKING:
    from forensics.scan.scope import ScanScope

# -- -o/--output --------------------------------------------------------------------------------

_DEFAULT_HELP = {
    OutputFormat.table: "table (default on a terminal; a block per finding when the terminal is too narrow for the table)",
    OutputFormat.wide: "wide (the table whatever the width)",
    OutputFormat.json: "json (default when piped)",
}


def output_option(*formats: OutputFormat, help: str | None = None) -> Any:
    """The `-o/--output FORMAT` option offering exactly `formats` (parsing rejects the rest)."""
    names = [f.value for f in formats]
    described = [_DEFAULT_HELP.get(f, f.value) for f in formats]

    def parse(value: str) -> str:
        if value.lower() not in names:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(names)}")
        return value.lower()

    return typer.Option(
        None,
        "-o",
        "--output",
        parser=parse,
        metavar="|".join(names),
        help=help or "Output: " + ", ".join(described) + ".",
        show_default=False,
    )


def default_output(requested: OutputFormat | str | None) -> OutputFormat:
    """`table` on a terminal, `json` when stdout is piped (scripts and jq want data)."""
    if requested is not None:
        return OutputFormat(str(getattr(requested, "value", requested)).lower())
    return OutputFormat.table if sys.stdout.isatty() else OutputFormat.json


def check_output(fmt: OutputFormat, allowed: tuple[OutputFormat, ...]) -> OutputFormat:
    """`fmt` if the command offers it; a usage error (exit 2) naming the choices otherwise."""
    if fmt not in allowed:
        names = ", ".join(a.value for a in allowed)
        raise UsageError(f"-o {fmt.value} is not available here (choose from: {names})")
    return fmt


# -- one option style ----------------------------------------------------------------------------


def value_option(flag: str, metavar: str, help: str, *short: str, **kwargs: Any) -> Any:
    """An option that takes a value named `metavar`; unset (None) unless given, no default shown.
    `short`: its one-letter spellings (`-p`)."""
    return typer.Option(
        None, flag, *short, metavar=metavar, help=help, show_default=False, **kwargs
    )


def flag_option(*names: str, help: str) -> Any:
    """A plain on/off flag: no value, off unless given."""
    return typer.Option(False, *names, help=help)


# -- single options shared by several commands -----------------------------------------------

WorkersOpt = value_option(
    "--workers",
    "N",
    "Concurrent requests per source (default 8; where Flyte Admin is far, about one per "
    "millisecond of its round trip scans faster: docs/performance.md).",
    min=1,
    max=256,
)
NoProgressOpt = flag_option(
    "--no-progress", help="No progress bar (there is none anyway when stderr is not a terminal)."
)
VerboseOpt = typer.Option(
    0,
    "-v",
    "--verbose",
    count=True,
    show_default=False,
    help="-v: the tool's decisions on stderr (window, shards, candidates, calls per source, "
    "time per step); "
    "-vv: also the libraries' debug logs. Secrets are never logged.",
)


# -- option groups ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFlags:
    """Where the sources are and how checkpoints are found: `--config`, `--loki-url`, ..."""

    loki_url: str | None
    flyte_config: str | None
    config: str | None
    checkpoint_input: str | None
    checkpoint_template: str | None

    def settings(self, workers: int | None = None) -> Settings:
        """The settings these flags select (flag > environment > config file > default); the
        credentials a config file's URLs carried are masked in every log record from now on.

        Then flytekit, which every command taking these flags goes on to import, is imported
        with Ctrl-C held until its SIGINT handler is replaced by ours (process.load_flytekit):
        a Ctrl-C during that import exits 130, not flytekit's silent exit(1)."""
        from forensics.cli.process import load_flytekit
        from forensics.cli.verbosity import add_basic_auth

        settings = load_settings(**asdict(self), workers=workers)
        for part in (settings.loki, settings.k8s_events, settings.prometheus):
            if part.password:
                add_basic_auth(part.username, part.password.value)
        load_flytekit()
        return settings


# SourceFlags' options, in the order a command declares them.
LokiUrlOpt = value_option(
    "--loki-url",
    "URL",
    "Loki base URL (else LOKI_ADDR, config [loki] url, http://localhost:3100).",
)
FlyteConfigOpt = value_option(
    "--flyte-config",
    "FILE",
    "flytectl/flytekit YAML (else FLYTECTL_CONFIG, ~/.flyte/config.yaml; FLYTE_PLATFORM_URL overrides).",
)
ConfigOpt = value_option(
    "--config",
    "FILE",
    "Config file (else $ELASTIC_AUDIT_CONFIG, ./elastic-audit.toml, "
    "$XDG_CONFIG_HOME/elastic-audit/config.toml).",
)
CheckpointInputOpt = value_option(
    "--checkpoint-input", "NAME", "Execution input holding the checkpoint URI."
)
CheckpointTemplateOpt = value_option(
    "--checkpoint-template",
    "TEMPLATE",
    "Checkpoint URI template; fields: project, domain, name, node_id, inputs.X, labels.X.",
)


@dataclass(frozen=True)
class ScopeFlags:
    """Which projects and domains a scan reads (`--project`, `--domain`; all when none)."""

    project: list[str]
    domain: list[str]

    def check_names(self) -> None:
        """Refuse (exit 2) a name Flyte could not have, before any config loads."""
        check_scope_names(self.project, self.domain)

    def scope(self, settings: Settings) -> ScanScope:
        """The scan's scope, refusing (exit 2) a --domain the configuration does not list."""
        check_domains(self.domain, settings)
        from forensics.scan.scope import (
            ScanScope,
        )  # flytekit is heavy: not for `--help` or bad input

        return ScanScope(tuple(self.project), tuple(self.domain))


# ScopeFlags' options; -p/-d as flytectl spells them.
ProjectOpt = typer.Option(
    [], "--project", "-p", metavar="PROJECT", help="Only this project (repeatable)."
)
DomainOpt = typer.Option(
    [], "--domain", "-d", metavar="DOMAIN", help="Only this domain (repeatable)."
)


@dataclass(frozen=True)
class GuardFlags:
    """The guard flags as given: `--state`, `--overlap`, `--notify`, `--metrics-file`, ..."""

    state: str | None
    overlap: str
    reset_state: bool
    notify: list[str]
    notify_format: str
    metrics_file: str | None
    pushgateway: str | None

    def options(self) -> GuardOptions:
        """The checked GuardOptions (exit 2 before any scan; secrets never echoed)."""
        from forensics.cli.guard import guard_options

        checked = guard_options(**asdict(self))
        if self.metrics_file is not None:
            check_writable_file(self.metrics_file, "--metrics-file")
        return checked


# GuardFlags' options, in the order a command declares them.
StateOpt = value_option(
    "--state",
    "FILE|s3://BUCKET/KEY",
    "Guard mode: remember scanned windows, open gaps and notified findings here; without --since the window continues from it.",
)
OverlapOpt = typer.Option(
    "2h",
    "--overlap",
    metavar="DURATION",
    help="Rescan this much before the state's last window end (late logs, attempts finishing after their signal).",
)
ResetStateOpt = flag_option(
    "--reset-state", help="Start the state over (needs --since), on purpose."
)
NotifyOpt = typer.Option(
    [],
    "--notify",
    metavar="URL",
    envvar="ELASTIC_AUDIT_NOTIFY",
    help="POST new findings, pending attempts and gaps here once per run (repeatable; else ELASTIC_AUDIT_NOTIFY, URLs separated by spaces, so the secret stays off the command line; only scheme and host are ever printed).",
    show_default=False,
)
NotifyFormatOpt = typer.Option(
    "json", "--notify-format", metavar="json|slack", help="Webhook payload: json or slack."
)
MetricsFileOpt = value_option(
    "--metrics-file",
    "PATH",
    "Write Prometheus metrics here atomically (node-exporter textfile collector).",
)
PushgatewayOpt = value_option(
    "--pushgateway",
    "URL",
    "Push the same metrics to this Prometheus Pushgateway (job elastic-audit).",
)
