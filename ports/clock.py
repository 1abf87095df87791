"""The clock port: where every use case gets 'now' from, so tests can freeze time."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from datetime import datetime, timezone


class Clock(ABC):
    @abstractmethod
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""

    @abstractmethod
    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going backwards (for rate limits)."""


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()
