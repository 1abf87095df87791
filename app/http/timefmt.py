"""RFC 3339 UTC timestamps as both APIs write them: ``2026-11-21T21:57:02.123456Z``."""
from __future__ import annotations

import functools
from datetime import datetime, timezone


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    zone = value.tzinfo
    if zone is not None and zone is not timezone.utc:
        # to UTC before the kept answers are asked: two times of one zone that differ only
        # in ``fold`` (the repeated hour) are equal to Python, but not the same instant
        value = value.astimezone(timezone.utc)
    return _text(value)


@functools.lru_cache(maxsize=4096)
def _text(value: datetime) -> str:
    """The text of a UTC or naive (taken as UTC) time. Kept for the last 4,096 times: a
    list page writes the same ones on every request."""
    # spelled out, two digits from a table: a third of strftime's cost and two thirds of
    # "%02d" formatting (list pages write two or more per item; ``python -m bench lists``)
    return (f"{value.year:04d}-{_TWO[value.month]}-{_TWO[value.day]}T{_TWO[value.hour]}:{_TWO[value.minute]}:"
            f"{_TWO[value.second]}.{value.microsecond:06d}Z")


_TWO = tuple(f"{n:02d}" for n in range(100))


def parse_rfc3339(value: str) -> datetime:
    """An RFC 3339 timestamp (already checked by the contract's ``date-time`` format) as
    an aware UTC datetime. ``ValueError`` for what Python cannot hold: lower-case ``z``
    is accepted, a time that falls outside years 1-9999 in UTC is refused."""
    try:
        parsed = datetime.fromisoformat(value.strip().replace("z", "Z"))
        if parsed.tzinfo is None:
            raise ValueError("a time zone offset is required")
        return parsed.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError("outside the years 1 to 9999 in UTC") from None
