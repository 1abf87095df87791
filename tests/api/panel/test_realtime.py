"""The WebSocket operations seen as plain HTTP (the upgrades themselves run through a real
server in tests/e2e/test_realtime.py): the gate first, then 400 asking for the upgrade;
and the status events the use cases put on their unit of work."""
from __future__ import annotations

import pytest

from core.panel import access, customers
from ports.events import EventBus


@pytest.fixture
def setup(client, store, clock):
    acme = customers.create_customer(store.uow(), clock, name="Acme")

    def key(role, **kw):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000, **kw)[1]

    return client, acme, key


def test_the_channel_needs_an_upgrade_after_the_gate(setup):
    client, _, key = setup
    assert client.get("/api/ws").json["error"]["code"] == "unauthorized"
    assert client.get("/api/ws", params={"api_key": key("admin")}, expect=401).json  # query key: upgrades only
    denied = client.get("/api/ws", token=key("viewer", denied_permissions=["services:read"]), expect=403)
    assert "services:read" in denied.json["error"]["message"]
    plain = client.get("/api/ws", token=key("viewer"), expect=400).json["error"]
    assert plain["code"] == "bad_request" and "WebSocket" in plain["message"]


def test_follow_without_an_upgrade_is_400(setup):
    client, acme, key = setup
    admin = key("admin")
    service = client.post("/api/services", token=admin, json_body={
        "name": "site", "customer_id": acme.id, "deploy_method": "template", "template_id": "static-site"},
        expect=201).json
    answer = client.get(f"/api/services/{service['id']}/logs", token=admin, params={"follow": "true"}, expect=400)
    assert "upgrade" in answer.json["error"]["message"]
    assert client.get(f"/api/services/{service['id']}/logs", token=admin, params={"follow": "maybe"},
                      expect=400).json["error"]["fields"] == {"follow": "must be of type boolean"}


class RecordingBus(EventBus):
    def __init__(self):
        self.events = []

    def publish(self, event):
        self.events.append(event)

    def subscribe(self, callback):
        return None

    def unsubscribe(self, handle):
        pass


def test_status_changes_are_announced_after_commit(setup, store):
    client, acme, key = setup
    bus = RecordingBus()
    store.bus = bus  # the app set its own; units of work made from now on use this one
    admin = key("admin")
    created = client.post("/api/services", token=admin, json_body={
        "name": "site", "customer_id": acme.id, "deploy_method": "template", "template_id": "static-site"},
        expect=201).json
    client.post("/api/services", token=admin, json_body={  # a conflict rolls back: nothing announced
        "name": "site", "customer_id": acme.id, "deploy_method": "template", "template_id": "static-site"},
        expect=409)
    assert [(e.type, e.data, e.service_id, e.customer_id) for e in bus.events] == [
        ("service.status", {"id": created["id"], "status": "deploying"}, created["id"], acme.id)]
