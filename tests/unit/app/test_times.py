"""Times as the APIs write them (``app.http.timefmt.rfc3339``) and as SQLite's text reads back
(``app.storage.models.base.utc_datetime``). Both keep their last answers: these tests hold
the kept answers to what a fresh computation gives."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from app.http.timefmt import rfc3339
from app.storage.models.base import utc_datetime

UTC = timezone.utc


def test_rfc3339_writes_utc_with_six_digits_of_seconds():
    assert rfc3339(None) is None
    assert rfc3339(datetime(2026, 11, 21, 21, 57, 2, 123456, tzinfo=UTC)) == "2026-11-21T21:57:02.123456Z"
    assert rfc3339(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00.000000Z"
    assert rfc3339(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == "9999-12-31T23:59:59.999999Z"
    assert rfc3339(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000000Z"  # naive: taken as UTC


def test_the_same_instant_in_another_zone_is_written_in_utc_whichever_came_first():
    plus_two = timezone(timedelta(hours=2))
    utc = datetime(2026, 3, 1, 0, 30, tzinfo=UTC)
    local = datetime(2026, 3, 1, 2, 30, tzinfo=plus_two)  # equal to ``utc``: the same kept answer
    assert rfc3339(local) == rfc3339(utc) == "2026-03-01T00:30:00.000000Z"
    later = datetime(2026, 3, 1, 2, 30, tzinfo=UTC)  # the same fields as ``local``, another instant
    assert rfc3339(later) == "2026-03-01T02:30:00.000000Z"


def test_the_repeated_hour_of_a_zone_is_written_as_two_instants():
    from zoneinfo import ZoneInfo

    new_york = ZoneInfo("America/New_York")  # 2026-11-01 01:30 happens twice there
    first = datetime(2026, 11, 1, 1, 30, tzinfo=new_york)
    second = first.replace(fold=1)
    assert first == second  # to Python (same zone object): which is why they are not kept by it
    assert rfc3339(first) == "2026-11-01T05:30:00.000000Z"
    assert rfc3339(second) == "2026-11-01T06:30:00.000000Z"


def test_a_naive_time_and_an_aware_one_with_the_same_fields_are_kept_apart():
    plus_one = timezone(timedelta(hours=1))
    assert rfc3339(datetime(2026, 5, 5, 12, 0)) == "2026-05-05T12:00:00.000000Z"
    assert rfc3339(datetime(2026, 5, 5, 12, 0, tzinfo=plus_one)) == "2026-05-05T11:00:00.000000Z"


@pytest.mark.parametrize("text, expected", [
    ("2026-11-21 21:57:02.123456", datetime(2026, 11, 21, 21, 57, 2, 123456, tzinfo=UTC)),
    ("2026-11-21 21:57:02", datetime(2026, 11, 21, 21, 57, 2, tzinfo=UTC)),  # no fraction when it is zero
    ("2026-11-21T21:57:02+02:00", datetime(2026, 11, 21, 19, 57, 2, tzinfo=UTC)),  # an offset of its own
    ("2026-11-21", datetime(2026, 11, 21, tzinfo=UTC)),
])
def test_sqlite_text_reads_as_an_aware_utc_time(text, expected):
    for _ in range(2):  # computed, then kept
        found = utc_datetime(text)
        assert found == expected and found.utcoffset() == timedelta(0)
    assert utc_datetime(None) is None


def test_a_time_read_again_is_the_same_object_so_its_text_is_found_by_its_kept_hash():
    first, again = utc_datetime("2031-07-04 08:09:10.000011"), utc_datetime("2031-07-04 08:09:10.000011")
    assert first is again
    assert rfc3339(first) == rfc3339(again) == "2031-07-04T08:09:10.000011Z"
