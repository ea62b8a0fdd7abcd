"""How a scan asks S3 whether outputs.pb exist: listing pages that answer many attempts at once
where a bucket's keys are dense enough, a HEAD each where they are not.

Which Admin calls the sweep makes is `AdminClient.sweep_attempts` (the compiled closures,
`sources/admin_closures.py`); docs/performance.md says what is called per execution, per node and
per candidate.

S3 lists a bucket's keys in order (UTF-8 binary, the order of Python's `str`), up to 1,000 to
a page (the walk asks for `LIST_PAGE`), from any key on (`StartAfter`), and a page answers for
every key in the range it covers: a key in it that the page does not hold does not exist
(`KeyPage`). So the outputs.pb keys of a batch of attempts, sorted, are answered by walking the
bucket: a page from just before the first key not yet answered, every key up to the page's last
answered by it, then a jump to the next key not yet answered. Flyte's metadata prefix holds a
handful of objects per attempt (inputs.pb, outputs.pb or error.pb, futures, deck), so when the
batch's attempts are most of what the bucket holds under their prefix, a page answers dozens of
them for the CPU of a few HEADs. When the bucket holds much else between them (a year of history
under a 7-day scan), a page answers few, and the rest of the run is a HEAD each.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TypeVar

from forensics.model import KeyPage, ObjectCheck
from forensics.sources.s3_uri import OUTPUTS_FILE, UnreadableURI, split_s3_uri

T = TypeVar("T")

# Keys a walk's ListObjectsV2 page asks for (S3 answers up to 1,000): botocore holds a page's
# parse trees while it reads it, and a smaller page's die young rather than being counted as
# long-lived by the garbage collector (docs/performance.md, "Smaller listing pages").
LIST_PAGE = 250
# The client's CPU, measured against the sandbox S3 (tests/bench/bench_calls.py): a HEAD about
# HEAD_MS, a listing page about LIST_KEY_MS per key it holds (botocore parses each <Contents>).
HEAD_MS = 1.0
LIST_KEY_MS = 0.03
# A page holding more keys than this per outputs.pb it answers costs more than a HEAD each.
GAP_MAX = math.floor(HEAD_MS / LIST_KEY_MS)
# Fewer outputs.pb than this in one bucket: a HEAD each (one key is one request either way, and
# a HEAD needs no s3:ListBucket).
MIN_LISTED = 2
# A run is never split shorter than this: its last page would hold mostly the next run's keys
# (each attempt is about two keys, its outputs.pb and its node's inputs.pb).
MIN_RUN = LIST_PAGE // 2

ListFrom = Callable[[str, str, str, int], KeyPage | ObjectCheck]


# One attempt's outputs.pb (and its node's inputs.pb, when in the same bucket) as keys: its
# index among the items planned, the bucket, the outputs.pb key, the inputs.pb key. A plain tuple
# of strings and an index, which the collector stops tracking at its first young pass: a batch's
# plan (20,000 at 1x) never counts towards a full one (docs/performance.md).
Listed = tuple[int, str, str, str | None]


@dataclass(frozen=True, slots=True)
class Walked:
    """What a walk learned of one attempt (`index` as planned): `outputs` None means no page
    answered it (HEAD it); `witness` is its node's inputs.pb when a page covered that key too."""

    index: int
    outputs: ObjectCheck | None
    witness: ObjectCheck | None


def plan(
    items: Sequence[T],
    output_dir: Callable[[T], str],
    inputs_uri: Callable[[T], str | None],
    runs: int,
) -> tuple[list[int], list[list[Listed]]]:
    """Split `items` (by index) into those to HEAD one by one and at most `runs` (about; at
    least one per bucket, none shorter than `MIN_RUN` unless its bucket has fewer) contiguous
    runs of sorted keys, one bucket each, to walk."""
    direct: list[int] = []
    listed: list[Listed] = []
    for index, item in enumerate(items):
        out = output_dir(item)
        try:
            bucket, key = split_s3_uri(out if out.endswith("/") else out + "/", need_key=True)
        except UnreadableURI:
            direct.append(index)  # the HEAD says why it cannot be read
            continue
        listed.append((index, bucket, key + OUTPUTS_FILE, _key_in(bucket, inputs_uri(item))))
    listed.sort(key=lambda x: (x[1], x[2]))  # by bucket, then key
    count = max(1, min(runs, len(listed) // MIN_RUN))
    size = max(MIN_LISTED, math.ceil(len(listed) / count))
    out_runs: list[list[Listed]] = []
    for _, group in groupby(listed, key=lambda x: x[1]):  # by bucket
        keys = list(group)
        if len(keys) < MIN_LISTED:
            direct.extend(index for index, _, _, _ in keys)
            continue
        out_runs += [keys[i : i + size] for i in range(0, len(keys), size)]
    return direct, out_runs


def _key_in(bucket: str, uri: str | None) -> str | None:
    """`uri`'s key when it is an object of `bucket`, else None."""
    if uri is None:
        return None
    try:
        b, key = split_s3_uri(uri, need_key=True)
    except UnreadableURI:
        return None
    return key if b == bucket else None


def walk(run: Sequence[Listed], list_from: ListFrom) -> Iterator[Walked]:
    """Answer a run (sorted keys of one bucket) page by page; what no page answers is yielded
    with `outputs` None: after a failed listing (the HEADs say what each object's state is), or
    once a page showed the keys too sparse for listing to pay."""
    if not run:
        return
    bucket = run[0][1]
    # Under the witnesses' prefix too: a map's subtasks' outputs lie in a folder below the
    # node's inputs.pb.
    keys = [key for _, _, key, _ in run] + [inputs for _, _, _, inputs in run if inputs]
    prefix = os.path.commonprefix(keys)  # noqa: RUF071 (keys, not paths)
    i, after = 0, ""
    while i < len(run):
        page = list_from(bucket, prefix, max(after, run[i][2][:-1]), LIST_PAGE)
        if isinstance(page, ObjectCheck):
            break
        first = i
        while i < len(run) and page.covers(run[i][2]):
            index, _, key, inputs = run[i]
            witness = page.check(inputs) if inputs and page.covers(inputs) else None
            yield Walked(index, page.check(key), witness)
            i += 1
        if page.last is None or i == first or len(page.keys) > GAP_MAX * (i - first):
            break
        after = page.last
    for index, _, _, _ in run[i:]:
        yield Walked(index, None, None)
