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

from app.background import Background
from core import deploys
from plugins.deploy_compose import parse_compose

log = logging.getLogger("slipway.deployer")


class DeployWorker(Background):
    def __init__(self, store, clock, runtime, engine, *, base_domain=None, health_interval: float = 15.0,
                 progress=lambda *a: None, methods: dict | None = None, work_dir: str = "./work"):
        self.store, self.clock, self.runtime, self.engine = store, clock, runtime, engine
        self.methods, self.work_dir = methods or {}, work_dir
        self.base_domain, self.health_interval, self.progress = base_domain, health_interval, progress

    def tasks(self) -> dict:
        return {"deploy-jobs": self._jobs, "health-checks": self._health}

    async def _jobs(self) -> None:
        resumed = await self.store.run(deploys.recover_interrupted, self.store.uow(), self.clock)
        if resumed:
            log.warning("resuming %d interrupted deploy job(s): %s", len(resumed), ", ".join(resumed))
        try:
            changed = await self.engine.run(deploys.reconcile, self.store.uow(), self.clock, self.runtime)
            if changed:
                log.warning("engine and database disagreed on %d service(s): %s", len(changed), ", ".join(changed))
        except Exception:  # an unreachable engine at start-up must not stop the worker
            log.exception("could not reconcile services with the engine")
        while True:
            try:
                job = await self.store.run(deploys.claim_next, self.store.uow(), self.clock)
                if job is None:
                    await self.idle(1.0)
                    continue
                await self.engine.run(self._run_job, job)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("deploy worker round failed")
                await asyncio.sleep(1.0)

    def _run_job(self, job) -> None:
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
