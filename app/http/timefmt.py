"""RFC 3339 UTC timestamps as both APIs write them: ``2026-11-21T21:57:02.123456Z``."""
from __future__ import annotations

from datetime import datetime, timezone


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not None and value.tzinfo is not timezone.utc:
        value = value.astimezone(timezone.utc)
    # spelled out: a third of strftime's cost and half of isoformat's with its keyword
    # (list pages write two or more per item)
    return _FORMAT % (value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond)


_FORMAT = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"


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
