"""Cron schedules of backup policies and scheduled tasks: five fields (minute, hour, day
of month, month, day of week) read in UTC, parsed by ``cronsim``."""
from __future__ import annotations

from datetime import datetime, timezone

from cronsim import CronSim, CronSimError


def schedule_problem(schedule) -> str | None:
    """Why ``schedule`` is not a usable five-field cron expression, or None."""
    if not isinstance(schedule, str) or len(schedule.split()) != 5:
        return "a cron expression of five fields: minute hour day-of-month month day-of-week (UTC)"
    try:
        next_run(schedule, datetime(2000, 1, 1, tzinfo=timezone.utc))
    except (CronSimError, StopIteration, ValueError) as exc:
        return f"not a valid cron expression: {exc or 'it never matches'}"
    return None


def next_run(schedule: str, after: datetime) -> datetime:
    """The schedule's first time strictly after ``after`` (UTC, aware)."""
    after = after.astimezone(timezone.utc).replace(tzinfo=None)
    found = next(iter(CronSim(schedule, after)))
    return found.replace(tzinfo=timezone.utc)
