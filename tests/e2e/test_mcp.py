"""The MCP server at /api/mcp through `slipway serve` and the MCP SDK's own client
(``mcp.Client`` over ``streamable_http_client``), in both protocol eras the SDK speaks:
``legacy`` (the initialize handshake) and ``auto`` (2026-07-28, ``server/discover``).

Refusals of the HTTP request itself (no key, a cookie, a wrong method, the rate limit) are
checked with a plain HTTP client: the SDK client turns them into exceptions."""
from __future__ import annotations

import asyncio
import functools
import json
import os
import time

import httpx
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.processes import slipway
from tests.support.servers import Server

# the server imports the MCP SDK on the endpoint's first request (app/panel/mcp.py): on a
# machine the other tests keep busy that took longer than httpx's default 5 s
_post = functools.partial(httpx.post, timeout=30)
_get = functools.partial(httpx.get, timeout=30)
_request = functools.partial(httpx.request, timeout=30)

ALL_TOOLS = {"list_services", "get_service", "create_service", "update_service", "start_service", "stop_service",
             "restart_service", "redeploy_service", "delete_service", "get_logs", "get_events", "list_templates",
             "list_customers"}
READ_TOOLS = {"list_services", "get_service", "get_logs", "get_events", "list_templates", "list_customers"}
IMAGE = "localhost/busybox:latest"
# a line in the log at start, then a port that answers
COMPOSE = (f"services:\n  web:\n    image: {IMAGE}\n"
           "    command: [sh, -c, 'echo hello-from-mcp; exec httpd -f -p 8080 -h /etc']\n    ports: ['8080']\n")
JSON_RPC = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


class Panel:
    """A served panel and the keys of a test."""

    def __init__(self, server: Server, database_url: str):
        self.server, self.base, self.database_url = server, server.base, database_url
        self.admin = self.key("admin")
        self.http = httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {self.admin}"}, timeout=30)

    def key(self, role: str, *extra: str, rpm: int = 10000) -> str:
        _, made = slipway(self.database_url, "apikey", "create", "--name", role, "--role", role,
                          "--rate-limit-rpm", str(rpm), *extra)
        return made["key"]

    def customer(self, name: str) -> str:
        made = self.http.post("/api/customers", json={"name": name})
        assert made.status_code == 201, made.text
        return made.json()["id"]

    def service(self, customer_id: str, name: str) -> str:
        made = self.http.post("/api/services", json={"name": name, "customer_id": customer_id,
                                                     "deploy_method": "compose", "compose": COMPOSE})
        assert made.status_code == 201, made.text
        return made.json()["id"]

    def session(self, key: str, mode: str = "legacy"):
        return McpSession(self.base + "/api/mcp", key, mode)


class McpSession:
    """``async with`` an SDK client holding the key as Bearer header; ``call`` answers
    ``(is_error, the text as JSON or None)``."""

    def __init__(self, url: str, key: str, mode: str):
        self.url, self.key, self.mode = url, key, mode

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.key}"})
        await self.http.__aenter__()
        self.client = Client(streamable_http_client(self.url, http_client=self.http), mode=self.mode)
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc):
        await self.client.__aexit__(*exc)
        await self.http.__aexit__(*exc)

    async def tools(self) -> dict:
        return {tool.name: tool for tool in (await self.client.list_tools(cache_mode="bypass")).tools}

    async def call(self, name: str, arguments: dict | None = None):
        result = await self.client.call_tool(name, arguments or {})
        text = result.content[0].text if result.content else None
        return result.is_error, (json.loads(text) if text else None)


@pytest.fixture
def panel(migrated_database_url):
    with Server(migrated_database_url, SLIPWAY_RATE_DEPLOY_RPM="3") as server:
        panel = Panel(server, migrated_database_url)
        yield panel
        panel.http.close()


