"""The deploy worker inside the server: runs queued deploy jobs and the periodic health
check, off the event loop. On start-up it puts jobs a stopped process left running back
in the queue, so no service stays ``deploying`` forever, and reconciles the services
with what the engine holds under their labels."""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile

from app.background import JobWorker
from core import deploys
from plugins.deploy_compose import parse_compose

log = logging.getLogger("slipway.deployer")


class DeployWorker(JobWorker):
    name = "deploy"

    def __init__(self, store, clock, runtime, engine, *, base_domain=None, health_interval: float = 15.0,
                 progress=lambda *a: None, methods: dict | None = None, work_dir: str = "./work", lease=None):
        self.store, self.clock, self.runtime, self.engine = store, clock, runtime, engine
        self.methods, self.work_dir = methods or {}, work_dir
        self.base_domain, self.health_interval, self.progress = base_domain, health_interval, progress
        self.lease = lease  # app.background.WorkerLease; None: jobs are claimed without an owner

    def tasks(self) -> dict:
        return {**super().tasks(), "health-checks": self._health}

    def recover(self) -> list:
        return deploys.recover_interrupted(self.store.uow(), self.clock)

    def claim(self, owner):
        return deploys.claim_next(self.store.uow(), self.clock, owner)

    async def starting(self) -> None:
        try:
            changed = await self.engine.run(deploys.reconcile, self.store.uow(), self.clock, self.runtime)
            if changed:
                log.warning("engine and database disagreed on %d service(s): %s", len(changed), ", ".join(changed))
        except Exception:  # an unreachable engine at start-up must not stop the worker
            log.exception("could not reconcile services with the engine")

    def work(self, job) -> None:
        """One job in a work directory of its own (``SLIPWAY_WORK_DIR/<job id>-...``),
        removed afterwards whatever happened; git and ai deploys clone and build there."""
        try:
            os.makedirs(self.work_dir, exist_ok=True)
            workdir = tempfile.mkdtemp(prefix=f"{job.id}-", dir=self.work_dir)
        except OSError as exc:  # never leave the service deploying for want of a directory
            deploys.fail_job(self.store.uow(), self.clock, job,
                             RuntimeError(f"cannot create a work directory under SLIPWAY_WORK_DIR: {exc}"),
                             progress=self.progress)
            return
        try:
            deploys.run_job(self.store.uow(), self.clock, self.runtime, job, parse_compose,
                            base_domain=self.base_domain, progress=self.progress, methods=self.methods,
                            workdir=workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    async def _health(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.engine.run(deploys.check_health, self.store.uow(), self.clock, self.runtime)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("health check failed")
