"""peewee repositories of partner webhook endpoints and their delivery queue."""
from __future__ import annotations

import json

from core.partner.webhooks import Delivery, Endpoint
from ports.storage.partner import WebhookDeliveryRepository, WebhookEndpointRepository


class PeeweeWebhookEndpoints(WebhookEndpointRepository):
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> Endpoint:
        return Endpoint(id=row.id, partner_id=row.partner_id, url=row.url, events=tuple(json.loads(row.events)),
                        secret=row.secret, created_at=row.created_at)

    def add(self, endpoint: Endpoint) -> None:
        self.m.WebhookEndpoint.insert(id=endpoint.id, partner=endpoint.partner_id, url=endpoint.url,
                                      events=json.dumps(list(endpoint.events)), secret=endpoint.secret,
                                      created_at=endpoint.created_at).execute()

    def get(self, endpoint_id: str) -> Endpoint | None:
        row = self.m.WebhookEndpoint.get_or_none(self.m.WebhookEndpoint.id == endpoint_id)
        return self._entity(row) if row else None

    def list_for_partner(self, partner_id: str) -> list[Endpoint]:
        W = self.m.WebhookEndpoint
        return [self._entity(r) for r in
                W.select().where(W.partner == partner_id).order_by(W.created_at.desc(), W.id.desc())]

    def count_for_partner(self, partner_id: str) -> int:
        W = self.m.WebhookEndpoint
        return W.select().where(W.partner == partner_id).count()

    def for_partners(self, partner_ids: list[str]) -> list[Endpoint]:
        W = self.m.WebhookEndpoint
        return [self._entity(r) for r in
                W.select().where(W.partner.in_(list(partner_ids))).order_by(W.created_at, W.id)]

    def delete(self, endpoint_id: str) -> None:
        self.m.WebhookEndpoint.delete().where(self.m.WebhookEndpoint.id == endpoint_id).execute()


class PeeweeWebhookDeliveries(WebhookDeliveryRepository):
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> Delivery:
        return Delivery(id=row.id, endpoint_id=row.endpoint_id, event_id=row.event_id, event=row.event,
                        status=row.status, attempts=row.attempts, last_status_code=row.last_status_code,
                        last_error=row.last_error, created_at=row.created_at, delivered_at=row.delivered_at,
                        next_attempt_at=row.next_attempt_at, claimed_by=row.claimed_by,
                        claimed_until=row.claimed_until)

    def add(self, delivery: Delivery) -> None:
        d = delivery
        self.m.WebhookDelivery.insert(
            id=d.id, endpoint=d.endpoint_id, event_id=d.event_id, event=d.event, status=d.status,
            attempts=d.attempts, last_status_code=d.last_status_code, last_error=d.last_error,
            created_at=d.created_at, delivered_at=d.delivered_at, next_attempt_at=d.next_attempt_at,
            claimed_by=d.claimed_by, claimed_until=d.claimed_until).execute()

    def for_endpoint(self, endpoint_id: str, page) -> list[Delivery]:
        D = self.m.WebhookDelivery
        rows = (D.select().where(D.endpoint == endpoint_id).order_by(D.event_id.desc(), D.id.desc())
                .limit(page.limit).offset(page.offset))
        return [self._entity(r) for r in rows]

    def delete_for_endpoint(self, endpoint_id: str) -> int:
        D = self.m.WebhookDelivery
        return D.delete().where(D.endpoint == endpoint_id).execute()

    def _claimable(self, now):
        D = self.m.WebhookDelivery
        return (D.status == "pending") & (D.claimed_until.is_null() | (D.claimed_until < now))

    def due(self, now, exclude, limit: int) -> list[Delivery]:
        D = self.m.WebhookDelivery
        where = self._claimable(now) & (D.next_attempt_at <= now)
        if exclude:
            where &= D.endpoint.not_in(list(exclude))
        rows = D.select().where(where).order_by(D.next_attempt_at, D.event_id, D.id).limit(limit)
        return [self._entity(r) for r in rows]

    def claim(self, delivery_id: str, owner: str, now, until) -> Delivery | None:
        D = self.m.WebhookDelivery
        changed = (D.update(claimed_by=owner, claimed_until=until)
                   .where((D.id == delivery_id) & self._claimable(now) & (D.next_attempt_at <= now)).execute())
        return self._entity(D.get(D.id == delivery_id)) if changed == 1 else None

    def finish(self, delivery: Delivery, owner: str) -> bool:
        D, d = self.m.WebhookDelivery, delivery
        changed = (D.update(status=d.status, attempts=d.attempts, last_status_code=d.last_status_code,
                            last_error=d.last_error, delivered_at=d.delivered_at,
                            next_attempt_at=d.next_attempt_at, claimed_by=d.claimed_by,
                            claimed_until=d.claimed_until)
                   .where((D.id == d.id) & (D.claimed_by == owner) & (D.status == "pending")).execute())
        return changed == 1

