"""pytest plugin for the plugin-suite runs: records which kfpytorch `task.py` the suite imported.

Loaded with `-p fix_import_recorder` into the upstream suite's own pytest process, it writes
the module's file and sha256 to $ELASTIC_AUDIT_IMPORT_RECORD when the session ends, so the
tests can prove the patched (or stock) plugin is the one that ran, not whichever was installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def pytest_sessionfinish(session: object, exitstatus: int) -> None:
    module = sys.modules.get("flytekitplugins.kfpytorch.task")
    file = getattr(module, "__file__", None)
    record = {
        "file": file,
        "sha256": hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else None,
    }
    Path(os.environ["ELASTIC_AUDIT_IMPORT_RECORD"]).write_text(json.dumps(record))
