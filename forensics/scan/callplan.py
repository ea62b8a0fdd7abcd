"""How a scan asks S3 about one execution's outputs.pb: a HEAD per attempt, or one listing.

Which Admin calls the sweep makes is `AdminClient.sweep_attempts` (the compiled closures,
`sources/admin_closures.py`); docs/performance.md says what is called per execution, per node and
per candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from forensics.model import AttemptRecord
from forensics.sources.storage import shared_prefix


class _Checked(Protocol):
    att: AttemptRecord


# An execution's outputs.pb checks are one listing of the directory above them instead of a HEAD
# each when the listing costs less: fewer requests (1,000 keys a page) and less CPU. botocore
# parses a ListObjectsV2 page's XML key by key, so a listing costs the client about
# LIST_BASE_MS + LIST_KEY_MS per key against HEAD_MS per HEAD (measured against the sandbox S3,
# docs/performance.md); an attempt leaves about OBJECTS_PER_ATTEMPT objects (inputs.pb,
# outputs.pb or error.pb, deck, futures).
OBJECTS_PER_ATTEMPT = 4
LIST_PAGE = 1000
HEAD_MS = 0.9
LIST_BASE_MS = 0.8
LIST_KEY_MS = 0.08


def by_prefix(checks: Sequence[_Checked], attempts: int) -> str | None:
    """The prefix to list for `checks` (one execution's, of its `attempts` attempts and passed-
    over nodes), or None: HEAD each."""
    if len(checks) < 2 or any(c.att.outputs_unknown or not c.att.output_dir for c in checks):
        return None
    keys = OBJECTS_PER_ATTEMPT * max(attempts, len(checks))
    pages = keys // LIST_PAGE + 1
    if pages >= len(checks) or LIST_BASE_MS + LIST_KEY_MS * keys >= HEAD_MS * len(checks):
        return None
    return shared_prefix([c.att.output_dir or "" for c in checks])
