"""Route records: with ``SLIPWAY_BASE_DOMAIN`` set, a running service is reached at
``https://<service name>.<base domain>``; its route record maps that hostname to the
upstream the engine published (``http://127.0.0.1:<host port>`` of its first published
port). The record is written in the transaction that marks the deploy a success and
removed in the transaction that deletes the service, so the database never holds a
route to a service that is gone. A reverse proxy is fed from these records
(``app.route_file``)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Route:
    hostname: str
    service_id: str
    target: str  # the upstream URL, e.g. http://127.0.0.1:49153
    created_at: datetime
    updated_at: datetime


def hostname(service_name: str, base_domain: str) -> str:
    return f"{service_name}.{base_domain.strip('.').lower()}"


def list_routes(uow) -> list[Route]:
    with uow.reading():
        return uow.routes.all()
