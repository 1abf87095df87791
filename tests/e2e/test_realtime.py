"""The real-time WebSockets through a real uvicorn server, a real engine and a real
WebSocket client (``websockets``): the channel ``/api/ws`` (deploy progress and status
in order, customer scoping, refusals as HTTP answers, log pumps, slow clients) and log
following on ``/api/services/{id}/logs``; and two server processes sharing events
through PostgreSQL ``LISTEN/NOTIFY``.

The channel tests run the server in this process (uvicorn in a thread) so they can look
at its threads and connections: closing a follow socket must end the engine streams.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import httpx
import pytest
import uvicorn
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.support.database import POSTGRES
from tests.support.http import wait_answering
from tests.support.processes import free_port, slipway

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"
DEADLINE_S = 90
SLEEPER = f"services:\n  app:\n    image: {IMAGE}\n    command: [sleep, '600']\n"
TICKER = (f"services:\n  app:\n    image: {IMAGE}\n"
          "    command: [sh, -c, 'i=0; while true; do i=$$((i+1)); echo tick-$$i; usleep 200000; done']\n")


def _name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 1000000}"


class Panel:
    """A running server: its base URL, an admin HTTP client, keys and the app (in-process)."""

    def __init__(self, base: str, admin_key: str, database_url: str, app=None):
        self.base, self.admin_key, self.database_url, self.app = base, admin_key, database_url, app
        self.ws_base = base.replace("http://", "ws://")
        self.http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin_key}"}, timeout=30)
        self.made: list[str] = []

    def key(self, role: str, *extra) -> str:
        _, made = slipway(self.database_url, "apikey", "create", "--name", role, "--role", role,
                          "--rate-limit-rpm", "10000", *extra)
        return made["key"]

    def customer(self, name: str) -> dict:
        return self.http.post("/api/customers", json={"name": name}).json()

    def create(self, customer: dict, compose: str = SLEEPER, prefix: str = "rt") -> str:
        created = self.http.post("/api/services", json={"name": _name(prefix), "customer_id": customer["id"],
                                                        "deploy_method": "compose", "compose": compose})
        assert created.status_code == 201, created.text
        self.made.append(created.json()["id"])
        return created.json()["id"]

    def until(self, service_id: str, status: str) -> dict:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            detail = self.http.get(f"/api/services/{service_id}").json()
            if detail["status"] == status:
                return detail
            assert detail["status"] != "failed", self.http.get(f"/api/services/{service_id}/events").json()
            assert time.monotonic() < deadline, detail
            time.sleep(0.3)

    def ws(self, path: str, key: str | None = None, *, header: bool = False, **kwargs):
        headers = {}
        if key is not None and header:
            headers["Authorization"] = f"Bearer {key}"
        elif key is not None:
            path += ("&" if "?" in path else "?") + f"api_key={key}"
        return connect(self.ws_base + path, additional_headers=headers, open_timeout=20, **kwargs)


def _wait_http(base: str, key: str, alive=lambda: True):
    wait_answering(base + "/api/openapi.yaml", alive=alive, seconds=30, headers={"Authorization": f"Bearer {key}"})


def _env(database_url, runtime_url, ulimits, **extra):
    return dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=ulimits, SLIPWAY_DATABASE_URL=database_url,
                SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_BILLING_INTERVAL="0", **extra)


@pytest.fixture
def panel(runtime_url, migrated_database_url, engine_ulimits):
    """Slipway under uvicorn in a thread of this process."""
    from app.config import Config
    from app.factory import create_app

    _, admin = slipway(migrated_database_url, "apikey", "create", "--name", "rt", "--role", "admin",
                       "--rate-limit-rpm", "10000")
    env = _env(migrated_database_url, runtime_url, engine_ulimits, SLIPWAY_WS_QUEUE="50")
    app = create_app(Config.from_env(env))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn-under-test", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    _wait_http(base, admin["key"], thread.is_alive)
    panel = Panel(base, admin["key"], migrated_database_url, app)
    yield panel
    runtime = app.parts.runtime
    for service_id in panel.made:
        runtime.remove_service(service_id)
    panel.http.close()
    server.should_exit = True
    thread.join(timeout=30)


def _messages(ws, until, seconds: float = DEADLINE_S) -> list[dict]:
    """Receive JSON messages until ``until(message)`` is true; all of them, in order."""
    got = []
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; received {got[-10:]}"
        got.append(json.loads(ws.recv(timeout=remaining)))
        if until(got[-1]):
            return got


def _status(service_id: str, status: str):
    return lambda m: m["type"] == "service.status" and m["data"] == {"id": service_id, "status": status}


def _refused(panel, path, key=None, **kwargs) -> int:
    with pytest.raises(InvalidStatus) as refused:
        with panel.ws(path, key, **kwargs):
            pass
    response = refused.value.response
    assert response.headers.get("content-type", "").startswith("application/json")
    body = json.loads(response.body)
    assert set(body["error"]) >= {"code", "message"}
    return response.status_code


def test_deploy_progress_and_status_arrive_in_order(panel):
    customer = panel.customer("Acme")
    with panel.ws("/api/ws", panel.admin_key, header=True) as ws:
        service_id = panel.create(customer)
        got = _messages(ws, lambda m: m["type"] == "deploy.progress" and m["data"]["service_id"] == service_id
                        and m["data"]["step"] in ("done", "failed"))
        got += _messages(ws, _status(service_id, "running"))
    mine = [m for m in got if (m["data"].get("service_id") or m["data"].get("id")) == service_id]
    kinds = [(m["type"], m["data"].get("status") or m["data"].get("step")) for m in mine]
    assert kinds[0] == ("service.status", "deploying"), kinds
    # the job's final progress comes before the status it leads to
    assert kinds[-2:] == [("deploy.progress", "done"), ("service.status", "running")], kinds
    steps = [k[1] for k in kinds[1:-2]]
    assert steps[:1] and "containers" in steps and steps[-1] == "wait", kinds
    progress = [m["data"]["progress"] for m in mine if m["type"] == "deploy.progress"]
    assert progress == sorted(progress) and progress[-1] == 100
    for m in mine:
        assert set(m) == {"type", "data", "timestamp"} and m["timestamp"].endswith("Z")
        if m["type"] == "deploy.progress":
            assert set(m["data"]) == {"service_id", "deploy_job_id", "step", "message", "progress"}
            assert m["data"]["deploy_job_id"].startswith("job_")

    with panel.ws("/api/ws", panel.admin_key) as ws:  # stop, start and delete announce their status
        assert panel.http.post(f"/api/services/{service_id}/stop").status_code == 200
        _messages(ws, _status(service_id, "stopped"))
        assert panel.http.delete(f"/api/services/{service_id}").status_code == 204
        _messages(ws, _status(service_id, "deleted"))


def test_a_customer_key_sees_only_its_own_services(panel):
    mine, theirs = panel.customer("Mine"), panel.customer("Theirs")
    customer_key = panel.key("customer", "--customer", mine["id"])
    viewer_key = panel.key("viewer")
    with panel.ws("/api/ws", customer_key) as own, panel.ws("/api/ws", viewer_key) as viewer:
        foreign = panel.create(theirs, prefix="theirs")
        _messages(viewer, _status(foreign, "running"))  # viewers see every customer
        panel.until(foreign, "running")
        own_id = panel.create(mine, prefix="mine")
        # the bus keeps order: by the time its own deploy finished, the foreign events were long delivered
        got = _messages(own, lambda m: m["type"] == "deploy.progress" and m["data"]["service_id"] == own_id
                        and m["data"]["step"] == "done")
        seen = {m["data"].get("service_id") or m["data"].get("id") for m in got}
        assert seen == {own_id}
        # subscribing to a foreign service by name does not open it either
        own.send(json.dumps({"type": "subscribe", "services": [foreign, own_id]}))
        ack = _messages(own, lambda m: m["type"] == "subscribed")[-1]
        assert ack["data"]["services"] == [own_id]


def test_refusals_are_http_answers_to_the_handshake(panel):
    service_id = panel.create(panel.customer("Acme"))
    assert _refused(panel, "/api/ws") == 401
    assert _refused(panel, "/api/ws", "slw_0000000000000000_" + "x" * 43) == 401
    assert _refused(panel, "/api/ws", "slw_0000000000000000_" + "x" * 43, header=True) == 401
    no_read = panel.key("viewer", "--deny", "services:read")
    assert _refused(panel, "/api/ws", no_read) == 403
    no_logs = panel.key("viewer", "--deny", "services:logs")
    assert _refused(panel, f"/api/services/{service_id}/logs?follow=true", no_logs) == 403
    assert _refused(panel, "/api/services/svc_0000000000000000/logs?follow=true", panel.admin_key) == 404
    other = panel.key("customer", "--customer", panel.customer("Other")["id"])
    assert _refused(panel, f"/api/services/{service_id}/logs?follow=true", other) == 404
    assert _refused(panel, "/api/no-such-socket", panel.admin_key) == 404
    # without an upgrade, follow is a 400 asking for one
    plain = panel.http.get(f"/api/services/{service_id}/logs", params={"follow": "true"})
    assert plain.status_code == 400 and "WebSocket" in plain.json()["error"]["message"]
    assert panel.http.get("/api/ws").status_code == 400


def _follow_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("slipway-logs-")]


def test_follow_streams_new_lines_and_closing_stops_the_engine_stream(panel):
    service_id = panel.create(panel.customer("Acme"), compose=TICKER, prefix="tick")
    panel.until(service_id, "running")
    before = {line["message"] for line in panel.http.get(f"/api/services/{service_id}/logs",
                                                       params={"tail": 10000}).json()["logs"]}
    opened = datetime.now(timezone.utc).replace(microsecond=0)
    with panel.ws(f"/api/services/{service_id}/logs?follow=true", panel.admin_key) as ws:
        lines = [json.loads(ws.recv(timeout=30)) for _ in range(5)]
        assert _follow_threads(), "no engine stream is being read"
    for line in lines:
        assert set(line) == {"timestamp", "stream", "message", "component", "release"} and line["stream"] == "stdout"
        assert (line["component"], line["release"]) == ("app", 1)  # the line's origin
        assert line["message"].startswith("tick-") and line["message"] not in before
        assert datetime.fromisoformat(line["timestamp"]) >= opened
    numbers = [int(line["message"].split("-")[1]) for line in lines]
    assert numbers == sorted(numbers) and len(set(numbers)) == 5
    deadline = time.monotonic() + 15  # the client closed: the follower closes its engine streams
    while _follow_threads():
        assert time.monotonic() < deadline, f"engine streams still open: {_follow_threads()}"
        time.sleep(0.1)

    # deleting the service ends a follow socket with 1000 and a reason, not silence
    with panel.ws(f"/api/services/{service_id}/logs?follow=true", panel.admin_key) as ws:
        json.loads(ws.recv(timeout=30))
        assert panel.http.delete(f"/api/services/{service_id}").status_code == 204
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=30)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1000, "the service was deleted")


def test_channel_log_pump_runs_while_someone_wants_the_logs(panel):
    service_id = panel.create(panel.customer("Acme"), compose=TICKER, prefix="pump")
    panel.until(service_id, "running")
    hub = panel.app.parts.hub
    no_logs = panel.key("viewer", "--deny", "services:logs")
    with panel.ws("/api/ws", panel.admin_key) as ws, panel.ws("/api/ws", no_logs) as blind:
        # unnarrowed, a key with services:logs gets the lines of every running service
        got = _messages(ws, lambda m: m["type"] == "service.logs" and m["data"]["service_id"] == service_id)
        assert set(got[-1]["data"]) == {"service_id", "timestamp", "stream", "message", "component", "release"}
        assert (got[-1]["data"]["component"], got[-1]["data"]["release"]) == ("app", 1)
        assert got[-1]["data"]["message"].startswith("tick-")
        blind.send(json.dumps({"type": "subscribe"}))
        assert _messages(blind, lambda m: m["type"] == "subscribed")[-1]["data"] == {"services": None, "logs": []}
        blind.send(json.dumps({"type": "subscribe", "services": [service_id]}))
        assert _messages(blind, lambda m: m["type"] == "subscribed")[-1]["data"]["logs"] == []
        ws.send(json.dumps({"type": "subscribe", "services": [service_id]}))
        assert _messages(ws, lambda m: m["type"] == "subscribed")[-1]["data"] == {
            "services": [service_id], "logs": [service_id]}
        _messages(ws, lambda m: m["type"] == "service.logs")
        assert service_id in hub.pumps
        ws.send(json.dumps({"type": "subscribe", "services": []}))  # nothing: the pump stops
        assert _messages(ws, lambda m: m["type"] == "subscribed")[-1]["data"] == {"services": [], "logs": []}
        deadline = time.monotonic() + 15
        while service_id in hub.pumps:
            assert time.monotonic() < deadline, "the pump outlived its last reader"
            time.sleep(0.1)
        ws.send(json.dumps({"type": "subscribe"}))  # everything again: the lines come back
        assert _messages(ws, lambda m: m["type"] == "subscribed")[-1]["data"] == {"services": None, "logs": None}
        _messages(ws, lambda m: m["type"] == "service.logs" and m["data"]["service_id"] == service_id)
        blind.send(json.dumps({"nonsense": True}))
        assert _messages(blind, lambda m: m["type"] == "error")[-1]["data"]["message"]
    deadline = time.monotonic() + 15
    while _follow_threads():
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_slow_client_is_disconnected(panel):
    """SLIPWAY_WS_QUEUE=50 here; the client reads nothing until the server gave up on it."""
    from ports.events import Event

    hub, bus = panel.app.parts.hub, panel.app.parts.bus
    with panel.ws("/api/ws", panel.admin_key, max_queue=1) as ws:
        (conn,) = hub.connections  # this server's only client
        deadline = time.monotonic() + 60
        while not conn.outbox.overflowed:
            assert time.monotonic() < deadline, "the server kept queueing"
            for _ in range(500):
                bus.publish(Event("service.status", {"id": "svc_flood", "status": "x" * 500}, "svc_flood"))
            time.sleep(0.01)
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=30)
    assert closed.value.rcvd.code == 1008 and "too slow" in closed.value.rcvd.reason


@pytest.mark.storage
@pytest.mark.skipif(not POSTGRES, reason="needs PostgreSQL (SLIPWAY_DATABASE_URL=postgresql://...): "
                                         "LISTEN/NOTIFY is the bus between processes")
def test_two_processes_share_events_through_postgres(runtime_url, migrated_database_url, engine_ulimits):
    _, admin = slipway(migrated_database_url, "apikey", "create", "--name", "pg", "--role", "admin",
                       "--rate-limit-rpm", "10000")
    servers, bases = [], []
    try:
        for worker in ("0", "1"):  # A runs no deploy jobs: everything it hears comes from B
            port = free_port()
            env = _env(migrated_database_url, runtime_url, engine_ulimits, SLIPWAY_EVENT_BUS="postgres",
                       SLIPWAY_DEPLOY_WORKER=worker)
            servers.append(subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True))
            bases.append(f"http://127.0.0.1:{port}")
        for server, base in zip(servers, bases):
            _wait_http(base, admin["key"], lambda server=server: server.poll() is None)
        a, b = (Panel(base, admin["key"], migrated_database_url) for base in bases)
        customer = b.customer("Acme")
        with a.ws("/api/ws", admin["key"]) as ws:
            service_id = b.create(customer)
            got = _messages(ws, lambda m: m["type"] == "service.status" and m["data"]["id"] == service_id
                            and m["data"]["status"] == "running")
        kinds = [(m["type"], m["data"].get("status") or m["data"].get("step")) for m in got]
        # the job's last progress comes before the status it leads to
        assert kinds[0] == ("service.status", "deploying") and kinds[-2:] == [("deploy.progress", "done"),
                                                                             ("service.status", "running")], kinds
        assert b.http.delete(f"/api/services/{service_id}").status_code == 204
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=20)
