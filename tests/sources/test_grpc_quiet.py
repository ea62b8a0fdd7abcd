"""A quiet, polite gRPC client (issue 43 item 13): the Admin channel pings no sooner than
grpc-go's default enforcement policy allows (forensics/sources/admin_channel.py), and gRPC's own
C-core log lines reach stderr only at -vv (forensics/cli/verbosity.py `grpc_logging`), unless the
user set GRPC_VERBOSITY or GRPC_TRACE."""

from __future__ import annotations

import re

import grpc
import pytest
from support.cli import run, run_process
from support.scan import NO_RETRY, WINDOW, point_at

INCIDENT = "gs1:production:azvg5f9v9974m78fvlf7"
# grpc-go's default EnforcementPolicy.MinTime (keepalive/keepalive.go, v1.80.0): 5 minutes.
GRPC_GO_MIN_TIME_MS = 5 * 60 * 1000
KEEPALIVE_KEYS = (
    "grpc.keepalive_time_ms",
    "grpc.keepalive_permit_without_calls",
    "grpc.http2.max_pings_without_data",
)

# abseil's log prefix, as gRPC's C-core writes it: `I1206 04:36:45.919908   18556 file.cc:2563] …`
RAW_GRPC_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\] ", re.M)


@pytest.mark.integration
def test_the_admin_channel_pings_as_a_default_grpc_go_server_allows(
    box, tmp_path, monkeypatch, capsys
):
    # The public seam: grpc.insecure_channel, which flytekit's get_channel calls with the
    # channel's options. gRPC keeps the first of two values of a key (grpcio 1.85.3, measured:
    # docs/upstream.md), so flytekit's client, which lists its own 30 s keepalive before a
    # caller's options, cannot be given another: each key must be set once, to ours.
    seen: list[list[tuple[str, object]]] = []
    real = grpc.insecure_channel

    def recording(target, options=None, *args, **kwargs):
        seen.append(list(options or ()))
        return real(target, options, *args, **kwargs)

    monkeypatch.setattr(grpc, "insecure_channel", recording)
    point_at(box, tmp_path, monkeypatch)
    code, _, err = run(["show", INCIDENT, "-o", "json"], capsys)
    assert code == 0, err
    assert seen, "no Admin channel was opened"
    for options in seen:
        values = {key: [v for k, v in options if k == key] for key in KEEPALIVE_KEYS}
        assert all(len(v) == 1 for v in values.values()), values
        assert values["grpc.keepalive_time_ms"][0] > GRPC_GO_MIN_TIME_MS
        assert values["grpc.keepalive_permit_without_calls"] == [0]
        assert values["grpc.http2.max_pings_without_data"][0] != 0  # 0: unlimited


def _scan_over_tls_to_a_plaintext_admin(box, tmp_path, *flags: str, **env: str) -> str:
    """A scan whose Admin channel fails its TLS handshake: gRPC's C-core logs the failure."""
    (tmp_path / "elastic-audit.toml").write_text(NO_RETRY)
    environ = box.child_environ()
    for name in ("GRPC_VERBOSITY", "GRPC_TRACE"):
        environ.pop(name, None)
    environ.update(FLYTE_PLATFORM_INSECURE="False", **env)
    proc = run_process("scan", *WINDOW, *flags, "-o", "json", env=environ, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # Admin failed: a gap, never an all-clear
    return proc.stderr


@pytest.mark.e2e
def test_grpc_core_log_lines_stay_off_stderr_unless_vv_or_the_user_asks(box, tmp_path):
    quiet = _scan_over_tls_to_a_plaintext_admin(box, tmp_path, "-v")
    assert not RAW_GRPC_LINE.search(quiet), quiet
    assert "Flyte Admin" in quiet  # the tool's own line says what failed
    loud = _scan_over_tls_to_a_plaintext_admin(box, tmp_path, "-vv")
    assert RAW_GRPC_LINE.search(loud)  # -vv asks for them: the handshake failure is there
    users = _scan_over_tls_to_a_plaintext_admin(box, tmp_path, "-v", GRPC_VERBOSITY="INFO")
    assert RAW_GRPC_LINE.search(users)  # a GRPC_VERBOSITY the user set is theirs
