"""Deploy jobs against a real database and a scripted engine: a service deleted while its
job runs loses whatever the job made after the delete."""
from __future__ import annotations

from core.panel import deploys, access, customers, services
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.scripted_engine import ScriptedEngine

TWO = ("services:\n  a:\n    image: localhost/busybox:latest\n"
       "  b:\n    image: localhost/busybox:latest\n    depends_on: [a]\n")


def test_a_service_deleted_during_its_deploy_leaves_nothing(store, clock):
    from app.pluginmanager import deploy_methods, make_plugin_manager, templates

    pm = make_plugin_manager()
    customer = customers.create_customer(store.uow(), clock, name="Acme")
    _, key = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=100)
    principal = access.authenticate_key(store.uow(), clock, key)
    service, _ = services.create_service(store.uow(), clock, principal, {
        "name": "short-lived", "customer_id": customer.id, "deploy_method": "compose", "compose": TWO},
        deploy_methods(pm), templates(pm))
    job = deploys.claim_next(store.uow(), clock)
    engine = ScriptedEngine()

    def delete_after_the_first(spec):  # the operator deletes while the job is half way
        engine.on_run = None
        services.delete_service(store.uow(), engine, principal, service.id)

    engine.on_run = delete_after_the_first
    run_job(store.uow(), Deployer(clock, engine, DeploySettings(settle_seconds=3.0, drain_seconds=2.0,
                                                                health_timeout=5)), job)
    assert engine.containers(service.id) == []  # the second container, made after the delete, is gone too
    assert engine.removed_services == [service.id] * 3  # the delete, its sweep once the rows went, the job's
    with store.uow() as uow:
        assert uow.services.get(service.id) is None
        finished = uow.deploy_jobs.get(job.id)
    assert (finished.state, finished.error) == ("failed", "service deleted")
