"""The deploy worker inside the server: runs queued deploy jobs and the periodic health
check, off the event loop. On start-up it puts jobs a stopped process left running back
in the queue, so no service stays ``deploying`` forever, and reconciles the services
with what the engine holds under their labels."""
from __future__ import annotations

import asyncio
import contextlib
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
                 progress=lambda *a: None, methods: dict | None = None, work_dir: str = "./work", lease=None):
        self.store, self.clock, self.runtime, self.engine = store, clock, runtime, engine
        self.methods, self.work_dir = methods or {}, work_dir
        self.base_domain, self.health_interval, self.progress = base_domain, health_interval, progress
        self.lease = lease  # app.background.WorkerLease; None: jobs are claimed without an owner

    def tasks(self) -> dict:
        return {"deploy-jobs": self._jobs, "health-checks": self._health}

    async def _recover(self) -> None:
        resumed = await self.store.run(deploys.recover_interrupted, self.store.uow(), self.clock)
        if resumed:
            log.warning("resuming %d interrupted deploy job(s): %s", len(resumed), ", ".join(resumed))

    async def _jobs(self) -> None:
        owner = await self.lease.hold() if self.lease is not None else None
        await self._recover()
        recovered_at = asyncio.get_running_loop().time()
        try:
            changed = await self.engine.run(deploys.reconcile, self.store.uow(), self.clock, self.runtime)
            if changed:
                log.warning("engine and database disagreed on %d service(s): %s", len(changed), ", ".join(changed))
        except Exception:  # an unreachable engine at start-up must not stop the worker
            log.exception("could not reconcile services with the engine")
        while True:
            try:
                if self.lease is not None and asyncio.get_running_loop().time() - recovered_at > self.lease.RECOVER_S:
                    recovered_at = asyncio.get_running_loop().time()
                    await self._recover()  # jobs of another process that stopped meanwhile
                job = await self.store.run(deploys.claim_next, self.store.uow(), self.clock, owner)
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
        with self.lease.working() if self.lease is not None else contextlib.nullcontext():
            self._run_in_workdir(job)

    def _run_in_workdir(self, job) -> None:
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
