"""Proxy route records (the hostname -> upstream table a reverse proxy is fed from, not
the HTTP routes of the APIs): with ``SLIPWAY_BASE_DOMAIN`` set, a running service is reached at
``https://<service name>.<base domain>``; its route record maps that hostname to the
upstream the engine published (``http://127.0.0.1:<host port>`` of its first published
port). The record is written in the transaction that marks the deploy a success and
removed in the transaction that deletes the service, so the database never holds a
route to a service that is gone. It follows the upstream: a start or restart (which may
publish another host port) writes it again from the engine's answer; a stop, a
restart's beginning, a redeploy's clean slate, a failed deploy and a service found
failed remove it first, so a host port the service gave up (and another tenant may get)
never receives its hostname. Each custom domain of the service (``core.panel.domains``)
has a record of its own to the same upstream, with or without a base domain. A reverse
proxy is fed from these records by a route provider (``ports.routes``,
``app.workers.proxy_routes``)."""
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


def hostnames(uow, service, base_domain: str | None) -> list[str]:
    """The names the service answers to: ``<name>.<base domain>`` (with a base domain)
    and each of its custom domains (``uow.custom_domains``). A custom domain under the
    base domain (claimed before the operator set or changed ``SLIPWAY_BASE_DOMAIN``; PATCH
    refuses them since) gets no record: those names are the services' own, and a record
    would take another service's name over (``replace_for``)."""
    own = [hostname(service.name, base_domain)] if base_domain else []
    base = (base_domain or "").strip(".").lower()
    return own + [d for d in uow.custom_domains.for_service(service.id)
                  if d not in own and not (base and (d == base or d.endswith("." + base)))]


def follow(uow, service, target: str, base_domain: str | None, now) -> None:
    """In the caller's transaction: the service's records (its name under the base
    domain, when there is one, and one per custom domain) all point at ``target``; with
    ``target`` "" (nothing published) they are all gone."""
    if not target:
        uow.routes.delete_for(service.id)
        return
    uow.routes.replace_for(service.id, [Route(name, service.id, target, now, now)
                                        for name in hostnames(uow, service, base_domain)])


def current_target(uow, service, base_domain: str | None) -> str:
    """The upstream the service is routed to now, "" when none: the target of its
    records or, without a base domain, the ``url`` of a running service (which is then
    its upstream)."""
    for route in uow.routes.for_service(service.id):
        return route.target
    if not base_domain and service.status == "running" and (service.url or "").startswith("http://"):
        return service.url
    return ""


def list_routes(uow) -> list[Route]:
    with uow.reading():
        return uow.routes.all()
