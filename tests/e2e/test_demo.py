"""``make run``'s demo step (``python -m app.cli.demo``), run twice in a fresh directory:
the frontend's URL from HOST and PORT, a working admin API key and partner token (the
previous run's are revoked), one demo customer and partner reused, and a template ready
to deploy."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

from app.cli.demo import frontend_url
from tests.support.processes import slipway
from tests.support.servers import Server


def _demo(tmp_path, url, **env) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-m", "app.cli.demo"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, SLIPWAY_DATABASE_URL=url, PYTHONPATH=os.getcwd(), **env))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_the_demo_prints_a_url_and_a_key_and_can_run_twice(tmp_path):
    url = f"sqlite:///{tmp_path}/demo.db"
    slipway(url, "init")
    first, hint = _demo(tmp_path, url, HOST="0.0.0.0", PORT="8123")
    assert first["frontend"] == "http://127.0.0.1:8123/"
    assert "http://127.0.0.1:8123/" in hint and first["apiKey"]["key"] in hint
    # the template it says is ready, with the address of the create form opened on it
    assert "template static-site" in hint and "http://127.0.0.1:8123/create?template=static-site" in hint
    second, _ = _demo(tmp_path, url, HOST="127.0.0.1", PORT="9000")
    assert second["frontend"] == "http://127.0.0.1:9000/"
    assert second["customer"] == first["customer"] and second["partner"] == first["partner"]
    assert second["template"]["id"] == "static-site" and second["apiKey"]["role"] == "admin"
    _, tokens = slipway(url, "token", "list", "--partner", first["partner"]["id"])
    assert [(t["id"], t["revokedAt"] is None) for t in tokens["tokens"]] == [
        (second["token"]["id"], True), (first["token"]["id"], False)]  # newest first
    with Server(url) as server:
        def get(path, key):
            return httpx.get(server.base + path, headers={"Authorization": f"Bearer {key}"}, timeout=20)

        customers = get("/api/customers", second["apiKey"]["key"]).json()["data"]
        assert [c["id"] for c in customers] == [first["customer"]["id"]]
        assert "static-site" in [t["id"] for t in get("/api/templates", second["apiKey"]["key"]).json()["data"]]
        assert get("/api/services", first["apiKey"]["key"]).status_code == 401  # the earlier run's key is revoked
        assert get("/v1/me", first["token"]["token"]).status_code == 401  # and its partner token too
        assert get("/v1/me", second["token"]["token"]).status_code == 200
        signed_in = httpx.post(server.base + "/api/auth/key", json={"key": second["apiKey"]["key"]},
                               headers={"X-Requested-With": "slipway"}, timeout=20)
        assert signed_in.status_code == 204


def test_frontend_url():
    assert frontend_url(None, None) == "http://127.0.0.1:8000/"
    assert frontend_url("::", "8080") == "http://127.0.0.1:8080/"
    assert frontend_url("::1", "8080") == "http://[::1]:8080/"
    assert frontend_url("panel.local", "80") == "http://panel.local:80/"


def test_after_the_demo_a_license_is_made_with_the_api_alone(tmp_path):
    """The demo makes the partner's contract and prints its id; `GET /v1/contracts` and
    `slipway contract list` show it, and a partner customer and a license are then made
    with the printed token alone."""
    url = f"sqlite:///{tmp_path}/demo.db"
    slipway(url, "init")
    demo, said = _demo(tmp_path, url)
    contract = demo["contract"]
    assert contract["partnerId"] == demo["partner"]["id"] and contract["id"] in said
    again, _ = _demo(tmp_path, url)
    assert again["contract"] == contract  # a second run keeps it
    _, listed = slipway(url, "contract", "list", "--partner", demo["partner"]["id"])
    assert listed == [contract]
    with Server(url) as server:
        with httpx.Client(base_url=server.base, timeout=20,
                          headers={"Authorization": f"Bearer {again['token']['token']}"}) as partner:
            page = partner.get("/v1/contracts").json()
            assert page == {"data": [contract], "limit": 50, "offset": 0}
            customer = partner.post("/v1/customers", json={"name": "Globex"})
            assert customer.status_code == 201, customer.text
            wrong = partner.post("/v1/licenses", json={"customerId": customer.json()["id"],
                                                       "contractId": contract["id"], "edition": "gold"})
            assert wrong.status_code == 422 and "web-host" in wrong.text  # the known editions are named
            made = partner.post("/v1/licenses", json={"customerId": customer.json()["id"],
                                                      "contractId": contract["id"], "edition": "web-host"})
            assert made.status_code == 201, made.text
            assert made.json()["license"]["contractId"] == contract["id"] and made.json()["key"]
