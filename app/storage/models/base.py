"""What every table's model builds on: the datetime field that keeps UTC."""
from __future__ import annotations

import functools
from datetime import datetime, timezone

import peewee


class UtcDateTimeField(peewee.DateTimeField):
    """Stores naive UTC, hands back aware UTC datetimes."""

    def db_value(self, value):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return super().db_value(value)

    def python_value(self, value):
        if isinstance(value, str):  # SQLite's text
            return _from_text(value)
        value = super().python_value(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


@functools.lru_cache(maxsize=4096)
def _from_text(value: str):
    """SQLite's text of a ``UtcDateTimeField`` (ISO 8601, naive UTC as Slipway stores it) as an
    aware UTC datetime. Kept for the last 4,096 texts: a list page reads the same times on
    every request, and the same (immutable) datetime coming back lets ``rfc3339`` find its
    text by the datetime's hash, which the object keeps once computed."""
    try:  # the offset spelled out (``replace(tzinfo=...)``'s keyword costs five times as much)
        parsed = datetime.fromisoformat(value + "+00:00")
        if parsed.tzinfo is not None:
            return parsed
    except ValueError:  # it had an offset, or another form
        pass
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = peewee.DateTimeField().python_value(value)  # peewee's formats
    if isinstance(parsed, datetime):
        parsed = parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)
    return parsed


#: what a ``UtcDateTimeField`` column's value of a row read as a tuple reads as: an aware
#: UTC datetime (or None); for code that has no field at hand
utc_datetime = UtcDateTimeField().python_value
