"""Two attacks of the second tenant-safety round through a real `slipway serve` process
with an operator's settings (docs/decisions.md "Tenant safety, second round"): a service
named after the panel's own host is 422 on `name`, and a compose of many tiny containers
(`mem_limit: 6m`) is held to the containers limit (the default, 50), both changing
nothing while the panel keeps answering."""
from __future__ import annotations

import httpx

from tests.e2e.test_ws_credentials import _key, db  # noqa: F401 (db: a fixture)
from tests.support.servers import Server

PUBLIC = "https://panel.example.com"


def _auth(key: dict) -> dict:
    return {"Authorization": f"Bearer {key['key']}"}


def _services(server, key) -> int:
    listed = httpx.get(server.base + "/api/services", headers=_auth(key), timeout=20)
    assert listed.status_code == 200, listed.text
    return listed.json()["total"]


def _compose(count: int) -> str:
    return "services:\n" + "".join(f"  c{i}:\n    image: x\n    mem_limit: 6m\n    cpus: 0.01\n"
                                   for i in range(count))


def test_a_service_cannot_take_the_panels_host_nor_hundreds_of_tiny_containers(db):
    admin = _key(db)
    with Server(db, SLIPWAY_BASE_DOMAIN="example.com", SLIPWAY_PUBLIC_URL=PUBLIC) as server:
        made = httpx.post(server.base + "/api/customers", headers=_auth(admin), json={"name": "Tenant"}, timeout=20)
        assert made.status_code == 201, made.text
        customer = made.json()["id"]

        def create(name: str, compose: str) -> httpx.Response:
            return httpx.post(server.base + "/api/services", headers=_auth(admin), timeout=20, json={
                "name": name, "customer_id": customer, "deploy_method": "compose", "compose": compose})

        taken = create("panel", _compose(1))  # panel.example.com: the panel's own host
        assert taken.status_code == 422, taken.text
        error = taken.json()["error"]
        assert error["code"] == "validation_error" and list(error["fields"]) == ["name"], error
        assert "panel.example.com" in error["fields"]["name"]

        many = create("swarm-of-tiny", _compose(51))  # 51 x 6 MB fits the memory limit, not 50 containers
        assert many.status_code == 409, many.text
        assert many.json()["error"]["code"] == "conflict" and "containers" in many.json()["error"]["message"]
        assert _services(server, admin) == 0  # nothing was created by either

        fits = create("fifty", _compose(50))  # the default limit itself is allowed
        assert fits.status_code == 201, fits.text
        assert create("one-more", _compose(1)).status_code == 409
        assert _services(server, admin) == 1
        assert httpx.get(server.base + "/healthz", timeout=20).status_code == 200
