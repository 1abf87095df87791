"""The customer network in core (``core.panel.networks``) and the masking of secret
variables (``core.panel.secrets``): names, aliases, connections, what a deploy attaches,
and when the network goes."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.errors import Forbidden, Invalid
from core.panel import networks, secrets, services
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeResolver, parse

COMPOSE = ("services:\n  web:\n    image: localhost/busybox:latest\n    ports: ['8080', '8443']\n"
           "  worker:\n    image: localhost/busybox:latest\n")


def _service(**changes):
    from datetime import datetime

    now = datetime(2026, 1, 1)
    return replace(services.Service(id="svc_1", name="shop", customer_id="cust_a", deploy_method="compose",
                                    status="running", created_at=now, updated_at=now, compose=COMPOSE), **changes)


def test_names_aliases_and_connections():
    plan = parse(COMPOSE, {})
    service = _service(customer_network=True)
    web, worker = {c.name: c for c in plan.components}["web"], {c.name: c for c in plan.components}["worker"]
    assert networks.network_name("cust_a") == "slw-net-cust_a"
    assert networks.aliases(service, plan, web) == ("shop", "shop-web")  # publishes a port: the service's name
    assert networks.aliases(service, plan, worker) == ("shop-worker",)
    assert networks.attachments(service, plan, web) == (("slw-net-cust_a", ("shop", "shop-web")),)
    assert networks.connections(service, plan) == [{"component": "web", "host": "shop", "port": 8080},
                                                   {"component": "web", "host": "shop", "port": 8443}]
    off = _service()
    assert networks.attachments(off, plan, web) == () and networks.connections(off, plan) == []
    assert networks.connections(service, None) == []
    quiet = parse("services:\n  b:\n    image: x\n  a:\n    image: x\n", {})
    assert networks.primary(quiet).name == quiet.components[0].name


def test_masking_and_keeping():
    assert secrets.masked({"P": "x", "D": "app"}, ("P",)) == {"P": "***", "D": "app"}
    assert secrets.masked(None, ()) == {}
    stored = {"P": "old", "D": "app"}
    assert secrets.kept({"P": "***", "D": "shop"}, stored, ("P",)) == {"P": "old", "D": "shop"}
    assert secrets.kept({"D": "shop"}, stored, ("P",)) == {"P": "old", "D": "shop"}
    assert secrets.kept({"P": "new"}, stored, ("P",)) == {"P": "new"}
    assert secrets.kept({"D": "***"}, stored, ("P",)) == {"D": "***", "P": "old"}  # only secret ones are kept
    with pytest.raises(Invalid):
        secrets.kept("nope", stored, ("P",))


def test_clear_values_need_the_permission(admin):
    service = _service(variables={"P": "x", "D": "app"}, secrets=("P",))
    assert secrets.clear(service, admin) == {"P": "x"}

    class Viewer:
        def require(self, permission):
            raise Forbidden(f"needs {permission}")

    with pytest.raises(Forbidden, match="services:secrets"):
        secrets.clear(service, Viewer())


def test_a_deploy_attaches_its_containers_and_the_last_one_out_removes_the_network(uow, clock, admin, customer,
                                                                                   methods, runtime):
    quota = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id, "customer_network": True},
                                     methods, {}, quota)
    specs, run = [], runtime.run
    runtime.run = lambda spec: specs.append(spec) or run(spec)
    runtime.remove_network = lambda name: runtime.calls.append(("remove_network", name))
    run_job(uow, Deployer(clock, runtime, DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0,
                                                         registry_allow_private=True, quota=quota), resolver=FakeResolver()), job)
    net = f"slw-net-{customer.id}"
    assert ("create_network", net) in runtime.calls
    assert [s.networks for s in specs] == [((net, ("web", "web-web")),)]
    with uow:
        assert uow.services.on_customer_network(customer.id) == 1
    services.delete_service(uow, runtime, admin, job.service_id)
    assert runtime.calls[-1] == ("remove_network", net)
