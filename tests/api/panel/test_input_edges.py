"""Client input at the edges of what the contracts admit: timestamps Python cannot hold,
lower-case RFC 3339, huge page numbers, NUL characters. Each is a documented 4xx (or
plain success) and changes nothing; none is a 500."""
from __future__ import annotations

import pytest

from core.panel import access, customers as panel_customers


@pytest.fixture
def panel(client, store, clock):
    customer = panel_customers.create_customer(store.uow(), clock, name="Acme")
    key = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    return client, customer, key


def test_page_numbers_up_to_the_documented_maximum(panel):
    client, _, key = panel
    for path in ("/api/services", "/api/customers", "/api/templates", "/api/v1/api-keys"):
        assert client.get(path, token=key, params={"page": 1000000}, expect=200).json["data"] == []
        refused = client.get(path, token=key, params={"page": 10 ** 20}, expect=400).json
        assert "page" in refused["error"]["fields"]


def test_nul_characters_are_refused_before_the_database(panel, store):
    client, customer, key = panel
    assert "search" in client.get("/api/services", token=key, params={"search": "a\x00b"}, expect=400).json[
        "error"]["fields"]
    refused = client.post("/api/services", token=key, json_body={
        "name": "site", "customer_id": customer.id + "\x00", "deploy_method": "template",
        "template_id": "static-site"}, expect=422).json
    assert refused["error"]["fields"] == {"customer_id": "must not contain NUL characters"}
    refused = client.post("/api/customers", token=key, json_body={"name": "x", "email": None,
                                                                 "\x00": "y"}, expect=422).json
    assert refused["error"]["code"] == "validation_error"
    client.get("/api/services/svc_%00", token=key, expect=404)
    with store.uow() as uow:
        assert uow.services.page(page=1, per_page=10, status=None, customer_id=None, sort="name", order="asc",
                                 search=None)[1] == 0


def test_expiry_outside_what_a_clock_can_hold_is_422(panel):
    client, _, key = panel
    for value in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
        refused = client.post("/api/v1/api-keys", token=key, json_body={
            "name": "k", "role": "viewer", "rateLimitRpm": 10, "expiresAt": value}, expect=422).json
        assert "expiresAt" in refused["error"]["fields"]
    created = client.post("/api/v1/api-keys", token=key, json_body={
        "name": "k", "role": "viewer", "rateLimitRpm": 10, "expiresAt": "2999-01-01t00:00:00z"}, expect=201).json
    assert created["expiresAt"].startswith("2999-01-01T00:00:00")


def test_partner_time_filters_outside_the_calendar_are_422(acme):
    customer = acme.customer()
    base = f"/v1/customers/{customer['id']}/activity"
    refused = acme.call("GET", base, params={"from": "0001-01-01T00:00:00+01:00"}, expect=422).json
    assert refused["error"]["code"] == "unprocessable-entity"
    acme.call("GET", base, params={"from": "2026-01-01t00:00:00z"}, expect=200)


def test_search_takes_wildcards_literally(panel):
    client, _, key = panel
    for pattern in ("_", "%", "A_me", "\\"):
        assert client.get("/api/customers", token=key, params={"search": pattern}, expect=200).json["total"] == 0
    assert client.get("/api/customers", token=key, params={"search": "cm"}, expect=200).json["total"] == 1
