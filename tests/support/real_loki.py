"""A real Grafana Loki (single binary) for the tests that run against one: started from the
binary `ELASTIC_AUDIT_LOKI_BIN` names, with a config in a scratch folder (its working directory:
chunks land there), fed through its push API, stopped when the test ends.

The config is the smallest that serves old data to a reader (grafana/loki
`pkg/validation/limits.go` reject_old_samples; `pkg/ingester/ingester.go`
query_store_max_look_back_period: `-1ns` makes the querier ask the ingester about every time,
not only the last ~2.5 h), with the limits a test asks for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from forensics.sandbox.scenario import SandboxLogLine
from support.processes import free_port, stop

ENV = "ELASTIC_AUDIT_LOKI_BIN"

CONFIG = """
auth_enabled: {auth}
server:
  http_listen_address: 127.0.0.1
  http_listen_port: {http}
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: {grpc}
  log_level: warn
common:
  path_prefix: {dir}
  instance_addr: 127.0.0.1
  replication_factor: 1
  ring:
    kvstore:
      store: inmemory
  storage:
    filesystem:
      chunks_directory: {dir}/chunks
      rules_directory: {dir}/rules
schema_config:
  configs:
    - from: 2020-01-01
      store: tsdb
      object_store: filesystem
      schema: v13
      index:
        prefix: index_
        period: 24h
ingester:
  query_store_max_look_back_period: -1ns
analytics:
  reporting_enabled: false
limits_config:
  reject_old_samples: false
  allow_structured_metadata: true
{limits}
{extra}
"""


def binary() -> str:
    """The Loki binary to run, or skip saying why there is none."""
    path = os.environ.get(ENV)
    if not path:
        pytest.skip(f"no real Loki: set {ENV} to a grafana/loki binary to run this test")
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{ENV}={path} is not an executable file")
    return path


@contextmanager
def real_loki(
    scratch: Path,
    *,
    limits: Mapping[str, Any] | None = None,
    auth: bool = False,
    extra: str = "",
) -> Iterator[str]:
    """A real Loki listening on loopback; yields its base URL. `extra`: more top-level YAML
    (another block's settings, such as the query scheduler's queue)."""
    exe = binary()
    scratch.mkdir(parents=True, exist_ok=True)
    http, grpc = free_port(), free_port()
    lines = "\n".join(f"  {k}: {json.dumps(v)}" for k, v in (limits or {}).items())
    cfg = scratch / "loki.yaml"
    cfg.write_text(
        CONFIG.format(
            auth="true" if auth else "false",
            http=http,
            grpc=grpc,
            dir=scratch,
            limits=lines,
            extra=extra,
        )
    )
    log = (scratch / "loki.log").open("wb")
    proc = subprocess.Popen(
        [exe, f"-config.file={cfg}"], cwd=scratch, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{http}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"Loki exited: {(scratch / 'loki.log').read_text()[-2000:]}")
            try:
                if requests.get(url + "/ready", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("Loki did not become ready within 90 s")
            time.sleep(0.5)
        yield url
    finally:
        stop(proc)
        log.close()
        shutil.rmtree(scratch / "chunks", ignore_errors=True)


def push(
    url: str,
    lines: Iterable[SandboxLogLine],
    *,
    tenant: str | None = None,
    metadata: Iterable[str] = (),
) -> int:
    """Push `lines` through Loki's JSON push API; labels named in `metadata` are sent as each
    entry's structured metadata instead of stream labels (as OTLP ingestion keeps them)."""
    meta = set(metadata)
    streams: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
    n = 0
    for e in lines:
        labels = tuple(sorted((k, v) for k, v in e.labels.items() if k not in meta))
        value: list[Any] = [str(e.ts_ns), e.line]
        sm = {k: v for k, v in e.labels.items() if k in meta}
        if sm:
            value.append(sm)
        streams.setdefault(labels, []).append(value)
        n += 1
    headers = {"X-Scope-OrgID": tenant} if tenant else {}
    body = {
        "streams": [
            {"stream": dict(k), "values": sorted(v, key=lambda x: int(x[0]))}
            for k, v in streams.items()
        ]
    }
    r = requests.post(url + "/loki/api/v1/push", json=body, headers=headers, timeout=60)
    if r.status_code >= 300:
        raise RuntimeError(f"Loki refused the push: HTTP {r.status_code} {r.text[:500]}")
    return n
