"""The deploy worker's cancel poll on a real database: a cancel requested through the
use case (any process) sets the running job's cancel event with the reason "cancelled";
a deleted service's job gets "service deleted"; a job claimed with a request already
on its row starts cancelled."""
from __future__ import annotations

from app.workers.deploys import CancelEvent, DeployWorker
from core.panel import customers, deploys, releases, services
from core.panel.customers import Quota
from tests.support.fakes import FakeMethod, parse, principal_of


def _queued(store, clock, admin, customer, name):
    return services.create_service(store.uow(), clock, admin, {"name": name, "deploy_method": "compose",
                                                               "customer_id": customer.id},
                                   {"compose": FakeMethod()}, {}, Quota(read_compose=parse))


def test_the_poll_cancels_requested_and_deleted_services_jobs(store, clock, tmp_path):
    admin = principal_of(store.uow(), clock)
    acme = customers.create_customer(store.uow(), clock, name="Acme")
    (asked, asked_job), (gone, gone_job) = (_queued(store, clock, admin, acme, n) for n in ("asked", "gone"))
    worker = DeployWorker(store, clock, runtime=None, calls=None, work_dir=str(tmp_path))
    for job in (deploys.claim_next(store.uow(), clock), deploys.claim_next(store.uow(), clock)):
        worker._active[job.id] = (job.service_id, CancelEvent())
    assert worker.cancel_deleted() == []
    answer = releases.cancel_job(store.uow(), clock, None, admin, asked.id, asked_job.id)
    assert (answer.state, answer.cancel_requested) == ("running", True)
    with store.uow() as uow:
        uow.services.delete(gone.id)
        uow.commit()
    assert sorted(worker.cancel_deleted()) == sorted([asked_job.id, gone_job.id])
    assert worker._active[asked_job.id][1].reason == deploys.CANCELLED
    assert worker._active[gone_job.id][1].reason == deploys.DELETED
    assert worker.cancel_deleted() == []  # once
