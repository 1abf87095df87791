"""Services on a real engine, through a real uvicorn server: template and compose deploys
reach running, answer HTTP on their url, stop, start, restart, redeploy, show logs and
events, and are deleted with nothing left in the engine. Once through the Podman client
and once through the Docker client (Podman serves Docker's API on the same socket)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
import pytest

from app.contract import Contract
from tests.e2e.test_cli_and_server import free_port, slipway
from tests.integration.test_runtime_conformance import engine_ulimits  # noqa: F401 (a fixture)

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"

COMPOSE = """
services:
  backend:
    image: localhost/busybox:latest
    command: ["sh", "-c", "echo from-backend-$$HOSTNAME > /srv/index.html; head -c 300000 /dev/zero > /srv/pad; echo backend up; exec httpd -f -p 8080 -h /srv"]
    volumes: ["data:/srv"]
    cpus: 0.5
  web:
    image: localhost/busybox:latest
    depends_on: [backend]
    command: ["sh", "-c", "mkdir -p /www; while true; do wget -q -O /www/index.html http://backend:8080/ && break; sleep 0.3; done; echo web up; exec httpd -f -p 8080 -h /www"]
    ports: ["8080"]
    cpus: 1
    mem_limit: 128m
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "-", "http://127.0.0.1:8080/"]
      interval: 1s
      retries: 30
volumes:
  data: {}
"""


def admin_key(database_url) -> str:
    """A fresh schema and an admin key for it, made with the operator CLI."""
    slipway(database_url, "init")
    _, key = slipway(database_url, "apikey", "create", "--name", "it", "--role", "admin", "--rate-limit-rpm", "10000")
    return key["key"]


def serve_panel(key: str, env: dict, stderr=subprocess.PIPE):
    """``slipway serve`` on a free port with ``env``; returns the process and an httpx
    client holding every answer to the contract, once the server answers."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"},
                          timeout=30, event_hooks={"response": [_check_contract]})
    deadline = time.monotonic() + 20
    while True:
        try:
            client.get("/api/openapi.yaml")
            return server, client
        except httpx.TransportError:
            assert server.poll() is None, _output(server, stderr)
            assert time.monotonic() < deadline
            time.sleep(0.1)


def _output(server, stderr) -> str:
    if hasattr(stderr, "seek"):  # a log file
        stderr.seek(0)
        return stderr.read()
    return server.stderr.read() if server.stderr else "the server exited"


@pytest.fixture(params=["podman", "docker"])
def panel(request, runtime_url, database_url, engine_ulimits):
    key = admin_key(database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_RUNTIME=request.param,
               SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_BILLING_INTERVAL="0")
    server, client = serve_panel(key, env)
    customer = client.post("/api/customers", json={"name": "Acme"}).json()
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())[request.param].create(runtime_url, ulimits=env["SLIPWAY_RUNTIME_ULIMITS"])
    made = []
    yield client, customer, engine, made
    for service_id in made:
        engine.remove_service(service_id)
    client.close()
    server.terminate()
    server.wait(timeout=20)


