"""The behaviour hooks through the example plugin (examples/slipway-hello), installed with
``pip install`` into a folder of its own and found by a real server through its entry
point: its routes behind the panel's gate and in the served contract and MCP, its job,
its event subscriber (after commit, from the outbox, again after a crash mid-delivery)
and its auth source (a source that raises refuses with 401)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from app.workers.loop import WorkerLease
from tests.support.database import age_worker_leases
from tests.support.processes import slipway
from tests.support.servers import Server

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hello-shared-secret"
JSON_RPC = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def hello_site(tmp_path_factory) -> str:
    """examples/slipway-hello installed by pip into a folder of its own (never into the
    environment the other tests' servers run in)."""
    target = tmp_path_factory.mktemp("hello-site")
    built = tmp_path_factory.mktemp("hello-build")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-cache-dir", "--target", str(target), str(ROOT / "examples" / "slipway-hello")],
                   check=True, cwd=built, timeout=300)
    assert list(target.glob("slipway_hello-*.dist-info")), "pip installed the package with its entry point"
    return str(target)


@pytest.fixture
def left_in_engine():
    """The ids of the services a test made: what their deploys left in the engine (the
    servers' engine is the environment's ``SLIPWAY_RUNTIME_URL``, when set) goes at the
    end, the service's network included."""
    ids: list = []
    yield ids
    url = os.environ.get("SLIPWAY_RUNTIME_URL")
    if url and ids:
        from tests.support.engine import _factories, engine_settings

        engine = _factories()["podman"].create(engine_settings(url, os.environ.get("SLIPWAY_RUNTIME_ULIMITS", "")))
        for service_id in ids:
            engine.remove_service(service_id)


def _env(hello_site, folder, **extra) -> dict:
    return {"PYTHONPATH": os.pathsep.join([hello_site, str(ROOT)]), "SLIPWAY_HELLO_DIR": str(folder),
            "SLIPWAY_HELLO_TOKEN": TOKEN, "SLIPWAY_DEPLOY_WORKER": "1", **extra}


def _key(database_url, role: str, *extra: str) -> str:
    return slipway(database_url, "apikey", "create", "--name", role, "--role", role, "--rate-limit-rpm", "10000",
                   *extra)[1]["key"]


def _bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _wait(check, what: str, tries: int = 600):
    """Poll ``check()`` (each call a real request) until it answers something truthy."""
    import time

    for _ in range(tries):
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"never saw {what}")


