"""Two operators at once: the same `elastic-audit` command started twice in parallel processes
(the exactly-once tests of `relaunch`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor


def at_once(cmd: Sequence[str], env: Mapping[str, str], n: int = 2) -> list[str]:
    """Run `cmd` `n` times at once; each must exit 0. Their JSON outputs' first statuses, sorted."""

    def operator(_: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(cmd), env=dict(env), capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(operator, range(n)))
    assert [r.returncode for r in results] == [0] * n, [r.stderr for r in results]
    return sorted(json.loads(r.stdout)[0]["status"] for r in results)
