"""The line's own time (`evidence.line_time`) against the shipper's stamp that Loki keeps."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from forensics.evidence.line_time import own_time
from forensics.evidence.logs import parse_signal
from forensics.model import LogEntry

UTC = timezone.utc
LOKI = datetime(2026, 9, 10, 19, 45, 30, tzinfo=UTC)  # the shipper's push time
AGENT = "Received 15 death signal, shutting down workers"
GLOG = f"W0910 19:45:22.830000 107 torch/distributed/elastic/agent/server/api.py:753] {AGENT}"


def _hit(line: str, at: datetime = LOKI):
    ts_ns = int(at.timestamp()) * 10**9 + at.microsecond * 1000
    return parse_signal(LogEntry.make(ts_ns, {"namespace": "ns", "pod": "p"}, line))


def test_cri_prefix_with_nanoseconds_and_an_offset():
    hit = _hit(f"2026-09-10T21:45:22.830123456+02:00 stderr F {GLOG}")
    assert (hit.at, hit.at_source) == (datetime(2026, 9, 10, 19, 45, 22, 830123, tzinfo=UTC), "cri")
    assert hit.loki_at == LOKI


def test_cri_line_inside_a_shippers_json_envelope():
    line = '{"log":"2026-09-10T19:45:22.83Z stderr F ' + AGENT + '","stream":"stderr"}'
    assert (_hit(line).at_source, _hit(line).at.microsecond) == ("cri", 830000)


def test_glog_prefix_takes_the_year_nearest_lokis():
    hit = _hit(GLOG)
    assert (hit.at, hit.at_source) == (
        datetime(2026, 9, 10, 19, 45, 22, 830000, tzinfo=UTC),
        "glog",
    )
    new_year = datetime(2027, 1, 1, 0, 0, 5, tzinfo=UTC)
    hit = _hit(f"W1231 23:59:58.000000 107 api.py:753] {AGENT}", new_year)
    assert hit.at == datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC)


def test_python_logging_prefix():
    hit = _hit(
        f"2026-09-10 19:45:22,830 WARNING torch.distributed.elastic.agent.server.api: {AGENT}"
    )
    assert (hit.at, hit.at_source) == (
        datetime(2026, 9, 10, 19, 45, 22, 830000, tzinfo=UTC),
        "logging",
    )


def test_no_time_of_its_own_or_an_implausible_one_keeps_lokis():
    assert (_hit(AGENT).at, _hit(AGENT).at_source, _hit(AGENT).loki_at) == (LOKI, "loki", None)
    ahead = LOKI + timedelta(hours=2)
    assert own_time(f"{ahead:%Y-%m-%dT%H:%M:%SZ} stderr F x", "x", None, LOKI) == (LOKI, "loki")
