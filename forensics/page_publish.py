"""Writing the incident page where `--report-html` says: a local file (atomically) or an S3
object, uploaded as `text/html` so a browser opens it (docs/deployment.md, serving the page)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forensics.errors import OutputError
from forensics.formats import OutputFormat, render
from forensics.fsutil import write_atomic
from forensics.page import IncidentPage, gather_page

if TYPE_CHECKING:
    from forensics.model import Report
    from forensics.sources import Sources


class PageNotWritten(OutputError):
    """The page was gathered (`page`) but its file could not be written."""

    def __init__(self, path: str, reason: str, page: IncidentPage) -> None:
        super().__init__(path, reason)
        self.page = page


def publish_page(
    sources: Sources, report: Report, target: str | None
) -> tuple[IncidentPage, str | None]:
    """Gather and render the page of `report`, and write it to `target` (None: nowhere).
    The page and, for an s3:// target, the object's HTTPS address (SourceError if S3 refuses;
    PageNotWritten, holding the page, if the local file cannot be written)."""
    page = gather_page(sources, report)
    if target is None:
        return page, None
    text = render(page, OutputFormat.html).encode("utf-8")
    if target.startswith("s3://"):
        return page, sources.store.put_page(target, text, "text/html; charset=utf-8")
    try:
        write_atomic(target, text)
    except OSError as e:
        raise PageNotWritten(target, e.strerror or type(e).__name__, page) from None
    return page, None
