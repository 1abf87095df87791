"""The plugins' background jobs: each run every ``interval`` seconds as the clock counts,
in a thread; a run that raises is logged and the next one runs on time."""
from __future__ import annotations

import asyncio
import functools
import logging

from app.workers.loop import Background
from ports.extensions import ExtensionContext, Job

log = logging.getLogger("slipway.extensions")


class ExtensionJobs(Background):
    """Each plugin job every ``interval`` seconds (as the clock counts), in a thread."""

    TICK_S = 1.0  # how often the clock is looked at while waiting

    def __init__(self, jobs, context: ExtensionContext, calls):
        self.jobs, self.context, self.calls = tuple(jobs), context, calls

    def tasks(self) -> dict:
        return {f"ext-job-{job.name}": functools.partial(self._run, job) for job in self.jobs}

    async def _run(self, job: Job) -> None:
        clock = self.context.clock
        while True:
            started = clock.monotonic()
            try:
                await self.calls.run(job.run, self.context)
            except asyncio.CancelledError:
                raise
            except Exception:  # the next run is on time
                log.exception("plugin job %s failed", job.name)
            due = started + job.interval
            while (left := due - clock.monotonic()) > 0:
                await asyncio.sleep(min(left, self.TICK_S))
