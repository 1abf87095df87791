"""The deploy worker inside the server: runs queued deploy jobs and the periodic health
check, off the event loop. On start-up it puts jobs a stopped process left running back
in the queue, so no service stays ``deploying`` forever, and reconciles the services
with what the engine holds under their labels.

Up to ``concurrency`` jobs run at once (``SLIPWAY_DEPLOY_CONCURRENCY``), at most
``per_customer`` of one customer (``SLIPWAY_DEPLOYS_PER_CUSTOMER``, counted over every
process sharing the database); the others wait in the queue. Every ``CANCEL_POLL_S``
seconds two queries ask which of the running jobs' services were deleted, and which jobs
had a cancel requested (``POST .../deploys/{job_id}/cancel``, in any process): those
jobs' ``cancel`` events are set (with the reason), and they stop, clean up and end."""
from __future__ import annotations

import asyncio
import logging
import time
import os
import shutil
import tempfile
import threading

from app.config_table import FIELDS
from app.private_dirs import private_dir
from app.workers.loop import JobWorker
from core.panel import deploy_job, deploys
from core.panel.customers import DEFAULT_QUOTA
from ports.resolver import SystemResolver

log = logging.getLogger("slipway.deployer")


def record_deploy(store, job_id: str, seconds: float) -> None:
    """Count a finished job by its outcome (the state it ended in) and its duration."""
    from app.http.observability.prometheus import metrics

    try:
        with store.uow(write=False) as uow:
            job = uow.deploy_jobs.get(job_id)
        outcome = job.state if job is not None else "deleted"
        m = metrics()
        m.deploy_jobs.labels(outcome).inc()
        m.deploy_duration.labels(outcome).observe(seconds)
    except Exception:  # metrics never fail a deploy
        log.warning("could not record the metrics of deploy job %s", job_id, exc_info=True)


class CancelEvent(threading.Event):
    """A job's cancel event; ``reason`` says why it was set ("service deleted" or
    "cancelled", ``core.panel.deploys``)."""

    reason: str | None = None

    def cancel(self, reason: str) -> None:
        if not self.is_set():
            self.reason = reason
            self.set()


