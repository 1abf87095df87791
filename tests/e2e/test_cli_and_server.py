"""The operator CLI and a real uvicorn server, driven the way an operator would."""
from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from tests.support.http import wait_answering
from tests.support.partners import UUID_RE
from tests.support.processes import free_port, slipway


@pytest.fixture
def initialised(migrated_database_url):
    """A database with the latest schema, copied from the tests' migrated template (what
    ``slipway init`` makes: test_operator_commands_print_json runs init itself)."""
    return migrated_database_url


def test_operator_commands_print_json(database_url):
    """Each command a process of its own, as an operator runs them."""
    url = database_url
    _, first = slipway(url, "init", process=True)
    _, again = slipway(url, "init", process=True)  # idempotent: the second applies nothing
    assert first["applied"] and again["applied"] == [] and again["schemaVersion"] == first["schemaVersion"]
    _, root = slipway(url, "partner", "create", "--name", "Operator", "--type", "root", process=True)
    assert UUID_RE.match(root["id"]) and root["type"] == "root" and root["parentId"] is None
    _, child = slipway(url, "partner", "create", "--name", "Reseller", "--parent", root["id"], process=True)
    assert set(child) == {"id", "name", "type", "parentId", "createdAt"}
    assert child["parentId"] == root["id"] and child["type"] == "reseller"
    _, token = slipway(url, "token", "create", "--partner", child["id"], "--label", "ops", "--scope", "read",
                       process=True)
    assert token["token"].startswith("pcp_") and token["scope"] == "read" and token["createdBy"] is None
    _, contract = slipway(url, "contract", "create", "--partner", child["id"], "--model", "per_instance_metered",
                          "--currency", "EUR", "--unit-price-cents", "990", process=True)
    assert contract["partnerId"] == child["id"] and contract["unitPriceCents"] == 990
    _, listed = slipway(url, "contract", "list", "--partner", child["id"], process=True)
    assert listed == [contract]
    _, none = slipway(url, "contract", "list", "--partner", root["id"], process=True)
    assert none == []  # a parent's list holds its own contracts only
    _, plugins = slipway(url, "plugins", process=True)
    assert "per_instance_metered" in plugins["billingModels"]


@pytest.mark.parametrize("args, status, code", [
    (["partner", "create"], 2, "usage"),
    (["partner", "create", "--name", "x", "--type", "vendor"], 2, "usage"),
    (["partner", "create", "--name", "x", "--bogus"], 2, "usage"),
    (["partner", "create", "--name", "x", "--parent", "not-a-uuid"], 1, "unprocessable-entity"),
    (["partner", "create", "--name", "x", "--parent", "7d1f0c2a-0000-4000-8000-000000000000"], 1, "not-found"),
    (["partner", "create", "--name", " "], 1, "unprocessable-entity"),
    (["token", "create", "--partner", "7d1f0c2a-0000-4000-8000-000000000000", "--label", "x", "--scope", "read"],
     1, "not-found"),
    (["token", "create", "--partner", "x", "--label", "x", "--scope", "admin"], 2, "usage"),
    (["contract", "create", "--partner", "7d1f0c2a-0000-4000-8000-000000000000", "--model", "flat",
      "--currency", "EUR", "--unit-price-cents", "1"], 1, "unprocessable-entity"),
    (["contract", "create", "--partner", "7d1f0c2a-0000-4000-8000-000000000000", "--model",
      "per_instance_metered", "--currency", "EUR", "--unit-price-cents", "ten"], 2, "usage"),
    (["contract", "list", "--partner", "7d1f0c2a-0000-4000-8000-000000000000"], 1, "not-found"),
    (["contract", "list"], 2, "usage"),
    (["frobnicate"], 2, "usage"),
    ([], 2, "usage"),
])
def test_bad_operator_input_is_a_json_error(initialised, args, status, code):
    returncode, document = slipway(initialised, *args, check=False)
    assert returncode == status
    assert document["error"]["code"] == code and document["error"]["message"]


def test_a_refusal_naming_a_field_carries_it_as_the_api_does(initialised):
    returncode, document = slipway(initialised, "apikey", "create", "--name", "x", "--role", "customer",
                                   check=False, process=True)
    assert returncode == 1
    assert document["error"] == {"code": "unprocessable-entity",
                                 "message": "invalid API key (customerId: is required for role customer)",
                                 "fields": {"customerId": "is required for role customer"}}
    _, keys = slipway(initialised, "apikey", "list")
    assert keys == {"apiKeys": []}  # nothing made