def test_the_http_request_needs_a_bearer_key(panel):
    url = panel.base + "/api/mcp"
    for headers in ({}, {"Authorization": "Bearer slw_0000000000000000_" + "x" * 40}, {"Authorization": "Basic eA=="}):
        refused = _post(url, json=TOOLS_LIST, headers={**JSON_RPC, **headers})
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["content-type"] == "application/json"
        assert "x-ratelimit-remaining" in refused.headers  # the per-address tier, as the panel API
    # a browser session (here a key session) is no credential for MCP: a page cannot call tools with it
    login = _post(panel.base + "/api/auth/key", json={"key": panel.admin}, headers={"X-Requested-With": "t"})
    assert login.status_code == 204, login.text
    cookie = login.cookies.get("slipway_session")
    assert cookie
    refused = _post(url, json=TOOLS_LIST, headers=JSON_RPC, cookies={"slipway_session": cookie})
    assert refused.status_code == 401, refused.text
    # two session cookies are 401 here too, even beside a key (docs/decisions.md "Tenant safety, second round")
    tossed = _post(url, json=TOOLS_LIST, headers={**JSON_RPC, "Authorization": f"Bearer {panel.admin}",
                                                        "Cookie": f"slipway_session=x; slipway_session={cookie}"})
    assert tossed.status_code == 401 and "two session cookies" in tossed.json()["error"]["message"], tossed.text

    admitted = _post(url, json=TOOLS_LIST, headers={**JSON_RPC, "Authorization": f"Bearer {panel.admin}"})
    assert admitted.status_code == 200, admitted.text
    assert admitted.headers["x-ratelimit-limit"] == "10000"  # the key's own bucket
    assert len(admitted.json()["result"]["tools"]) == 13
    # stateless: no stream to GET, no session to DELETE (the transport allows 405)
    for method in ("GET", "DELETE", "PUT"):
        other = _request(method, url, headers={"Authorization": f"Bearer {panel.admin}",
                                                    "Accept": "text/event-stream"})
        assert other.status_code == 405 and other.headers["allow"] == "POST", other.text
        assert other.json()["error"]["code"] == "bad_request"
    assert _get(url).status_code == 401  # authentication first, as everywhere under /api

    # stateless: every request is authenticated, so a revoked key stops at its next one
    viewer = panel.key("viewer")

    async def revoked_midway():
        async with panel.session(viewer) as mcp:
            assert (await mcp.call("list_templates"))[0] is False
            revoked = panel.http.delete(f"/api/v1/api-keys/{viewer.split('_')[1]}")
            assert revoked.status_code == 204, revoked.text
            with pytest.raises(MCPError):  # the SDK client's error for the HTTP 401
                await mcp.call("list_templates")

    asyncio.run(revoked_midway())
    assert _post(url, json=TOOLS_LIST, headers={**JSON_RPC, "Authorization": f"Bearer {viewer}"}).status_code == 401


