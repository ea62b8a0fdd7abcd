"""A quiet gRPC client (issue 43 item 13): gRPC's own C-core log lines reach stderr only at -vv
(forensics/cli/process.py `grpc_logging`), unless the user set GRPC_VERBOSITY or GRPC_TRACE."""

from __future__ import annotations

import re

from support.cli import run_process
from support.scan import NO_RETRY, WINDOW

# abseil's log prefix, as gRPC's C-core writes it: `I1206 04:36:45.919908   18556 file.cc:2563] …`
RAW_GRPC_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\] ", re.M)


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


def test_grpc_core_log_lines_stay_off_stderr_unless_vv_or_the_user_asks(box, tmp_path):
    quiet = _scan_over_tls_to_a_plaintext_admin(box, tmp_path, "-v")
    assert not RAW_GRPC_LINE.search(quiet), quiet
    assert "Flyte Admin" in quiet  # the tool's own line says what failed
    loud = _scan_over_tls_to_a_plaintext_admin(box, tmp_path, "-vv")
    assert RAW_GRPC_LINE.search(loud)  # -vv asks for them: the handshake failure is there
    users = _scan_over_tls_to_a_plaintext_admin(box, tmp_path, "-v", GRPC_VERBOSITY="INFO")
    assert RAW_GRPC_LINE.search(users)  # a GRPC_VERBOSITY the user set is theirs