def test_commands_refuse_an_uninitialised_database(database_url):
    returncode, document = slipway(database_url, "partner", "create", "--name", "x", check=False)
    assert returncode == 1 and "slipway init" in document["error"]["message"]


@pytest.mark.parametrize("name", ["PC_RATE_RPS", "PC_RATE_BURST", "PC_AUTHFAIL_RPS"])
def test_serve_refuses_to_start_with_a_bad_limit(initialised, name):
    returncode, document = slipway(initialised, "serve", "--port", str(free_port()), env={name: "0"}, check=False)
    assert returncode == 1 and name in document["error"]["message"]


def test_served_end_to_end(initialised):
    url = initialised
    _, partner = slipway(url, "partner", "create", "--name", "Demo")
    _, token = slipway(url, "token", "create", "--partner", partner["id"], "--label", "demo", "--scope", "write")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)],
                              env=dict(os.environ, SLIPWAY_DATABASE_URL=url), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        contract = wait_answering(f"{base}/v1/openapi.yaml", alive=lambda: server.poll() is None, seconds=20,
                                  said=lambda: server.stderr.read() if server.poll() is not None else "server did not start")
        assert contract.status_code == 200 and "openapi: 3.0" in contract.text
        headers = {"Authorization": f"Bearer {token['token']}"}
        me = httpx.get(f"{base}/v1/me", headers=headers, timeout=5)
        assert me.status_code == 200
        assert me.json() == {"partnerId": partner["id"], "name": "Demo", "type": "reseller", "scope": "write"}
        minted = httpx.post(f"{base}/v1/tokens", headers=headers, json={"label": "ci", "scope": "read"}, timeout=5)
        assert minted.status_code == 201
        revoked = httpx.delete(f"{base}/v1/tokens/{minted.json()['id']}", headers=headers, timeout=5)
        assert revoked.status_code == 204
        refused = httpx.get(f"{base}/v1/me", headers={"Authorization": f"Bearer {minted.json()['token']}"},
                            timeout=5)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        missing = httpx.get(f"{base}/v1/no-such-route", timeout=5)
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("application/json")
        _kept_alive_past_five_seconds(port)
    finally:
        server.terminate()
        server.wait(timeout=20)


def _kept_alive_past_five_seconds(port: int) -> None:
    """An idle keep-alive connection outlives the 5 s after which clients such as httpx drop
    theirs (uvicorn's own default is 5 s too: a client reusing one as the server closes it
    got "connection reset by peer" in CI). This waits 6 s of the clock on purpose: the idle
    time-out is what it tests."""
    import socket
    import time

    request = b"GET /v1/no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        for _ in range(2):
            sock.sendall(request)
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                assert chunk, "the server closed the kept-alive connection"
                answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:")))
            while len(body) < length:
                body += sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 404"), head
            time.sleep(6)


def test_edition_map_commands(initialised):
    url = initialised
    _, listed = slipway(url, "edition", "list")
    assert listed["editions"] == {"power-user": "power-user", "web-host": "web-host", "web-pro": "web-pro"}
    _, changed = slipway(url, "edition", "set", "enterprise", "--policy", "9d4c1f2e-policy")
    assert changed["editions"]["enterprise"] == "9d4c1f2e-policy"
    _, again = slipway(url, "edition", "set", "enterprise", "--policy", "other")  # safe to run twice
    assert again["editions"]["enterprise"] == "other"
    for args in (["edition", "set", "Not Valid", "--policy", "x"], ["edition", "set", "x", "--policy", " "]):
        status, document = slipway(url, *args, check=False)
        assert status == 1 and document["error"]["code"] == "unprocessable-entity"
    status, document = slipway(url, "edition", "set", "x", check=False)
    assert status == 2 and document["error"]["code"] == "usage"


