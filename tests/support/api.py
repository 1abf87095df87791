"""Helpers of the API tests (fixtures are in conftest.py)."""
from __future__ import annotations


def create_service(client, admin, acme, **body):
    """``POST /api/services`` of a service named ``app`` for ``acme``."""
    return client.post("/api/services", token=admin, json_body={"name": "app", "customer_id": acme.id, **body})