class DeployWorker(JobWorker):
    name = "deploy"
    CANCEL_POLL_S = 2.0

    def __init__(self, store, clock, runtime, calls, *, base_domain=None,
                 health_interval: float = FIELDS["health_interval"].default,
                 progress=lambda *a: None, methods: dict | None = None, work_dir: str = FIELDS["work_dir"].default,
                 lease=None, concurrency: int = FIELDS["deploy_concurrency"].default,
                 per_customer: int | None = FIELDS["deploys_per_customer"].default,
                 settle_seconds: float = FIELDS["deploy_settle"].default, health_calls=None,
                 routes_changed=lambda: None, health_timeout: float = FIELDS["deploy_health_timeout"].default,
                 drain_seconds: float = FIELDS["deploy_drain"].default,
                 registry_allow_private: bool = FIELDS["registry_allow_private"].default,
                 quota=None, host_ports: tuple = FIELDS["host_ports"].default, resolver=None):
        """The defaults are the settings' (``app.config_table``): a worker made in code
        (tests) deploys as a server left at its defaults does."""
        self.registry_allow_private = registry_allow_private  # SLIPWAY_REGISTRY_ALLOW_PRIVATE
        self.quota = quota or DEFAULT_QUOTA  # customer limits, checked when a job's source reveals its compose
        self.store, self.clock, self.runtime, self.calls = store, clock, runtime, calls
        self.health_calls = health_calls or calls  # health checks and reconciling: not the jobs' threads
        self.methods, self.work_dir = methods or {}, work_dir
        self.base_domain, self.health_interval, self.progress = base_domain, health_interval, progress
        self.lease = lease  # app.workers.loop.WorkerLease; None: jobs are claimed without an owner
        self.concurrency, self.per_customer, self.settle_seconds = concurrency, per_customer, settle_seconds
        # routes_changed: blocks until the reverse proxy serves the route records (after a switch)
        self.routes_changed, self.health_timeout, self.drain_seconds = routes_changed, health_timeout, drain_seconds
        # what every job run here shares: its waits go through ``clock``; SLIPWAY_HOST_PORTS for every method
        self.deployer = deploy_job.Deployer(
            clock, runtime, methods=self.methods, progress=progress, routes_changed=routes_changed,
            resolver=resolver or SystemResolver(),
            settings=deploy_job.DeploySettings(
                base_domain=base_domain, health_timeout=health_timeout, settle_seconds=settle_seconds,
                drain_seconds=drain_seconds, registry_allow_private=registry_allow_private,
                host_ports=tuple(host_ports), quota=self.quota))
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
            changed = await self.health_calls.run(deploys.reconcile, self.store.uow(), self.clock, self.runtime)
            if changed:
                log.warning("engine and database disagreed on %d service(s): %s", len(changed), ", ".join(changed))
        except Exception:  # an unreachable engine at start-up must not stop the worker
            log.exception("could not reconcile services with the engine")

    def running_jobs(self) -> dict:
        """``{job id: service id}`` of the jobs running in this process now."""
        with self._active_lock:
            return {job_id: service_id for job_id, (service_id, _) in self._active.items()}

    def cancel_services(self, service_ids, reason: str = deploys.DELETED) -> list:
        """Set, with ``reason``, the cancel event of every job of ``service_ids`` running in
        this process; returns their ids. A delete calls it before it touches the engine, so
        a job that then sees its containers stop or vanish ends "service deleted" rather
        than with what it saw (other processes' jobs learn it from ``cancel_deleted``)."""
        wanted = set(service_ids)
        with self._active_lock:
            active = [(job_id, event) for job_id, (service_id, event) in self._active.items() if service_id in wanted]
        for _, event in active:
            _cancel(event, reason)
        return [job_id for job_id, _ in active]

    def cancel_deleted(self) -> list:
        """Set the cancel event of every running job whose service is gone, or whose
        cancel was requested (two queries); returns their ids. Blocking (database)."""
        with self._active_lock:
            active = dict(self._active)
        if not active:
            return []
        with self.store.uow(write=False).reading() as uow:
            alive = uow.services.existing({service_id for service_id, _ in active.values()})
            requested = uow.deploy_jobs.cancels_requested(list(active))
        gone = [job_id for job_id, (service_id, event) in active.items()
                if service_id not in alive and not event.is_set()]
        for job_id in gone:
            _cancel(active[job_id][1], deploys.DELETED)
        asked = [job_id for job_id in requested if job_id not in gone and not active[job_id][1].is_set()]
        for job_id in asked:
            _cancel(active[job_id][1], deploys.CANCELLED)
        return gone + asked

    def work(self, job) -> None:
        """One job in a work directory of its own (``SLIPWAY_WORK_DIR/<job id>-...``),
        removed afterwards whatever happened; git and ai deploys clone and build there."""
        try:
            # the work folder and each job's are the server user's only (0700), whatever the umask
            private_dir(self.work_dir)
            workdir = os.path.abspath(tempfile.mkdtemp(prefix=f"{job.id}-", dir=self.work_dir))  # 0700
        except OSError as exc:  # never leave the service deploying for want of a directory
            deploy_job.fail_job(self.store.uow(), self.clock, job,
                             RuntimeError(f"cannot create a work directory under SLIPWAY_WORK_DIR: {exc}"),
                             progress=self.progress)
            return
        cancel = CancelEvent()
        if getattr(job, "cancel_requested", False):  # asked for while its last worker ran it, or before
            cancel.cancel(deploys.CANCELLED)
        with self._active_lock:
            self._active[job.id] = (job.service_id, cancel)
        started = time.perf_counter()
        try:
            deploy_job.run_job(self.store.uow(), self.deployer, job, workdir=workdir, cancel=cancel)
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
                    log.info("cancelling deploy job(s) (service deleted or cancel requested): %s",
                             ", ".join(cancelled))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not look for deleted services of running deploys")

    async def _health(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.health_calls.run(deploys.check_health, self.store.uow(), self.clock, self.runtime)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("health check failed")


def _cancel(event, reason: str) -> None:
    if isinstance(event, CancelEvent):
        event.cancel(reason)
    else:  # a plain threading.Event (tests): no reason, "service deleted"
        event.set()