def test_the_key_bucket_limits_the_requests(panel):
    key = panel.key("viewer", rpm=2)
    url = panel.base + "/api/mcp"
    answers = [_post(url, json=TOOLS_LIST, headers={**JSON_RPC, "Authorization": f"Bearer {key}"})
               for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429], [a.text for a in answers]
    assert answers[2].json()["error"]["code"] == "rate_limited"
    assert int(answers[2].headers["retry-after"]) >= 1
    assert answers[2].headers["x-ratelimit-remaining"] == "0"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_follow_the_keys_permissions(panel, mode):
    customer = panel.customer("Acme")
    keys = {"admin": panel.admin, "viewer": panel.key("viewer"),
            "customer": panel.key("customer", "--customer", customer),
            "no-delete": panel.key("admin", "--deny", "services:delete", "customers:read")}

    async def run():
        seen = {}
        for role, key in keys.items():
            async with panel.session(key, mode) as mcp:
                seen[role] = await mcp.tools()
                if role == "viewer":
                    refused = await mcp.call("create_service", {"name": "nope", "customer_id": customer,
                                                                "deploy_method": "compose", "compose": COMPOSE})
                    seen["viewer-create"] = refused
                    seen["viewer-list"] = await mcp.call("list_services")
                if role == "no-delete":
                    seen["no-delete-call"] = await mcp.call("delete_service", {"id": "svc_nothing"})
                    seen["no-delete-customers"] = await mcp.call("list_customers")
                seen[role + "-unknown"] = await mcp.call("drop_database")
        return seen

    seen = asyncio.run(run())
    assert set(seen["admin"]) == ALL_TOOLS
    assert set(seen["viewer"]) == READ_TOOLS  # no write tool
    assert set(seen["customer"]) == ALL_TOOLS - {"list_customers"}
    assert set(seen["no-delete"]) == ALL_TOOLS - {"delete_service", "list_customers"}
    is_error, body = seen["viewer-create"]
    assert is_error and body["error"]["code"] == "forbidden" and "services:create" in body["error"]["message"]
    assert seen["viewer-list"] == (False, {"data": [], "total": 0, "page": 1, "per_page": 20})
    assert panel.http.get("/api/services").json()["total"] == 0  # nothing was created
    for refused in ("no-delete-call", "no-delete-customers"):
        is_error, body = seen[refused]
        assert is_error and body["error"]["code"] == "forbidden", body
    is_error, body = seen["admin-unknown"]
    assert is_error and body["error"]["code"] == "not_found"

    schema = seen["admin"]["create_service"].input_schema  # built from the served contract
    assert {"name", "customer_id", "deploy_method", "compose"} <= set(schema["properties"])
    assert set(schema["required"]) == {"name", "customer_id", "deploy_method"}
    assert schema["properties"]["deploy_method"]["enum"] == ["ai", "compose", "git", "template"]
    logs = seen["admin"]["get_logs"].input_schema
    assert set(logs["properties"]) == {"id", "tail", "since"}  # no WebSocket-only follow or api_key
    assert logs["properties"]["tail"]["maximum"] == 10000
    assert seen["admin"]["get_service"].annotations.read_only_hint is True
    assert seen["admin"]["delete_service"].annotations.destructive_hint is True


def test_a_customer_key_reaches_no_other_customers_service(panel):
    mine, theirs = panel.customer("Mine"), panel.customer("Theirs")
    foreign = panel.service(theirs, "theirs-svc")  # no deploy worker here: it stays deploying
    key = panel.key("customer", "--customer", mine)

    async def run():
        async with panel.session(key, "auto") as mcp:
            found = {"list": await mcp.call("list_services"),
                     "list-theirs": await mcp.call("list_services", {"customer_id": theirs}),
                     "search": await mcp.call("list_services", {"search": "theirs"}),
                     "create-theirs": await mcp.call("create_service", {
                         "name": "intruder", "customer_id": theirs, "deploy_method": "compose",
                         "compose": COMPOSE})}
            for tool in ("get_service", "get_logs", "get_events", "start_service", "stop_service",
                         "restart_service", "redeploy_service", "delete_service"):
                found[tool] = await mcp.call(tool, {"id": foreign})
            return found

    found = asyncio.run(run())
    for name in ("list", "list-theirs", "search"):
        assert found[name] == (False, {"data": [], "total": 0, "page": 1, "per_page": 20}), found[name]
    is_error, body = found["create-theirs"]
    assert is_error and body["error"]["code"] == "forbidden" and "own customer" in body["error"]["message"], body
    for tool in ("get_service", "get_logs", "get_events", "start_service", "stop_service", "restart_service",
                 "redeploy_service", "delete_service"):
        is_error, body = found[tool]
        assert is_error and body["error"]["code"] == "not_found", (tool, body)
        assert "Theirs" not in json.dumps(body)
    still = panel.http.get(f"/api/services/{foreign}")
    assert still.status_code == 200 and still.json()["customer_id"] == theirs
    assert panel.http.get("/api/services", params={"search": "intruder"}).json()["total"] == 0


