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


# An execution's outputs.pb checks are one listing of its metadata prefix instead of a HEAD each
# when that listing takes fewer pages than the HEADs it replaces: an attempt leaves about this
# many objects (inputs.pb, outputs.pb or error.pb, deck, futures), ListObjectsV2 returns 1,000
# per page (docs/performance.md).
OBJECTS_PER_ATTEMPT = 4
LIST_PAGE = 1000


def by_prefix(checks: Sequence[_Checked], attempts: int) -> str | None:
    """The prefix to list for `checks` (one execution's), or None: HEAD each."""
    if len(checks) < 2 or any(c.att.outputs_unknown or not c.att.output_dir for c in checks):
        return None
    pages = OBJECTS_PER_ATTEMPT * max(attempts, len(checks)) // LIST_PAGE + 1
    if pages >= len(checks):
        return None
    return shared_prefix([c.att.output_dir or "" for c in checks])
