"""Helpers of the API tests (fixtures are in conftest.py)."""
from __future__ import annotations


def create_service(client, admin, acme, **body):
    """``POST /api/services`` of a service named ``app`` for ``acme``."""
    return client.post("/api/services", token=admin, json_body={"name": "app", "customer_id": acme.id, **body})


def send_at_once(client, method, path, n, *, token, json_body=None, headers=None):
    """``n`` copies of one request sent at once to ``client``'s app in process: one event
    loop runs them together (``ASGIConductor``), each waiting on the store's database
    threads, so they interleave as a server's would. Each answer is held to the contract."""
    import asyncio
    import json

    from falcon import testing

    sent = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **(headers or {})}
    body = json.dumps(json_body) if json_body is not None else None

    async def main():
        async with testing.ASGIConductor(client.app) as conductor:
            return await asyncio.gather(*(conductor.simulate_request(method, path, headers=sent, body=body)
                                          for _ in range(n)))

    results = asyncio.run(main())
    for result in results:
        client.check(method, path, result)
    return results


def idempotency_rows(store) -> int:
    with store.db.connection_context():
        return store.models.IdempotencyKey.select().count()
