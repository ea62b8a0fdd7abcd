"""How log shippers put a container's line into Loki: the line each one pushes, and its labels.

Each function takes what the container wrote (one line, without the runtime's wrapping) and
returns the Loki line the shipper pushes, built the way the shipper's own code builds it:
- `fluent_bit`: Fluent Bit's `loki` output with `line_format json`: the whole record (`time`,
  `stream`, `_p`, `log`, a `kubernetes` map) as JSON, its key order varied from line to line as
  a pipeline's filters vary it.
- `otel`: the OpenTelemetry collector's Loki exporter (`json` format): `body`, `attributes`,
  `resources`; its labels are the promoted resource attributes (`k8s_namespace_name`, ...).
- `vector`: Vector's `loki` sink with the `json` codec: the whole `kubernetes_logs` event.
- `alloy`: Grafana Alloy (or promtail) without a `stage.cri`: the raw CRI line; `alloy_syslog`:
  Alloy's `loki.source.syslog` keeping the whole RFC 5424 message.
Where each shape was read: docs/upstream.md, "Log shippers" under "The sandbox servers".
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from datetime import datetime

SHIPPERS = ("fluent-bit", "otel", "vector", "alloy", "alloy-syslog")


def _rfc3339_ns(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%S.%f}000Z"


def _uid(pod: str) -> str:
    h = f"{zlib.crc32(pod.encode()):08x}"
    return f"{h}-{h[:4]}-4{h[1:4]}-8{h[2:5]}-{h}{h[:4]}"


def fluent_bit(at: datetime, msg: str, *, stream: str, ns: str, pod: str, container: str) -> str:
    """Fluent Bit `loki` output, `line_format json`, after tail + cri parser + kubernetes filter."""
    record: dict[str, object] = {
        "time": _rfc3339_ns(at),
        "stream": stream,
        "_p": "F",
        "log": msg,
        "kubernetes": {
            "pod_name": pod,
            "namespace_name": ns,
            "pod_id": _uid(pod),
            "host": "ip-10-0-12-34.ec2.internal",
            "container_name": container,
            "docker_id": f"{zlib.crc32(container.encode()):08x}" * 8,
            "container_image": "ghcr.io/exa-labs/train:2026.09.1",
        },
    }
    # Key order is not guaranteed: rotate it by the line, so no reader can rely on one.
    keys = list(record)
    turn = zlib.crc32(msg.encode()) % len(keys)
    return json.dumps({k: record[k] for k in keys[turn:] + keys[:turn]}, separators=(",", ":"))


def _go_json(value: object) -> str:
    # encoding/json: compact, sorted map keys, HTML-safe escapes, U+2028/2029 escaped.
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    for ch, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text


def otel(at: datetime, msg: str, *, stream: str, ns: str, pod: str, container: str) -> str:
    """OpenTelemetry collector Loki exporter, json format, after the filelog receiver's
    `container` parser and the k8sattributes processor."""
    attributes = {
        "log.file.path": f"/var/log/pods/{ns}_{pod}_{_uid(pod)}/{container}/0.log",
        "log.iostream": stream,
        "logtag": "F",
    }
    resources = {
        "k8s.container.name": container,
        "k8s.container.restart_count": "0",
        "k8s.namespace.name": ns,
        "k8s.pod.name": pod,
        "k8s.pod.uid": _uid(pod),
    }
    entry = {
        "body": msg,
        "attributes": dict(sorted(attributes.items())),
        "resources": dict(sorted(resources.items())),
    }
    return _go_json(entry)


def vector(at: datetime, msg: str, *, stream: str, ns: str, pod: str, container: str) -> str:
    """Vector `loki` sink, `encoding.codec = "json"`, fed by the `kubernetes_logs` source."""
    event = {
        "file": f"/var/log/pods/{ns}_{pod}_{_uid(pod)}/{container}/0.log",
        "kubernetes": {
            "container_id": f"containerd://{zlib.crc32(container.encode()):08x}",
            "container_image": "ghcr.io/exa-labs/train:2026.09.1",
            "container_name": container,
            "pod_ip": "10.0.12.34",
            "pod_labels": {"domain": ns.rsplit("-", 1)[-1], "execution-id": pod.split("-")[0]},
            "pod_name": pod,
            "pod_namespace": ns,
            "pod_node_name": "ip-10-0-12-34.ec2.internal",
            "pod_uid": _uid(pod),
        },
        "message": msg,
        "source_type": "kubernetes_logs",
        "stream": stream,
        "timestamp": _rfc3339_ns(at),
    }
    return json.dumps(event, separators=(",", ":"), sort_keys=True)


def alloy(at: datetime, msg: str, *, stream: str, ns: str, pod: str, container: str) -> str:
    """Alloy/promtail tailing the pod's log file with no `stage.cri`: the raw CRI line."""
    return f"{_rfc3339_ns(at)} {stream} F {msg}"


def alloy_syslog(at: datetime, msg: str, *, stream: str, ns: str, pod: str, container: str) -> str:
    """Alloy `loki.source.syslog`, `use_rfc5424_message = true`: the whole RFC 5424 message."""
    pri = 12 if stream == "stderr" else 14  # user.warning / user.info
    return (
        f"<{pri}>1 {at:%Y-%m-%dT%H:%M:%S.%f}Z ip-10-0-12-34 {container[:48]} - - "
        f'[k8s@32473 namespace="{ns}" pod="{pod}"] {msg}'
    )


ENCODERS: dict[str, Callable[..., str]] = {
    "fluent-bit": fluent_bit,
    "otel": otel,
    "vector": vector,
    "alloy": alloy,
    "alloy-syslog": alloy_syslog,
}


def ship(
    shipper: str, at: datetime, msg: str, *, stream: str, ns: str, pod: str, container: str
) -> str:
    """The Loki line `shipper` pushes for one container line `msg`."""
    return ENCODERS[shipper](at, msg, stream=stream, ns=ns, pod=pod, container=container)
