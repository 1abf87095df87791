"""The kept host ports on the real database (SQLite, and PostgreSQL with
``SLIPWAY_DATABASE_URL``): replaced as a whole per service, read back per component,
container port and protocol, gone with their service (ON DELETE CASCADE)."""
from __future__ import annotations

from core.panel import customers as panel_customers
from core.panel.services import Service
from tests.support.fakes import FakeClock


def _service(store, clock, name: str) -> Service:
    customer = panel_customers.create_customer(store.uow(), clock, name=name)
    now = clock.now()
    service = Service(id=f"svc_{name}", name=name, customer_id=customer.id, deploy_method="compose",
                      status="running", created_at=now, updated_at=now, compose="services:\n  a: {image: x}\n")
    with store.uow() as uow:
        uow.services.add(service)
        uow.commit()
    return service


def test_kept_host_ports_are_replaced_read_and_go_with_their_service(store):
    clock = FakeClock()
    one, other = _service(store, clock, "one"), _service(store, clock, "other")
    first = {("web", 8080, "tcp"): 20001, ("web", 53, "udp"): 20002, ("api", 8080, "tcp"): 20003}
    with store.uow() as uow:
        uow.services.keep_host_ports(one.id, first, clock.now())
        uow.services.keep_host_ports(other.id, {("web", 8080, "tcp"): 20004}, clock.now())
        uow.commit()
    with store.uow() as uow:
        assert uow.services.host_ports(one.id) == first
    with store.uow() as uow:
        uow.services.keep_host_ports(one.id, {("web", 8080, "tcp"): 20005}, clock.now())  # replaces them all
        uow.commit()
    with store.uow() as uow:
        assert uow.services.host_ports(one.id) == {("web", 8080, "tcp"): 20005}
        uow.services.delete(one.id)
        uow.commit()
    with store.uow() as uow:
        assert uow.services.host_ports(one.id) == {}
        assert uow.services.host_ports(other.id) == {("web", 8080, "tcp"): 20004}
        assert store.db.execute_sql('SELECT COUNT(*) FROM "service_host_port"').fetchone()[0] == 1
