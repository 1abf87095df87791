"""What the bounded schemathesis run (tests/e2e/test_contract_fuzzing.py) found, each kept
as a plain regression test: the request that broke, and what the contract says instead."""
from __future__ import annotations

import pytest

from core.panel import access


@pytest.fixture
def admin(store, clock):
    return access.create_api_key(store.uow(), clock, name="admin key", role="admin", rate_limit_rpm=1000)[1]


@pytest.mark.parametrize("role", ["admin", "viewer"])
def test_an_empty_customer_id_for_a_role_without_one_is_422_not_500(client, admin, role):
    """It was 500: an empty ``customerId`` passed as absent, then failed the foreign key."""
    before = client.get("/api/v1/api-keys", token=admin, expect=200).json["total"]
    result = client.post("/api/v1/api-keys", token=admin, json_body={
        "name": "x", "role": role, "rateLimitRpm": 1, "deniedPermissions": [], "customerId": ""}, expect=422)
    assert result.json["error"]["fields"] == {"customerId": "is only for role customer"}
    assert client.get("/api/v1/api-keys", token=admin, expect=200).json["total"] == before


def test_an_empty_customer_id_for_role_customer_is_required(client, admin):
    result = client.post("/api/v1/api-keys", token=admin, json_body={
        "name": "x", "role": "customer", "rateLimitRpm": 1, "customerId": ""}, expect=422)
    assert result.json["error"]["fields"] == {"customerId": "is required for role customer"}