def test_license_state_and_transfer_sync_commands(initialised):
    url = initialised
    from app.config import Config
    from app.storage.store import Store
    from core.partner import customers, licenses
    from core.partner.identity import Caller
    from plugins.license_embedded import EmbeddedLicenseService

    _, partner = slipway(url, "partner", "create", "--name", "Ops")
    _, contract = slipway(url, "contract", "create", "--partner", partner["id"], "--model", "per_instance_metered",
                          "--currency", "EUR", "--unit-price-cents", "100")
    config = Config.from_env({"SLIPWAY_DATABASE_URL": url})
    store = Store(url, threads=1)
    try:
        from core.partner.partners import get_partner
        from core.partner.tokens import create_token

        owner = get_partner(store.uow(), partner["id"])
        token, _ = create_token(store.uow(), config.clock, partner_id=owner.id, label="x", scope="write",
                                created_by=None)
        caller = Caller(partner=owner, token=token)
        customer = customers.create_customer(store.uow(), config.clock, caller, {"name": "C"})
        lic, _ = licenses.issue_license(store.uow(), config.clock, EmbeddedLicenseService(store.db), caller,
                                        customer_id=customer.id, contract_id=contract["id"], edition="web-host")
    finally:
        store.close()
    _, trial = slipway(url, "license", "set-state", "--license", lic.id, "--state", "trial")
    assert trial["state"] == "trial" and trial["id"] == lic.id
    _, expired = slipway(url, "license", "set-state", "--license", lic.id, "--state", "expired")
    assert expired["state"] == "expired"
    status, document = slipway(url, "license", "set-state", "--license", lic.id, "--state", "terminated",
                               check=False)
    assert status == 2
    status, document = slipway(url, "license", "set-state", "--license", "nope", "--state", "trial", check=False)
    assert status == 1 and document["error"]["code"] == "unprocessable-entity"
    _, failures = slipway(url, "transfer", "sync-failures")
    assert failures == {"transfers": []}


def test_billing_and_statement_commands(initialised):
    url = initialised
    _, partner = slipway(url, "partner", "create", "--name", "Billed")
    _, recomputed = slipway(url, "billing", "recompute")
    assert partner["id"] in recomputed["partners"] and recomputed["computedAt"]
    _, again = slipway(url, "billing", "recompute", "--partner", partner["id"])  # safe to run twice
    assert again["partners"] == [partner["id"]]
    period = recomputed["period"]
    _, final = slipway(url, "statement", "finalize", "--partner", partner["id"], "--period", period, "--by", "ops")
    assert final["revision"] == 1 and final["status"] == "finalized" and final["finalizedBy"] == "ops"
    assert final["totals"] == [] and final["lines"] == []
    status, document = slipway(url, "statement", "finalize", "--partner", partner["id"], "--period", period,
                               check=False)
    assert status == 1 and document["error"]["code"] == "conflict"
    _, corrected = slipway(url, "statement", "correct", "--statement", final["id"])
    assert corrected["revision"] == 2 and corrected["supersedesStatementId"] == final["id"]
    _, skipped = slipway(url, "billing", "recompute", "--partner", partner["id"], "--period", period)
    assert skipped["partners"] == []  # a finalized period is not recomputed
    for args, code in [(["billing", "recompute", "--period", "2026-13"], "unprocessable-entity"),
                       (["billing", "recompute", "--period", "nov"], "unprocessable-entity"),
                       (["billing", "recompute", "--period", "2999-01"], "unprocessable-entity"),
                       (["billing", "recompute", "--partner", "7d1f0c2a-0000-4000-8000-000000000000"], "not-found"),
                       (["statement", "correct", "--statement", "7d1f0c2a-0000-4000-8000-000000000000"],
                        "not-found"),
                       (["statement", "finalize", "--partner", partner["id"], "--period", "1999-01"],
                        "not-found")]:
        status, document = slipway(url, *args, check=False)
        assert status == 1 and document["error"]["code"] == code, (args, document)


def test_apikey_create_command(initialised):
    url = initialised
    _, key = slipway(url, "apikey", "create", "--name", "bootstrap", "--role", "admin", "--rate-limit-rpm", "600",
                     "--deny", "backups:write", "services:delete")
    assert key["key"].startswith(key["keyPrefix"] + "_") and key["role"] == "admin"
    assert key["deniedPermissions"] == ["backups:write", "services:delete"] and key["rateLimitRpm"] == 600
    for args, status, code in [
        (["apikey", "create", "--name", "x", "--role", "customer"], 1, "unprocessable-entity"),
        (["apikey", "create", "--name", "x", "--role", "customer", "--customer", "cust_nope"], 1, "unprocessable-entity"),
        (["apikey", "create", "--name", "x", "--role", "viewer", "--deny", "root"], 1, "unprocessable-entity"),
        (["apikey", "create", "--name", "x", "--role", "viewer", "--expires-at", "tomorrow"], 1,
         "unprocessable-entity"),
        (["apikey", "create", "--name", "x", "--role", "owner"], 2, "usage"),
    ]:
        returncode, document = slipway(url, *args, check=False)
        assert (returncode, document["error"]["code"]) == (status, code), (args, document)
