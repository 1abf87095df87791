"""Scheduled tasks inside the server (``core.panel.tasks``): ``TaskScheduler`` queues the
run of each due task at start-up and then every ``TICK_S`` seconds (a run due while the
task's previous one runs is recorded ``skipped``), and ``TaskWorker`` starts queued runs,
up to ``concurrency`` at once and one per customer at a time, on threads of their own
(``task_calls``): a customer's command that runs to its ``timeout_s`` holds one of them,
never a database thread, a deploy, a backup or another customer's task. Both run where
the deploy worker runs (``SLIPWAY_DEPLOY_WORKER``), in every such process: each due run is
claimed in the transaction that queues it, and each queued run is started by one worker."""
from __future__ import annotations

import asyncio
import logging

from app.workers.loop import Background, JobWorker
from core.panel import tasks

log = logging.getLogger("slipway.tasks")


class TaskWorker(JobWorker):
    name = "task"
    concurrency = 4

    def __init__(self, store, clock, runtime, calls, *, lease=None, concurrency: int | None = None):
        self.store, self.clock, self.runtime, self.calls, self.lease = store, clock, runtime, calls, lease
        if concurrency:
            self.concurrency = concurrency

    def recover(self) -> list:
        return tasks.recover_interrupted(self.store.uow(), self.clock)

    def claim(self, owner):
        return tasks.claim_next(self.store.uow(), self.clock, owner)

    def work(self, claimed) -> None:
        run, task = claimed
        ended = tasks.execute(self.store.uow(), self.clock, self.runtime, run, task)
        log.info("task %s of service %s: run %s %s", task.id, task.service_id, ended.id, ended.status)


class TaskScheduler(Background):
    TICK_S = 5.0  # how often due tasks are looked for (a run starts at most this late)

    def __init__(self, store, clock, queued=lambda: None, page: int = tasks.DUE_BATCH):
        """``queued()`` is called after a tick queued runs (the task worker's ``wake``)."""
        self.store, self.clock, self.queued, self.page = store, clock, queued, page

    def tasks(self) -> dict:
        return {"task-scheduler": self._run}

    def tick(self) -> list:
        """Queue the runs of the tasks due now (blocking: database work); answers them."""
        made, after = [], None
        while page := tasks.due_tasks(self.store.uow(), self.clock, self.page, after):
            for task in page:
                try:
                    run = tasks.queue_due(self.store.uow(), self.clock, task)
                except Exception:  # one task's trouble does not hold the others up; it is due again
                    log.exception("the run of task %s could not be queued", task.id)
                    continue
                if run is not None:
                    made.append(run)
            after = page[-1].id
        return made

    async def _run(self) -> None:
        while True:
            try:
                made = await self.store.run(self.tick)
                if any(run.status == "running" for run in made):
                    self.queued()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next tick tries again
                log.exception("task scheduler tick failed")
            await self.idle(self.TICK_S)
