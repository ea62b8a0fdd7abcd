"""The gaps a source's plain failure records make: a Loki shard's failed parts, an events read's
unread parts and missing labels, a blind events selector. Sources return what failed; only the
scan (and `show`'s timeline, which reads as the scan does) turns it into report gaps."""

from __future__ import annotations

from forensics.failures import FailureKind
from forensics.model import FailedPart, Gap, ShardRead, Window
from forensics.sources.k8s_events import K8S_MONITORING_SELECTOR, EventsRead
from forensics.sources.loki_answers import SOURCE as LOKI


def failed_gaps(source: str, parts: list[FailedPart] | tuple[FailedPart, ...]) -> list[Gap]:
    """One gap of `source` per failed part, with its failure's meaning."""
    return [Gap(source, p.start, p.end, p.error, failure=p.failure) for p in parts]


def shard_gaps(read: ShardRead, source: str = LOKI) -> list[Gap]:
    """The gaps one Loki shard leaves (none when it was read)."""
    return failed_gaps(source, read.failed)


def label_gaps(source: str, window: Window, texts: list[str]) -> list[Gap]:
    """A gap over `window` per configured label some matched streams lack (`LabelCensus`)."""
    return [
        Gap(source, window.start, window.end, text, failure=FailureKind.LABEL_MISSING)
        for text in texts
    ]


def events_gaps(read: EventsRead) -> list[Gap]:
    """The gaps of one disruption source's read: its unread parts, then its missing labels."""
    gaps = failed_gaps(read.source, read.failed)
    if read.label_missing and read.window is not None:
        gaps += label_gaps(read.source, read.window, read.label_missing)
    return gaps


def blind_gap(read: EventsRead, window: Window) -> Gap:
    """The gap of an events selector that matches no stream where Flyte Admin shows attempts
    ran: like `logs_absent` for task logs, the source is blind there, not quiet."""
    hint = ""
    if "integrations/kubernetes/eventhandler" not in read.selector:
        hint = (
            "; Grafana's k8s-monitoring chart labels events "
            f"{K8S_MONITORING_SELECTOR}: set [k8s_events] selector = '{K8S_MONITORING_SELECTOR}'"
            " if yours ships them"
        )
    return Gap(
        read.source,
        window.start,
        window.end,
        f"events absent: the events selector {read.selector} matches no stream in Loki here "
        "although Flyte Admin shows attempts ran (a selector that names no stream, or the "
        "events' retention); no disruption can be seen" + hint,
        kind="logs_absent",
        failure=FailureKind.LOGS_ABSENT,
    )
