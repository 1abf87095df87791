"""RFC 3339 UTC timestamps as both APIs write them: ``2026-11-21T21:57:02.123456Z``."""
from __future__ import annotations

from datetime import datetime, timezone


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
