"""Summarise py-spy raw samples (collapsed stacks, `bench_scan.py --profile DIR`): where the CPU
of the CLI went, by stage of the scan, by leaf function and by the package the leaf frame is in.

Run:   .venv/bin/python tests/bench/profile_summary.py DIR/1x.txt [--top 20]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# A sample belongs to the first stage whose test its stack passes (frames joined by `;`).
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("S3: outputs.pb HEAD (ObjectStore.check_object)", ("ObjectStore.check_object",)),
    ("S3: outputs.pb listing pages (ObjectStore.list_from)", ("ObjectStore.list_from",)),
    ("S3: checkpoint listings (ObjectStore._pages)", ("ObjectStore._pages",)),
    (
        "Admin: ListNodeExecutions + ListTaskExecutions",
        ("node_executions.<locals>.fetch", "_task_executions.<locals>.fetch"),
    ),
    ("Admin: the other calls", ("AdminTransport._call",)),
    ("start-up imports", ("<module>",)),
    ("hand-offs: a queue's put, an Admin slot's release", ("Queue.put", "Semaphore.release")),
    ("Admin records and the sweep's plan", ("admin_records.py", "AdminReads._collect")),
    ("the scan's own work (forensics.scan, detect)", ("forensics/scan/", "forensics/detect")),
)


def stage_of(stack: str) -> str:
    for name, marks in STAGES:
        if any(m in stack for m in marks):
            return name
    return "the rest (lanes' workers waiting, Loki, main thread)"


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::\d+)?\)$")


def package_of(path: str) -> str:
    """`forensics/scan/run.py` -> `forensics.scan`; site-packages paths -> their top package."""
    p = path.replace("\\\\", "/")
    if "site-packages/" in p:
        return p.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/forensics/" in p or p.startswith("forensics/"):
        tail = p.split("forensics/", 1)[1]
        return "forensics." + tail.split("/")[0].removesuffix(".py")
    if "/lib/python" in p:
        return "stdlib." + p.rsplit("/", 1)[-1].removesuffix(".py")
    return p or "?"


def summarise(path: Path, top: int) -> str:
    leaves: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    ours: Counter[str] = Counter()  # the innermost forensics frame of each sample
    stages: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        stages[stage_of(stack)] += n
        leaf = frames[-1]
        m = _FRAME.match(leaf)
        leaves[leaf] += n
        packages[package_of(m.group("file")) if m else "?"] += n
        own = [f for f in frames if "forensics/" in f]
        ours[own[-1] if own else "(not under a forensics frame)"] += n
    out = [f"{path}: {total} samples"]
    for title, counter in (
        ("by stage", stages),
        ("by package of the leaf frame", packages),
        ("by innermost forensics frame", ours),
        ("by leaf frame", leaves),
    ):
        out.append(f"-- {title}")
        out += [f"{100 * n / max(total, 1):5.1f}%  {k}" for k, n in counter.most_common(top)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("raw", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    for p in args.raw:
        print(summarise(p, args.top))


if __name__ == "__main__":
    main()
