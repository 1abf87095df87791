"""Route records: with ``SLIPWAY_BASE_DOMAIN`` set, a running service is reached at
``https://<service name>.<base domain>``; its route record maps that hostname to the
upstream the engine published (``http://127.0.0.1:<host port>`` of its first published
port). The record is written in the transaction that marks the deploy a success and
removed in the transaction that deletes the service, so the database never holds a
route to a service that is gone. It follows the upstream: a start or restart (which may
publish another host port) writes it again from the engine's answer; a stop, a
restart's beginning, a redeploy's clean slate, a failed deploy and a service found
failed remove it first, so a host port the service gave up (and another tenant may get)
never receives its hostname. A reverse proxy is fed from these records
(``app.workers.route_file``)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.panel.containers import COMPONENT_LABEL


@dataclass(frozen=True)
class Route:
    hostname: str
    service_id: str
    target: str  # the upstream URL, e.g. http://127.0.0.1:49153
    created_at: datetime
    updated_at: datetime


def hostname(service_name: str, base_domain: str) -> str:
    return f"{service_name}.{base_domain.strip('.').lower()}"


def upstream(plan, states) -> str:
    """``http://127.0.0.1:<host port>`` of the plan's first published port, from the
    engine's container ``states`` (``ports.runtime.ContainerState``), or ""."""
    by_component = {s.labels.get(COMPONENT_LABEL): s for s in states}
    for component in plan.components:
        state = by_component.get(component.name)
        for port in component.ports:
            host = state.ports.get(port.container_port) if state else None
            if host:
                return f"http://127.0.0.1:{host}"
    return ""


def follow(uow, service, target: str, base_domain: str | None, now) -> None:
    """In the caller's transaction: the service's record points at ``target``, or is gone
    (no base domain, or nothing published)."""
    if base_domain and target:
        uow.routes.put(Route(hostname(service.name, base_domain), service.id, target, now, now))
    else:
        uow.routes.delete_for(service.id)


def list_routes(uow) -> list[Route]:
    with uow.reading():
        return uow.routes.all()
