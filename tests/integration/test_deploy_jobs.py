"""Deploy jobs against a real database and a scripted engine: a service deleted while its
job runs loses whatever the job made after the delete."""
from __future__ import annotations

from core import deploys, panel_access, panel_customers, services
from core.containers import SERVICE_LABEL
from plugins.deploy_compose import parse_compose
from ports.runtime import ContainerState

TWO = ("services:\n  a:\n    image: localhost/busybox:latest\n"
       "  b:\n    image: localhost/busybox:latest\n    depends_on: [a]\n")


class ScriptedEngine:
    """Keeps containers in a dict; ``on_run`` runs after each container is created."""

    def __init__(self):
        self.containers_by_id, self.on_run, self.removed_services = {}, None, []

    def has_image(self, image):
        return True

    def create_network(self, name, labels):
        pass

    def create_volume(self, name, labels):
        pass

    def run(self, spec):
        cid = f"c{len(self.containers_by_id)}"
        self.containers_by_id[cid] = ContainerState(cid, spec.name, "running", True, None, {}, dict(spec.labels))
        if self.on_run:
            self.on_run(spec)
        return cid

    def containers(self, service_id):
        return [c for c in self.containers_by_id.values() if c.labels.get(SERVICE_LABEL) == service_id]

    def remove_container(self, cid):
        self.containers_by_id.pop(cid, None)

    def remove_service(self, service_id):
        self.removed_services.append(service_id)
        for c in self.containers(service_id):
            del self.containers_by_id[c.id]


def test_a_service_deleted_during_its_deploy_leaves_nothing(store, clock):
    from app.pluginmanager import deploy_methods, make_plugin_manager, templates

    pm = make_plugin_manager()
    customer = panel_customers.create_customer(store.uow(), clock, name="Acme")
    _, key = panel_access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=100)
    principal = panel_access.authenticate_key(store.uow(), clock, key)
    service, _ = services.create_service(store.uow(), clock, principal, {
        "name": "short-lived", "customer_id": customer.id, "deploy_method": "compose", "compose": TWO},
        deploy_methods(pm), templates(pm))
    job = deploys.claim_next(store.uow(), clock)
    engine = ScriptedEngine()

    def delete_after_the_first(spec):  # the operator deletes while the job is half way
        engine.on_run = None
        services.delete_service(store.uow(), engine, principal, service.id)

    engine.on_run = delete_after_the_first
    deploys.run_job(store.uow(), clock, engine, job, parse_compose, wait_seconds=5)
    assert engine.containers(service.id) == []  # the second container, made after the delete, is gone too
    assert engine.removed_services == [service.id, service.id]
    with store.uow() as uow:
        assert uow.services.get(service.id) is None
        finished = uow.deploy_jobs.get(job.id)
    assert finished.state == "failed" and "removed during the deploy" in finished.error