def test_tools_show_a_secret_variable_masked_and_none_reads_it(panel):
    """A database template's generated password: ``***`` in what create_service and
    get_service answer; no tool answers the clear value (only GET .../secrets does)."""
    acme = panel.customer("Acme")

    async def run():
        async with panel.session(panel.admin, "auto") as mcp:
            created = await mcp.call("create_service", {"name": "shop-db", "customer_id": acme,
                                                        "deploy_method": "template", "template_id": "postgres"})
            return created, await mcp.call("get_service", {"id": created[1]["id"]}), await mcp.tools()

    (created_error, created), (detail_error, detail), tools = asyncio.run(run())
    assert not created_error and not detail_error, (created, detail)
    assert detail["variables"]["POSTGRES_PASSWORD"] == "***"
    password = panel.http.get(f"/api/services/{created['id']}/secrets").json()["secrets"]["POSTGRES_PASSWORD"]
    assert len(password) == 32 and password not in json.dumps([created, detail])
    assert set(tools) == ALL_TOOLS  # no tool of /secrets


def test_invalid_arguments_are_tool_errors_naming_the_fields(panel):
    customer = panel.customer("Acme")

    async def run():  # three create_service calls: the fixture's deploy tier allows three a minute
        async with panel.session(panel.admin) as mcp:
            return {
                "no-id": await mcp.call("get_service"),
                "id-type": await mcp.call("get_service", {"id": 7}),
                "nul-id": await mcp.call("get_service", {"id": "svc_\x00"}),
                "per-page": await mcp.call("list_services", {"per_page": 1000}),
                "page-type": await mcp.call("list_services", {"page": "two"}),
                "page-bool": await mcp.call("list_services", {"page": True}),
                "status": await mcp.call("list_services", {"status": "sleeping"}),
                "unknown": await mcp.call("list_templates", {"colour": "red"}),
                "follow": await mcp.call("get_logs", {"id": "svc_x", "follow": True}),
                "tail": await mcp.call("get_logs", {"id": "svc_x", "tail": 0}),
                "since": await mcp.call("get_logs", {"id": "svc_x", "since": "yesterday"}),
                "body": await mcp.call("create_service", {"name": "x"}),
                "compose": await mcp.call("create_service", {"name": "ok-name", "customer_id": customer,
                                                             "deploy_method": "compose",
                                                             "compose": "services: {web: {privileged: true}}"}),
                "nul-body": await mcp.call("create_service", {"name": "a\x00", "customer_id": customer,
                                                              "deploy_method": "compose", "compose": COMPOSE}),
                "float-page": await mcp.call("list_services", {"page": 1.0, "per_page": 5}),
            }

    got = asyncio.run(run())

    def refused(name, code, field=None):
        is_error, body = got[name]
        assert is_error and body["error"]["code"] == code, (name, body)
        if field is not None:
            assert field in body["error"]["fields"], (name, body)
        return body["error"]

    refused("no-id", "validation_error", "id")
    assert refused("id-type", "validation_error", "id")["fields"]["id"] == "must be of type string"
    refused("nul-id", "not_found")
    assert "maximum" in refused("per-page", "bad_request", "per_page")["fields"]["per_page"]
    refused("page-type", "bad_request", "page")
    refused("page-bool", "bad_request", "page")
    refused("status", "bad_request", "status")
    assert refused("unknown", "validation_error", "colour")["fields"]["colour"] == "is not an argument of list_templates"
    refused("follow", "validation_error", "follow")
    refused("tail", "bad_request", "tail")
    refused("since", "bad_request", "since")
    refused("body", "validation_error", "customer_id")
    refused("compose", "validation_error")
    refused("nul-body", "validation_error", "name")
    assert got["float-page"] == (False, {"data": [], "total": 0, "page": 1, "per_page": 5})
    assert panel.http.get("/api/services").json()["total"] == 0


def test_deploy_tools_draw_on_the_deploy_tier(panel):
    customer = panel.customer("Acme")

    async def run():
        async with panel.session(panel.admin) as mcp:
            return [await mcp.call("create_service", {"name": f"tier-{i}", "customer_id": customer,
                                                      "deploy_method": "compose", "compose": COMPOSE})
                    for i in range(4)]

    answers = asyncio.run(run())
    assert [is_error for is_error, _ in answers] == [False, False, False, True], answers
    assert answers[0][1]["status"] == "deploying" and answers[0][1]["deploy_job_id"].startswith("job_")
    assert answers[3][1]["error"] == {"code": "rate_limited", "message": "rate limit exceeded"}


