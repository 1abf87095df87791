"""Bounded history (docs/decisions.md "Tenant safety, second round"): a service keeps its
newest ``events_keep`` timeline events (``SLIPWAY_EVENTS_KEEP``) and newest
:data:`JOBS_KEEP` deploy jobs; older rows are deleted by a periodic job
(``app.workers.history``). A queued or running job is never deleted. Deleting is
idempotent, so several processes may prune at once: one short transaction per service."""
from __future__ import annotations

JOBS_KEEP = 200


def prune(uow, *, events_keep: int, jobs_keep: int = JOBS_KEEP) -> tuple[int, int]:
    """Delete what is past the bounds now; answers (events, jobs) deleted."""
    with uow.reading():
        crowded_events = uow.service_events.crowded(events_keep)
        crowded_jobs = uow.deploy_jobs.crowded(jobs_keep)
    events = jobs = 0
    for service_id in crowded_events:
        with uow:
            events += uow.service_events.prune(service_id, events_keep)
            uow.commit()
    for service_id in crowded_jobs:
        with uow:
            jobs += uow.deploy_jobs.prune(service_id, jobs_keep)
            uow.commit()
    return events, jobs
