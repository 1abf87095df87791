"""The deploy worker inside the server: runs queued deploy jobs and the periodic health
check, off the event loop. On start-up it puts jobs a stopped process left running back
in the queue, so no service stays ``deploying`` forever, and reconciles the services
with what the engine holds under their labels.

Up to ``concurrency`` jobs run at once (``SLIPWAY_DEPLOY_CONCURRENCY``), at most
``per_customer`` of one customer (``SLIPWAY_DEPLOYS_PER_CUSTOMER``, counted over every
process sharing the database); the others wait in the queue. Every ``CANCEL_POLL_S``
seconds one query asks which of the running jobs' services were deleted (by any
process): those jobs' ``cancel`` events are set, and they stop, clean up and end."""
from __future__ import annotations

import asyncio
import logging
import time
import os
import shutil
import tempfile
import threading

from app.workers.loop import JobWorker
from core.panel import deploys
from core.panel.compose import compose_parser

log = logging.getLogger("slipway.deployer")


def record_deploy(store, job_id: str, seconds: float) -> None:
    """Count a finished job by its outcome (the state it ended in) and its duration."""
    from app.http.observability import metrics

    try:
        with store.uow(write=False) as uow:
            job = uow.deploy_jobs.get(job_id)
        outcome = job.state if job is not None else "deleted"
        m = metrics()
        m.deploy_jobs.labels(outcome).inc()
        m.deploy_duration.labels(outcome).observe(seconds)
    except Exception:  # noqa: BLE001 (metrics never fail a deploy)
        log.warning("could not record the metrics of deploy job %s", job_id, exc_info=True)


class DeployWorker(JobWorker):
    name = "deploy"
    CANCEL_POLL_S = 2.0

    def __init__(self, store, clock, runtime, engine, *, base_domain=None, health_interval: float = 15.0,
                 progress=lambda *a: None, methods: dict | None = None, work_dir: str = "./work", lease=None,
                 concurrency: int = 4, per_customer: int | None = 2, settle_seconds: float = deploys.SETTLE_SECONDS,
                 health_engine=None):
        self.store, self.clock, self.runtime, self.engine = store, clock, runtime, engine
        self.health_engine = health_engine or engine  # health checks and reconciling: not the jobs' threads
        self.methods, self.work_dir = methods or {}, work_dir
        self.base_domain, self.health_interval, self.progress = base_domain, health_interval, progress
        self.lease = lease  # app.workers.loop.WorkerLease; None: jobs are claimed without an owner
        self.concurrency, self.per_customer, self.settle_seconds = concurrency, per_customer, settle_seconds
        self._active: dict = {}  # job id -> (service id, threading.Event): the jobs running here
        self._active_lock = threading.Lock()

    def tasks(self) -> dict:
        return {**super().tasks(), "health-checks": self._health, "deploy-cancels": self._cancels}

    def recover(self) -> list:
        return deploys.recover_interrupted(self.store.uow(), self.clock)

    def claim(self, owner):
        return deploys.claim_next(self.store.uow(), self.clock, owner, per_customer=self.per_customer)

    async def starting(self) -> None:
        try:
            changed = await self.health_engine.run(deploys.reconcile, self.store.uow(), self.clock, self.runtime)
            if changed:
                log.warning("engine and database disagreed on %d service(s): %s", len(changed), ", ".join(changed))
        except Exception:  # an unreachable engine at start-up must not stop the worker
            log.exception("could not reconcile services with the engine")

    def running_jobs(self) -> dict:
        """``{job id: service id}`` of the jobs running in this process now."""
        with self._active_lock:
            return {job_id: service_id for job_id, (service_id, _) in self._active.items()}

    def cancel_deleted(self) -> list:
        """Set the cancel event of every running job whose service is gone (one query);
        returns their ids. Blocking (database)."""
        with self._active_lock:
            active = dict(self._active)
        if not active:
            return []
        with self.store.uow(write=False).reading() as uow:
            alive = uow.services.existing({service_id for service_id, _ in active.values()})
        gone = [job_id for job_id, (service_id, event) in active.items()
                if service_id not in alive and not event.is_set()]
        for job_id in gone:
            active[job_id][1].set()
        return gone

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
        cancel = threading.Event()
        with self._active_lock:
            self._active[job.id] = (job.service_id, cancel)
        started = time.perf_counter()
        try:
            deploys.run_job(self.store.uow(), self.clock, self.runtime, job, compose_parser(self.methods),
                            base_domain=self.base_domain, progress=self.progress, methods=self.methods,
                            workdir=workdir, cancel=cancel, settle_seconds=self.settle_seconds)
        finally:
            record_deploy(self.store, job.id, time.perf_counter() - started)  # whatever the job's end
            with self._active_lock:
                self._active.pop(job.id, None)
            shutil.rmtree(workdir, ignore_errors=True)

    async def _cancels(self) -> None:
        while True:
            await asyncio.sleep(self.CANCEL_POLL_S)
            try:
                cancelled = await self.store.run(self.cancel_deleted)
                if cancelled:
                    log.info("cancelling deploy job(s) of deleted services: %s", ", ".join(cancelled))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not look for deleted services of running deploys")

    async def _health(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.health_engine.run(deploys.check_health, self.store.uow(), self.clock, self.runtime)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("health check failed")
