"""Writing the incident page where `--report-html` says: a local file (atomically) or an S3
object, uploaded as `text/html` so a browser opens it (docs/deployment.md, serving the page)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forensics.formats import OutputFormat, render
from forensics.fsutil import write_atomic
from forensics.page import IncidentPage, gather_page

if TYPE_CHECKING:
    from forensics.model import Report
    from forensics.sources import Sources


def publish_page(
    sources: Sources, report: Report, target: str | None
) -> tuple[IncidentPage, str | None]:
    """Gather and render the page of `report`, and write it to `target` (None: nowhere).
    The page and, for an s3:// target, the object's HTTPS address (SourceError if S3 refuses)."""
    page = gather_page(sources, report)
    if target is None:
        return page, None
    text = render(page, OutputFormat.html).encode("utf-8")
    if target.startswith("s3://"):
        return page, sources.store.put_page(target, text, "text/html; charset=utf-8")
    write_atomic(target, text)
    return page, None
