"""The clock port: where every use case gets 'now' from, and where it waits, so tests can
freeze time or drive it (a deploy job's health wait, settle window and drain pass in no
time under a driven clock)."""
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
        """Seconds from an arbitrary start, never going backwards (rate limits, deadlines)."""

    @abstractmethod
    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` (0 or less: return at once); afterwards
        :meth:`monotonic` has moved on by at least that much."""


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)
