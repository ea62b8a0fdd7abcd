"""The sandbox stack: Loki, Flyte Admin and S3 on free loopback ports, and the env that points at them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forensics.sandbox.s3_server import S3Faults, S3Server
from forensics.sandbox.scenario import Scenario

if TYPE_CHECKING:
    from forensics.sandbox.admin_server import AdminFaults, AdminServer
    from forensics.sandbox.loki_server import LokiFaults, LokiServer

# moto accepts any credentials; these let boto3's standard chain find some in the environment
# rather than in ~/.aws.
SANDBOX_ACCESS_KEY_ID = "sandbox-access-key"
SANDBOX_SECRET_ACCESS_KEY = "sandbox-secret-key"

# Settings that would send a client somewhere other than the sandbox (or fail before it gets
# there, like an AWS_PROFILE this machine does not have); apply_env() hides them.
SHADOWING_VARS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_USE_FIPS_ENDPOINT",
    "_FLYTECTL_CONFIG_PYFLYTE_OVERRIDE",
    "FLYTE_CREDENTIALS_AUTH_MODE",
    "FLYTE_CREDENTIALS_CLIENT_ID",
    "FLYTE_CREDENTIALS_CLIENT_SECRET",
    "FLYTE_CREDENTIALS_CLIENT_SECRET_LOCATION",
    "FLYTE_CREDENTIALS_COMMAND",
    "FLYTE_PLATFORM_CA_CERT_FILE_PATH",
    "FLYTE_PLATFORM_HTTP_PROXY_URL",
    "LOKI_ORG_ID",
    "LOKI_BEARER_TOKEN",
    "LOKI_BEARER_TOKEN_FILE",
    "LOKI_USERNAME",
    "LOKI_PASSWORD",
)


def child_environ(env: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default os.environ) with SHADOWING_VARS hidden and `env` (what points clients at
    a sandbox) set: for a subprocess's `env=`."""
    merged = dict(os.environ if base is None else base)
    for name in SHADOWING_VARS:
        merged.pop(name, None)
    merged.update(env)
    return merged


@dataclass
class Faults:
    """Fault injection for each server of the stack (None: that server behaves)."""

    loki: LokiFaults | None = None
    admin: AdminFaults | None = None
    s3: S3Faults | None = None


@dataclass
class Sandbox:
    """The running stack: its three servers and the environment that points clients at them."""

    loki: LokiServer
    admin: AdminServer
    s3: S3Server
    env: dict[str, str] = field(default_factory=dict)

    def child_environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default os.environ) as apply_env() would make it: for a subprocess's `env=`."""
        return child_environ(self.env, base)

    @contextmanager
    def apply_env(self) -> Iterator[dict[str, str]]:
        """Set `env` in os.environ (hiding SHADOWING_VARS) for the block, then restore it."""
        names = (*self.env, *SHADOWING_VARS)
        saved = {name: os.environ.get(name) for name in names}
        try:
            for name in SHADOWING_VARS:
                os.environ.pop(name, None)
            os.environ.update(self.env)
            yield self.env
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def flytectl_config(admin_address: str) -> str:
    """A flytectl/flytekit YAML config for the sandbox Admin (plaintext gRPC)."""
    return f"admin:\n  endpoint: dns:///{admin_address}\n  insecure: true\n"


@contextmanager
def sandbox(
    scenario: Scenario,
    faults: Faults | None = None,
    *,
    loki_options: Mapping[str, Any] | None = None,
) -> Iterator[Sandbox]:
    """Start S3, Admin and Loki on free loopback ports; stop them all on exit, error or Ctrl-C.

    `loki_options` are passed to LokiServer (e.g. `tenant_required`, `bearer_token`).
    """
    # Imported here so this module (and S3-only users) import while those servers are absent.
    from forensics.sandbox.admin_server import AdminServer
    from forensics.sandbox.loki_server import LokiServer

    faults = faults if faults is not None else Faults()
    with ExitStack() as stack:
        config_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="elastic-audit-")))

        s3 = S3Server(scenario, faults.s3)
        s3_url = s3.start()
        stack.callback(s3.stop)

        admin = AdminServer(scenario, faults.admin, blobs=s3)  # Admin reads and writes S3
        admin_address = admin.start()
        stack.callback(admin.stop)

        loki = LokiServer(scenario.log_lines, faults.loki, **dict(loki_options or {}))
        loki_url = loki.start()
        stack.callback(loki.stop)

        env = sandbox_env(loki_url, admin_address, s3_url, config_dir)
        yield Sandbox(loki=loki, admin=admin, s3=s3, env=env)


def sandbox_env(loki_url: str, admin_address: str, s3_url: str, config_dir: Path) -> dict[str, str]:
    """The environment that points every client at the three servers (writes the Flyte config
    into `config_dir`); for stacks assembled by hand, e.g. with S3 in another process."""
    config = config_dir / "config.yaml"
    config.write_text(flytectl_config(admin_address))
    return {
        "LOKI_ADDR": loki_url,
        "FLYTE_PLATFORM_URL": admin_address,
        "FLYTE_PLATFORM_INSECURE": "True",
        "FLYTECTL_CONFIG": str(config),
        "AWS_ENDPOINT_URL_S3": s3_url,
        "AWS_ACCESS_KEY_ID": SANDBOX_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SANDBOX_SECRET_ACCESS_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
