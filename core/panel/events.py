"""Real-time events: what the panel's WebSocket channel carries.

Plain data, so use cases in ``core`` can put them on their unit of work
(``uow.emit(event)``); the bus that delivers them is a port (``ports.events``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

KINDS = ("deploy.progress", "service.status", "service.logs", "backup.progress")


@dataclass(frozen=True)
class Event:
    type: str  # one of KINDS
    data: dict
    service_id: str
    customer_id: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def envelope(self) -> dict:
        return {"type": self.type, "data": self.data,
                "timestamp": self.timestamp.isoformat().replace("+00:00", "Z")}


def service_status(service, status: str | None = None) -> Event:
    """``service.status`` ``{id, status}`` of a ``core.panel.services.Service`` (its own status
    unless ``status`` is given, e.g. ``deleted``)."""
    return Event("service.status", {"id": service.id, "status": status or service.status}, service.id,
                 service.customer_id)


def deploy_progress(job, step: str, message: str, percent: int, customer_id: str | None) -> Event:
    """``deploy.progress`` ``{service_id, deploy_job_id, step, message, progress}`` of a
    ``core.panel.services.DeployJob``. The final step (``done`` / ``failed``) goes on the unit
    of work that ends the job, before the ``service.status`` it leads to."""
    return Event("deploy.progress", {"service_id": job.service_id, "deploy_job_id": job.id, "step": step,
                                     "message": str(message), "progress": max(0, min(100, int(percent)))},
                 job.service_id, customer_id)
