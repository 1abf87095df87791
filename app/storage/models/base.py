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
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                value = super().python_value(value)
        else:
            value = super().python_value(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value