@pytest.mark.runtime
def test_a_compose_service_lives_and_dies_through_tools(migrated_database_url, runtime_url, engine_ulimits):
    from tests.support.engine import _factories, engine_settings

    env = {"SLIPWAY_RUNTIME_URL": runtime_url, "SLIPWAY_RUNTIME_ULIMITS": engine_ulimits,
           "SLIPWAY_DEPLOY_WORKER": "1", "SLIPWAY_HEALTH_INTERVAL": "1"}
    runtime = _factories()["podman"].create(engine_settings(runtime_url, engine_ulimits))
    made = []
    with Server(migrated_database_url, **env) as server:
        panel = Panel(server, migrated_database_url)
        customer = panel.customer("Acme")
        key = panel.key("customer", "--customer", customer)
        name = f"mcp-{os.getpid()}-{time.monotonic_ns() % 1000000}"

        async def run():
            async with panel.session(key, "auto") as mcp:
                is_error, created = await mcp.call("create_service", {
                    "name": name, "customer_id": customer, "deploy_method": "compose", "compose": COMPOSE})
                assert not is_error, created
                made.append(created["id"])
                deadline = time.monotonic() + 120
                while True:
                    is_error, detail = await mcp.call("get_service", {"id": created["id"]})
                    assert not is_error, detail
                    if detail["status"] == "running":
                        break
                    assert detail["status"] != "failed", await mcp.call("get_events", {"id": created["id"]})
                    assert time.monotonic() < deadline, detail
                    await asyncio.sleep(0.5)
                deadline = time.monotonic() + 60
                while True:  # the engine may take a moment to hand the first line over
                    is_error, logs = await mcp.call("get_logs", {"id": created["id"], "tail": 50})
                    assert not is_error, logs
                    if any("hello-from-mcp" in line["message"] for line in logs["logs"]):
                        break
                    assert time.monotonic() < deadline, logs
                    await asyncio.sleep(0.5)
                is_error, events = await mcp.call("get_events", {"id": created["id"]})
                assert not is_error and events["total"] >= 1, events
                is_error, listed = await mcp.call("list_services")
                assert [s["id"] for s in listed["data"]] == [created["id"]]
                deleted = await mcp.call("delete_service", {"id": created["id"]})
                assert deleted == (False, None), deleted
                gone = await mcp.call("get_service", {"id": created["id"]})
                assert gone[0] and gone[1]["error"]["code"] == "not_found", gone
                return detail

        try:
            detail = asyncio.run(run())
            assert detail["url"].startswith("http://127.0.0.1:")
            assert runtime.containers(made[0]) == []
        finally:
            panel.http.close()
            for service_id in made:
                runtime.remove_service(service_id)


