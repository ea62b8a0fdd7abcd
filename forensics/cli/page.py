"""`--report-html`: where the incident page goes (a file, or an S3 object people can open)."""

from __future__ import annotations

from forensics.cli.common import check_writable_file
from forensics.errors import UsageError


def check_page_target(target: str) -> None:
    """Refuse (exit 2) a --report-html target the page could not be written to, before the scan."""
    if target.startswith("s3://"):
        from forensics.sources.s3_uri import UnreadableURI, split_s3_uri

        try:
            split_s3_uri(target, need_key=True)
        except UnreadableURI as e:
            raise UsageError(f"--report-html: {e}") from None
        return
    check_writable_file(target, "--report-html")