_PANEL = Contract.load("panel", deploy_methods=["ai", "compose", "git", "template"])
_ROUTES = [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", op.route) + "$"), op) for op in _PANEL.operations]


def _check_contract(response):
    """Every answer of the real server is held to the panel contract too."""
    response.read()
    request = response.request
    op = next((op for rx, op in _ROUTES if rx.match(request.url.path) and op.method == request.method), None)
    assert op is not None, f"{request.method} {request.url.path} is not in the contract"
    schema = _PANEL.response_schema(op.method, op.route, response.status_code)
    if schema is None or response.status_code == 204 or "yaml" in response.headers.get("content-type", ""):
        return
    errors = list(_PANEL.validator(schema).iter_errors(response.json()))
    assert not errors, f"{request.method} {request.url.path} {response.status_code}: {errors[0].message}"


def _until(client, service_id, status, seconds=90):
    deadline = time.monotonic() + seconds
    while True:
        detail = client.get(f"/api/services/{service_id}").json()
        if detail["status"] == status:
            return detail
        events = client.get(f"/api/services/{service_id}/events").json()["data"]
        assert detail["status"] != "failed" or status == "failed", events
        assert time.monotonic() < deadline, (detail, events)
        time.sleep(0.3)


def _get(url, seconds=30):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return httpx.get(url, timeout=5).text
        except httpx.TransportError:
            assert time.monotonic() < deadline
            time.sleep(0.3)


def test_template_service_lifecycle(panel):
    client, customer, engine, made = panel
    created = client.post("/api/services", json={
        "name": f"site-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "template", "template_id": "static-site",
        "variables": {"IMAGE": IMAGE, "TITLE": "Hello from Slipway"}})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    assert created.json()["status"] == "deploying" and created.json()["deploy_job_id"].startswith("job_")
    detail = _until(client, service_id, "running")
    assert detail["url"].startswith("http://127.0.0.1:") and detail["template"] == "static-site"
    assert detail["variables"]["TITLE"] == "Hello from Slipway" and detail["customer_name"] == "Acme"
    assert "Hello from Slipway" in _get(detail["url"])

    stopped = client.post(f"/api/services/{service_id}/stop").json()
    assert stopped["status"] == "stopped" and stopped["message"] == "service stopped"
    assert client.post(f"/api/services/{service_id}/stop").json()["message"] == "service already stopped"
    assert all(not c.running for c in engine.containers(service_id))
    health = client.get(f"/api/services/{service_id}").json()["health"]
    assert (health["status"], health["consecutive_failures"]) == ("unknown", 0)  # not checked while stopped
    assert client.post(f"/api/services/{service_id}/start").json()["status"] == "running"
    assert "Hello" in _get(client.get(f"/api/services/{service_id}").json()["url"])
    assert client.post(f"/api/services/{service_id}/restart").json()["message"] == "service restarted"

    redeployed = client.post(f"/api/services/{service_id}/redeploy").json()
    assert redeployed["status"] == "deploying"
    detail = _until(client, service_id, "running")
    assert "Hello from Slipway" in _get(detail["url"])  # the page lives on the kept volume

    logs = client.get(f"/api/services/{service_id}/logs", params={"tail": 5}).json()["logs"]
    assert isinstance(logs, list)
    events = client.get(f"/api/services/{service_id}/events").json()
    kinds = {(e["type"], e["status"]) for e in events["data"]}
    assert {("deploy", "started"), ("deploy", "success"), ("stop", "success"), ("start", "success"),
            ("restart", "success"), ("redeploy", "success")} <= kinds

    assert client.delete(f"/api/services/{service_id}").status_code == 204
    assert client.get(f"/api/services/{service_id}").status_code == 404
    assert engine.labelled(service_id) == {"containers": [], "volumes": [], "networks": []}


def test_compose_service_with_two_containers(panel):
    client, customer, engine, made = panel
    created = client.post("/api/services", json={
        "name": f"stack-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose", "compose": COMPOSE})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    detail = _until(client, service_id, "running")
    assert "from-backend-" in _get(detail["url"])
    assert len(engine.containers(service_id)) == 2
    resources = detail["resources"]
    assert resources["cpu_limit"] == 150.0  # 0.5 + 1 core, in percent of one core
    assert resources["storage_mb"] >= 0.28 and resources["memory_usage_mb"] > 0  # the 300 kB pad
    listed = client.get("/api/services", params={"search": detail["name"]}).json()["data"]
    assert listed[0]["resources"]["memory_usage_mb"] > 0
    messages = [line["message"] for line in client.get(f"/api/services/{service_id}/logs").json()["logs"]]
    assert "backend up" in messages and "web up" in messages
    deadline = time.monotonic() + 30
    while client.get(f"/api/services/{service_id}").json()["health"]["status"] != "healthy":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert client.delete(f"/api/services/{service_id}").status_code == 204
    assert engine.labelled(service_id) == {"containers": [], "volumes": [], "networks": []}


def test_a_failing_deploy_ends_failed_with_the_reason(panel):
    client, customer, engine, made = panel
    created = client.post("/api/services", json={
        "name": f"broken-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose",
        "compose": "services:\n  app:\n    image: localhost/busybox:latest\n    command: [sh, -c, 'echo boom >&2; exit 3']\n"})
    service_id = created.json()["id"]
    made.append(service_id)
    _until(client, service_id, "failed")
    failed = [e for e in client.get(f"/api/services/{service_id}/events").json()["data"] if e["status"] == "failed"]
    assert failed and "boom" in failed[0]["message"]
    assert client.delete(f"/api/services/{service_id}").status_code == 204

    ghost = client.post("/api/services", json={
        "name": f"ghost-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose",
        "compose": "services:\n  app:\n    image: localhost/slipway-no-such-image:none\n"}).json()["id"]
    made.append(ghost)
    _until(client, ghost, "failed")
    failed = [e for e in client.get(f"/api/services/{ghost}/events").json()["data"] if e["status"] == "failed"]
    assert failed and "localhost/slipway-no-such-image:none" in failed[0]["message"], failed
    assert engine.labelled(ghost)["containers"] == []


def test_start_up_reconciles_services_with_the_engine(panel, database_url):
    """Containers that vanished behind Slipway's back are noticed from their labels."""
    from app.storage.store import Store
    from core import deploys
    from ports.clock import SystemClock

    client, customer, engine, made = panel
    created = client.post("/api/services", json={
        "name": f"gone-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose", "compose": "services:\n  app:\n    image: localhost/busybox:latest\n"
                                               "    command: [sleep, '600']\n"}).json()
    made.append(created["id"])
    _until(client, created["id"], "running")
    for state in engine.containers(created["id"]):
        engine.remove_container(state.id)
    store = Store(database_url, threads=1)
    try:
        assert deploys.reconcile(store.uow(), SystemClock(), engine) == [created["id"]]
    finally:
        store.close()
    detail = client.get(f"/api/services/{created['id']}").json()
    assert detail["status"] == "failed"
    events = client.get(f"/api/services/{created['id']}/events").json()["data"]
    assert "missing from the engine" in events[0]["message"]


def test_a_service_deleted_while_deploying_leaves_nothing_behind(panel):
    """The spec allows delete from any state: the deploy job, finding its service gone
    when it ends, removes what it made after the delete."""
    client, customer, engine, made = panel
    slow = ("services:\n  app:\n    image: localhost/busybox:latest\n"
            "    command: [sh, -c, 'sleep 3; exec httpd -f -p 8080']\n    healthcheck:\n"
            "      test: [CMD, wget, -q, -O, /dev/null, 'http://127.0.0.1:8080/']\n      interval: 1s\n"
            "      retries: 30\n    ports: ['8080']\n")
    created = client.post("/api/services", json={
        "name": f"gone-early-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose", "compose": slow}).json()
    made.append(created["id"])
    deadline = time.monotonic() + 60
    while not engine.labelled(created["id"])["containers"]:  # the job is starting containers
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert client.get(f"/api/services/{created['id']}").json()["status"] == "deploying"
    assert client.delete(f"/api/services/{created['id']}").status_code == 204
    assert client.get(f"/api/services/{created['id']}").status_code == 404
    deadline = time.monotonic() + 120
    while engine.labelled(created["id"]) != {"containers": [], "volumes": [], "networks": []}:
        assert time.monotonic() < deadline, engine.labelled(created["id"])
        time.sleep(0.3)