def _seen(server, admin) -> dict:
    answer = httpx.get(server.base + "/api/ext/hello/seen", headers=_bearer(admin), timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_hook_register_routes_behind_the_gate_in_the_contract_and_mcp(migrated_database_url, hello_site, tmp_path):
    admin = _key(migrated_database_url, "admin")
    no_read = _key(migrated_database_url, "admin", "--deny", "services:read")
    viewer = _key(migrated_database_url, "viewer")
    with Server(migrated_database_url, **_env(hello_site, tmp_path / "hello")) as server:
        http = httpx.Client(base_url=server.base, timeout=30)
        assert http.get("/api/ext/hello/greeting").status_code == 401
        assert http.get("/api/ext/hello/greeting", headers=_bearer("slw_0000000000000000_" + "x" * 40)).status_code == 401
        refused = http.get("/api/ext/hello/greeting", headers=_bearer(no_read))
        assert refused.status_code == 403 and "services:read" in refused.json()["error"]["message"]
        hello = http.get("/api/ext/hello/greeting", headers=_bearer(admin))
        assert hello.status_code == 200, hello.text
        assert hello.json()["greeting"] == "hello, admin" and hello.json()["via"] == "key"
        assert "X-RateLimit-Limit" in hello.headers  # the panel's rate limit rode along

        # the request body is held to the plugin's schema before its code runs
        echo = "/api/ext/hello/echo"
        assert http.post(echo, json={"text": "hi"}, headers=_bearer(viewer)).status_code == 403
        said = http.post(echo, json={"text": "hi"}, headers=_bearer(admin))
        assert said.status_code == 201 and said.json() == {"echo": "hi", "by": None}
        for body in ({}, {"text": ""}, {"text": "hi", "extra": 1}, {"text": 5}):
            bad = http.post(echo, json=body, headers=_bearer(admin))
            assert bad.status_code == 422, (body, bad.text)
        assert http.post(echo, content=b"{", headers={**_bearer(admin), "Content-Type": "application/json"}
                         ).status_code == 400
        assert http.post(echo, content=b"text", headers={**_bearer(admin), "Content-Type": "text/plain"}
                         ).status_code == 415
        own = http.post(echo, json={"text": "forbidden word"}, headers=_bearer(admin))  # the plugin's own 4xx
        assert own.status_code == 422 and own.json()["error"]["fields"] == {"text": "must not be the forbidden word"}
        assert http.get("/api/ext/hello/nowhere").status_code == 401
        assert http.get("/api/ext/hello/nowhere", headers=_bearer(admin)).status_code == 404
        assert http.delete("/api/ext/hello/greeting", headers=_bearer(admin)).status_code == 405

        contract = yaml.safe_load(http.get("/api/openapi.yaml", headers=_bearer(admin)).text)
        operation = contract["paths"]["/api/ext/hello/greeting"]["get"]
        assert operation["operationId"] == "ext_hello_greeting" and operation["tags"] == ["hello"]
        assert operation["x-slipway-permission"] == "services:read"
        assert {"name": "hello"} .items() <= next(t for t in contract["tags"] if t["name"] == "hello").items()
        assert contract["paths"]["/api/ext/hello/echo"]["post"]["x-slipway-rate-tier"] == "deploy"

        # only the route whose plugin asked for it is an MCP tool
        tools = http.post("/api/mcp", headers={**JSON_RPC, **_bearer(admin)},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        assert tools.status_code == 200, tools.text
        names = {tool["name"] for tool in _rpc_result(tools)["tools"]}
        assert "hello_greeting" in names and "hello_echo" not in names and "hello_seen" not in names
        # the tool goes through the same gate: its answer is the route's, its permission the route's
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hello_greeting", "arguments": {}}}
        called = _rpc_result(http.post("/api/mcp", headers={**JSON_RPC, **_bearer(admin)}, json=call))
        assert called["isError"] is False, called
        assert json.loads(called["content"][0]["text"])["greeting"] == "hello, admin"
        assert http.post("/api/mcp", headers=JSON_RPC, json=call).status_code == 401
        listed = _rpc_result(http.post("/api/mcp", headers={**JSON_RPC, **_bearer(no_read)},
                                       json={"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}))
        assert "hello_greeting" not in {tool["name"] for tool in listed["tools"]}
        denied = _rpc_result(http.post("/api/mcp", headers={**JSON_RPC, **_bearer(no_read)}, json=call))
        body = json.loads(denied["content"][0]["text"])
        assert denied["isError"] is True and body["error"]["code"] == "forbidden", body
        assert "services:read" in body["error"]["message"]



def test_hook_register_jobs_run_in_the_server_again_and_again(migrated_database_url, hello_site, tmp_path):
    admin = _key(migrated_database_url, "admin")
    with Server(migrated_database_url, **_env(hello_site, tmp_path / "hello", SLIPWAY_HELLO_INTERVAL="0.2")) as server:
        _wait(lambda: _seen(server, admin)["ticks"] >= 3, "three runs of the plugin's job")
    with Server(migrated_database_url, **_env(hello_site, tmp_path / "off", SLIPWAY_DEPLOY_WORKER="0")) as server:
        assert _seen(server, admin)["ticks"] == 0  # a process that runs no workers runs no jobs


def _rpc_result(response) -> dict:
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]


def test_hook_register_auth_sources_admit_a_customer_and_one_that_raises_refuses(migrated_database_url, hello_site,
                                                                                    tmp_path, left_in_engine):
    admin = _key(migrated_database_url, "admin")
    with Server(migrated_database_url, **_env(hello_site, tmp_path / "hello")) as server:
        http = httpx.Client(base_url=server.base, timeout=30)
        mine = http.post("/api/customers", json={"name": "Mine"}, headers=_bearer(admin)).json()["id"]
        other = http.post("/api/customers", json={"name": "Other"}, headers=_bearer(admin)).json()["id"]
        theirs = http.post("/api/services", headers=_bearer(admin), json={
            "name": "theirs", "customer_id": other, "deploy_method": "compose",
            "compose": "services:\n  web:\n    image: localhost/busybox:latest\n"})
        assert theirs.status_code == 201, theirs.text
        left_in_engine.append(theirs.json()["id"])

        as_mine = {"X-Hello-Token": TOKEN, "X-Hello-Customer": mine}
        hello = http.get("/api/ext/hello/greeting", headers=as_mine)
        assert hello.status_code == 200, hello.text
        assert (hello.json()["greeting"], hello.json()["via"]) == (f"hello, {mine}", "source:hello")
        listed = http.get("/api/services", headers=as_mine)
        assert listed.status_code == 200 and listed.json()["data"] == []  # not the other customer's service
        assert http.get(f"/api/services/{theirs.json()['id']}", headers=as_mine).status_code == 404
        assert http.get("/api/customers", headers=as_mine).status_code == 403  # a customer's role, no more

        for headers in ({"X-Hello-Token": "explode"},  # the source raises: refused, never let through
                        {"X-Hello-Token": "explode", "X-Hello-Customer": mine},
                        {"X-Hello-Token": "wrong", "X-Hello-Customer": mine},
                        {"X-Hello-Token": TOKEN, "X-Hello-Customer": "cus_does_not_exist"},
                        {"X-Hello-Token": TOKEN}):
            refused = http.get("/api/services", headers=headers)
            assert refused.status_code == 401, (headers, refused.text)
        assert "refused" in http.get("/api/services", headers={"X-Hello-Token": "explode"}).json()["error"]["message"]
        # a valid key wins over the source's headers: the key's admin sees every service
        assert http.get("/api/services", headers={**as_mine, **_bearer(admin)}).json()["data"]


def _events(folder: Path) -> list[dict]:
    path = folder / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_hook_register_event_subscribers_after_commit_and_again_after_a_crash(migrated_database_url, hello_site,
                                                                                           tmp_path, left_in_engine):
    admin = _key(migrated_database_url, "admin")
    folder = tmp_path / "hello"
    crash = _env(hello_site, folder, SLIPWAY_HELLO_CRASH_ON="panel.service.status")
    server = Server(migrated_database_url, **crash)
    try:
        http = httpx.Client(base_url=server.base, timeout=30)
        customer = http.post("/api/customers", json={"name": "Acme"}, headers=_bearer(admin)).json()["id"]
        try:
            made = http.post("/api/services", headers=_bearer(admin), json={
                "name": "web", "customer_id": customer, "deploy_method": "compose",
                "compose": "services:\n  web:\n    image: localhost/busybox:latest\n"})
            assert made.status_code == 201, made.text
        except httpx.RemoteProtocolError:  # the delivery (after the commit) may stop the process before the answer
            made = None
        assert server.proc.wait(timeout=60) == 70  # the subscriber stopped the process mid-delivery
    finally:
        server.stop()
    first = _events(folder)
    crashed_on = int((folder / "crashed").read_text())
    assert [e["id"] for e in first if e["topic"] == "panel.service.status"] == [crashed_on]
    # the service the committed request made, answered or not
    service_id = next(e for e in first if e["id"] == crashed_on)["data"]["id"]
    left_in_engine.append(service_id)
    assert made is None or made.json()["id"] == service_id

    age_worker_leases(migrated_database_url)  # the minute the crashed process's lease takes to go stale
    with Server(migrated_database_url, **_env(hello_site, folder)) as server:
        again = _wait(lambda: [e for e in _events(folder) if e["id"] == crashed_on][1:],
                      "the interrupted event delivered again")
        assert again[0]["data"]["id"] == service_id
        # the deploy runs to its end (the engine may be off here: then it fails); its events follow.
        # If the crashed process had already claimed the deploy job, it is taken back once that
        # process's lease is stale (aged above; looked at on start and every RECOVER_S)
        bound = WorkerLease.RECOVER_S + 60  # + the deploy itself
        _wait(lambda: any(e["topic"] == "panel.service.status" and e["data"]["status"] in ("running", "failed")
                          for e in _events(folder)), "the deploy's last status", tries=int(bound * 10))
        _wait(lambda: {"panel.timeline", "panel.deploy.progress"} <= {e["topic"] for e in _events(folder)},
              "timeline and progress events")
    events = _events(folder)
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)  # in order, the interrupted one twice
    assert all(e["thread"].startswith("slipway-ext") for e in events)  # never in the request's own thread
    assert {e["service_id"] for e in events if e["topic"].startswith("panel.")} == {service_id}


def test_hook_register_event_subscribers_hear_partner_ledger_events(migrated_database_url, hello_site, tmp_path):
    _, partner = slipway(migrated_database_url, "partner", "create", "--name", "Reseller")
    _, token = slipway(migrated_database_url, "token", "create", "--partner", partner["id"], "--label", "t",
                       "--scope", "write")
    _, contract = slipway(migrated_database_url, "contract", "create", "--partner", partner["id"], "--model",
                          "per_instance_metered", "--currency", "EUR", "--unit-price-cents", "500")
    folder = tmp_path / "hello"
    with Server(migrated_database_url, **_env(hello_site, folder)) as server:
        partner_api = httpx.Client(base_url=server.base, headers=_bearer(token["token"]), timeout=30)
        customer = partner_api.post("/v1/customers", json={"name": "Ledgered"})
        assert customer.status_code == 201, customer.text
        made = partner_api.post("/v1/licenses", json={"customerId": customer.json()["id"], "contractId": contract["id"],
                                                      "edition": "web-host"})
        assert made.status_code == 201, made.text
        ledger = _wait(lambda: [e for e in _events(folder) if e["topic"] == "partner.ledger"], "a ledger event")
        assert ledger[0]["data"]["partner_id"] == partner["id"]
        assert ledger[0]["data"]["license_id"] == made.json()["license"]["id"]
        # an operator's command writes its ledger event to the outbox too: the server hands it over
        license_id = made.json()["license"]["id"]
        slipway(migrated_database_url, "license", "set-state", "--license", license_id, "--state", "expired",
                env=_env(hello_site, folder), process=True)
        by_command = _wait(lambda: [e for e in _events(folder) if e["topic"] == "partner.ledger"
                                    and e["data"]["event"] == "license.state_changed"], "the command's event")
        assert by_command[0]["data"]["license_id"] == license_id
