"""Deploy progress: the deploy worker's callback that publishes ``deploy.progress``."""
from __future__ import annotations

import logging
import threading

from ports.events import Event

log = logging.getLogger("slipway.realtime")


class DeployProgress:
    """The deploy worker's ``progress(job, step, message, percent)`` callback: publishes
    ``deploy.progress`` straight on the bus (progress is not stored, so not transactional).
    Runs in the engine thread of the job; the service's customer is read once per service."""

    def __init__(self, store, bus):
        self.store, self.bus = store, bus
        self._customers: dict = {}
        self._lock = threading.Lock()

    def _customer(self, service_id: str) -> str | None:
        with self._lock:
            if service_id in self._customers:
                return self._customers[service_id]
        with self.store.uow(write=False).reading() as uow:
            service = uow.services.get(service_id)
        customer = service.customer_id if service is not None else None
        with self._lock:
            if len(self._customers) > 10_000:
                self._customers.clear()
            self._customers[service_id] = customer
        return customer

    def __call__(self, job, step, message, percent) -> None:
        try:
            customer = self._customer(job.service_id)
            event = Event("deploy.progress", {
                "service_id": job.service_id, "deploy_job_id": job.id, "step": step, "message": str(message),
                "progress": max(0, min(100, int(percent)))}, job.service_id, customer)
            if self.store.outbox:  # plugins subscribe: recorded, then published once it committed
                with self.store.uow() as uow:
                    uow.emit(event)
                    uow.commit()
            else:
                self.bus.publish(event)
        except Exception:  # progress is informative: never fail the deploy for it
            log.exception("could not publish deploy progress of %s", job.id)
