"""Handlers of the partner API's webhook endpoints and their delivery log, and their
JSON shapes. Delivery itself is ``app.workers.webhooks``."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from app.partner.licensing import _page, _paged
from app.workers.webhooks import url_problem
from core.errors import Invalid
from core.partner import webhooks


def endpoint_json(endpoint, *, with_secret: bool = False) -> dict:
    out = {"id": endpoint.id, "url": endpoint.url, "events": list(endpoint.events),
           "createdAt": rfc3339(endpoint.created_at)}
    if with_secret:
        out["secret"] = endpoint.secret
    return out


def delivery_json(d) -> dict:
    return {"id": d.id, "eventId": d.event_id, "event": d.event, "status": d.status, "attempts": d.attempts,
            "lastStatusCode": d.last_status_code, "lastError": d.last_error, "createdAt": rfc3339(d.created_at),
            "deliveredAt": rfc3339(d.delivered_at)}


class WebhookHandlers:
    """The webhook operations of the partner API, one method each. ``lookups``: an
    ``app.engine_calls.EngineCalls`` pool for the URL check's DNS lookups, off the
    database threads; one partner holds a share of it at most. ``resolver``: the lookups
    themselves (``ports.resolver``)."""

    def __init__(self, store, clock, *, allow_private: bool, lookups, resolver):
        self.resolver = resolver
        self.store, self.clock, self.allow_private, self.lookups = store, clock, allow_private, lookups

    def handlers(self) -> dict:
        return {"createWebhook": self.create_webhook, "listWebhooks": self.list_webhooks,
                "getWebhook": self.get_webhook, "deleteWebhook": self.delete_webhook,
                "listWebhookDeliveries": self.list_deliveries}

    async def create_webhook(self, call):
        problem = url_problem(call.body["url"])  # before the DNS lookup: such a URL could never be sent to
        if problem is not None:
            raise Invalid("invalid webhook url", fields={"url": problem})
        target = await self.lookups.run_for(call.caller.partner.id, webhooks.check_url, call.body["url"],
                                            allow_private=self.allow_private, resolver=self.resolver)
        endpoint = await self.store.run(webhooks.create_endpoint, self.store.uow(), self.clock, call.caller,
                                        target=target, events=call.body.get("events"))
        return Reply(201, endpoint_json(endpoint, with_secret=True))

    async def list_webhooks(self, call):
        found = await self.store.run(webhooks.list_endpoints, self.store.uow(write=False), call.caller)
        return Reply(200, [endpoint_json(e) for e in found])

    async def get_webhook(self, call):
        found = await self.store.run(webhooks.get_endpoint, self.store.uow(write=False), call.caller,
                                     call.params["webhookId"])
        return Reply(200, endpoint_json(found))

    async def delete_webhook(self, call):
        await self.store.run(webhooks.delete_endpoint, self.store.uow(), call.caller, call.params["webhookId"])
        return Reply(204)

    async def list_deliveries(self, call):
        page = _page(call.params)
        found = await self.store.run(webhooks.list_deliveries, self.store.uow(write=False), call.caller,
                                     call.params["webhookId"], page)
        return Reply(200, _paged(found, page, delivery_json))