@pytest.mark.runtime
def test_create_and_update_service_take_secret_variables_and_no_tool_shows_them(migrated_database_url, runtime_url,
                                                                                engine_ulimits):
    """``create_service`` and ``update_service`` take ``variables`` and
    ``secret_variables``; a secret's value is ``***`` in what every tool answers and is
    read only over REST, ``GET /api/services/{id}/secrets``; a name not among the
    variables is a tool error on ``secret_variables``."""
    from tests.support.engine import _factories, engine_settings

    env = {"SLIPWAY_RUNTIME_URL": runtime_url, "SLIPWAY_RUNTIME_ULIMITS": engine_ulimits,
           "SLIPWAY_DEPLOY_WORKER": "1", "SLIPWAY_HEALTH_INTERVAL": "1"}
    runtime = _factories()["podman"].create(engine_settings(runtime_url, engine_ulimits))
    made, token, rotated = [], "tok_3e9f1c2b8a7d6e5f", "tok_rotated_0a1b2c3d"
    with Server(migrated_database_url, **env) as server:
        panel = Panel(server, migrated_database_url)
        customer = panel.customer("Acme")
        name = f"mcp-vars-{os.getpid()}-{time.monotonic_ns() % 1000000}"

        async def run():
            answers = []
            async with panel.session(panel.admin, "auto") as mcp:
                refused = await mcp.call("create_service", {
                    "name": name, "customer_id": customer, "deploy_method": "compose", "compose": COMPOSE,
                    "variables": {"MODE": "x"}, "secret_variables": ["TOKEN"]})
                created = await mcp.call("create_service", {
                    "name": name, "customer_id": customer, "deploy_method": "compose", "compose": COMPOSE,
                    "variables": {"TOKEN": token, "MODE": "live"}, "secret_variables": ["TOKEN"]})
                assert not created[0], created
                made.append(created[1]["id"])
                answers.append(created)
                deadline = time.monotonic() + 120
                while True:
                    detail = await mcp.call("get_service", {"id": made[0]})
                    assert not detail[0], detail
                    if detail[1]["status"] == "running":
                        break
                    assert detail[1]["status"] != "failed" and time.monotonic() < deadline, detail
                    await asyncio.sleep(0.5)
                answers.append(detail)
                updated = await mcp.call("update_service", {
                    "id": made[0], "variables": {"TOKEN": rotated, "MODE": "live", "OTHER": "plain"},
                    "secret_variables": ["TOKEN"]})
                unknown = await mcp.call("update_service", {"id": made[0], "secret_variables": ["NOPE"]})
                answers += [updated, await mcp.call("get_service", {"id": made[0]}),
                            await mcp.call("get_events", {"id": made[0]}), await mcp.call("list_services")]
                return refused, unknown, answers

        try:
            refused, unknown, answers = asyncio.run(run())
            assert refused[0] and "secret_variables" in refused[1]["error"]["fields"], refused
            assert unknown[0] and "secret_variables" in unknown[1]["error"]["fields"], unknown
            assert all(not is_error for is_error, _ in answers), answers
            assert answers[1][1]["variables"] == {"TOKEN": "***", "MODE": "live"}
            assert answers[2][1]["variables"] == {"TOKEN": "***", "MODE": "live", "OTHER": "plain"}
            assert answers[2][1]["secret_variables"] == ["TOKEN"]
            shown = json.dumps(answers)
            assert token not in shown and rotated not in shown
            secrets = panel.http.get(f"/api/services/{made[0]}/secrets").json()["secrets"]
            assert secrets == {"TOKEN": rotated}
        finally:
            panel.http.close()
            for service_id in made:
                runtime.remove_service(service_id)


def test_malformed_mcp_requests_are_the_protocols_errors_never_a_500(panel):
    url = panel.base + "/api/mcp"
    auth = {**JSON_RPC, "Authorization": f"Bearer {panel.admin}"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    answers = {
        "not-json": _post(url, content=b"{nope", headers=auth),
        "too-big": _post(url, content=b"[" + b"1," * (600 * 1024) + b"1]", headers=auth),
        "media-type": _post(url, content=json.dumps(TOOLS_LIST), headers={**auth, "Content-Type": "text/plain"}),
        "batch": _post(url, json=[TOOLS_LIST, TOOLS_LIST], headers=auth),
        "arguments-list": _post(url, json={**call, "params": {"name": "list_services", "arguments": [1]}},
                                     headers=auth),
        "name-missing": _post(url, json={**call, "params": {}}, headers=auth),
        "unknown-method": _post(url, json={**call, "method": "resources/list"}, headers=auth),
        "deep": _post(url, json={**call, "params": {"name": "create_service", "arguments": {
            "name": "deep", "variables": {"a": [[[[[[[[[[["x"]]]]]]]]]]]}}}}, headers=auth),
    }
    for name, answer in answers.items():
        assert answer.status_code < 500, (name, answer.status_code, answer.text)
    assert answers["too-big"].status_code == 413  # declared too big: the panel's error, read no further
    assert answers["too-big"].json() == {"error": {"code": "bad_request", "message": "request body is larger than 1 MiB"}}
    assert answers["not-json"].status_code == 400
    result = answers["deep"].json()["result"]
    assert result["isError"] is True and json.loads(result["content"][0]["text"])["error"]["code"] == "validation_error"
    assert panel.http.get("/api/services").json()["total"] == 0
