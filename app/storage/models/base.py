"""What every table's model builds on: the datetime field that keeps UTC."""
from __future__ import annotations

from datetime import datetime, timezone

import peewee


class UtcDateTimeField(peewee.DateTimeField):
    """Stores naive UTC, hands back aware UTC datetimes."""

    def db_value(self, value):
        if value is not None and value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return super().db_value(value)

    def python_value(self, value):
        if isinstance(value, str):  # SQLite's text: ISO 8601, read by Python itself (peewee tries formats)
            try:  # naive UTC, as Slipway stores it: the offset spelled out (``replace(tzinfo=...)``'s
                # keyword costs five times as much; list pages read a few per row)
                parsed = datetime.fromisoformat(value + "+00:00")
                if parsed.tzinfo is not None:
                    return parsed
            except ValueError:  # it had an offset, or another form
                pass
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                value = super().python_value(value)
        else:
            value = super().python_value(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


#: what a ``UtcDateTimeField`` column's value of a row read as a tuple reads as: an aware
#: UTC datetime (or None); for code that has no field at hand
utc_datetime = UtcDateTimeField().python_value
