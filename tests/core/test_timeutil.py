"""--since/--until as an SRE types them; bad input is one clear UsageError."""

import itertools
from datetime import datetime, timedelta

import pytest

from forensics.cli.errors import message
from forensics.errors import UsageError
from forensics.model import UTC, Window, rfc3339
from forensics.timeutil import parse_duration, parse_window

NOW = datetime(2026, 9, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("90m", timedelta(minutes=90)),
        ("36h", timedelta(hours=36)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("1d12h", timedelta(hours=36)),
    ],
)
def test_durations_count_back_from_until(text, expected):
    w = parse_window(text, "2026-09-15T00:00:00Z")
    assert w.end == NOW and w.start == NOW - expected


def test_bare_date_is_midnight_utc():
    w = parse_window("2026-09-10", "2026-09-11")
    assert w == Window(datetime(2026, 9, 10, tzinfo=UTC), datetime(2026, 9, 11, tzinfo=UTC))


def test_offsets_are_converted_to_utc():
    w = parse_window("2026-09-10T21:45:22+02:00", "2026-09-11T00:00:00Z")
    assert rfc3339(w.start) == "2026-09-10T19:45:22Z"


def test_until_defaults_to_now():
    w = parse_window("1h", None, now=NOW)
    assert w.end == NOW and w.length == timedelta(hours=1)


@pytest.mark.parametrize(
    "since,until,fragment",
    [
        ("yesterday", None, "neither a duration"),
        ("7x", None, "neither a duration"),
        ("2026-13-01", None, "not a valid date"),
        ("2026-09-10T10:00:00", None, "no time zone"),
        ("2026-09-12", "2026-09-11", "must be before"),
        ("2026-09-11", "2026-09-11", "must be before"),
        ("7d", "soon", "--until"),
        ("-5d", None, "neither a duration"),
    ],
)
def test_bad_times_are_one_clear_usage_error(since, until, fragment):
    with pytest.raises(UsageError) as e:
        parse_window(since, until, now=NOW)
    assert fragment in message(e.value)  # as the command line says it, flags named


def test_parse_duration_rejects_iso8601_and_empty():
    assert parse_duration("P7D") is None
    assert parse_duration("") is None


def test_window_split_covers_exactly_without_overlap():
    w = Window(datetime(2026, 8, 1, tzinfo=UTC), datetime(2026, 8, 31, 7, tzinfo=UTC))
    shards = w.split(timedelta(hours=24))
    assert shards[0].start == w.start and shards[-1].end == w.end
    assert all(a.end == b.start for a, b in itertools.pairwise(shards))
    assert len(shards) == 31 and shards[-1].length == timedelta(hours=7)


@pytest.mark.parametrize(
    "text,micro",
    [
        ("2026-09-10T19:45:22.5Z", 500000),
        ("2026-09-10T19:45:22.123Z", 123000),
        ("2026-09-10T19:45:22.123456789Z", 123456),  # Loki's and Go's RFC3339Nano
    ],
)
def test_any_number_of_fraction_digits_parses_on_every_python(text, micro):
    # Python 3.10's fromisoformat reads only 3 or 6 digits; RFC 3339 allows any number.
    w = parse_window(text, "2026-09-11T00:00:00Z")
    assert w.start == datetime(2026, 9, 10, 19, 45, 22, micro, tzinfo=UTC)
