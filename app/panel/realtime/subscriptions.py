"""Subscriptions of the channel ``GET /api/ws``: ``Connection``, what one client's key may
see (its customer's services only, ``service.logs`` with ``services:logs``,
``backup.progress`` with ``backups:read``) and what it narrowed itself to with
``subscribe`` messages (at most ``SUBSCRIBES_PER_S`` in any second, ``MAX_SUBSCRIBE``
service ids each)."""
from __future__ import annotations

import collections

from app.panel.realtime.sockets import Outbox
from core.errors import NotFound
from core.panel import services as core_services
from ports.events import Event

MAX_SUBSCRIBE = 200  # service ids in one subscribe message
SUBSCRIBES_PER_S = 5  # subscribe messages a connection may send in any one second


class Connection:
    """One ``/api/ws`` client: what its key may see and what it subscribed to."""

    def __init__(self, principal, limit: int):
        self.customer_id = principal.customer_id  # None: every customer (admin, viewer)
        self.may_logs = "services:logs" in principal.permissions
        self.may_backups = "backups:read" in principal.permissions
        self.services: set | None = None  # None: every service it may see
        self.log_services: set = set()
        self.outbox = Outbox(limit)
        self.subscribes: collections.deque = collections.deque()  # monotonic times of accepted subscribes

    def may_subscribe(self, now: float) -> bool:
        """At most ``SUBSCRIBES_PER_S`` accepted subscribes in any second (refused ones do not count)."""
        while self.subscribes and now - self.subscribes[0] >= 1.0:
            self.subscribes.popleft()
        if len(self.subscribes) >= SUBSCRIBES_PER_S:
            return False
        self.subscribes.append(now)
        return True

    def wants(self, event: Event) -> bool:
        if self.customer_id is not None and event.customer_id != self.customer_id:
            return False
        if event.type == "service.logs":
            return self.may_logs and (self.services is None or event.service_id in self.log_services)
        if event.type == "backup.progress" and not self.may_backups:
            return False
        return self.services is None or event.service_id in self.services


def visible_services(uow, principal, ids: list) -> list:
    """The services of ``ids`` that ``principal`` may see (the others are dropped)."""
    found = []
    with uow:
        for service_id in ids:
            try:
                found.append(core_services.visible(principal, uow.services.get(service_id), service_id))
            except NotFound:
                pass  # ids the key may not see are dropped
    return found
