"""Tenant safety of deploy jobs on a real engine (Podman), through a real ``slipway serve``
process and real HTTP and WebSocket clients:

- one customer's deploys that hang (a healthcheck that never passes) hold up neither
  another customer's deploy nor more than ``SLIPWAY_DEPLOYS_PER_CUSTOMER`` worker slots;
- deleting a service stops its running deploy within 10 s and leaves no container;
- a service whose container exits after its deploy becomes ``failed`` (exit code and
  last lines in the timeline, ``service.status`` announced, its route record gone);
- the route record follows the host port through stop, start, restart and redeploy.
"""
from __future__ import annotations

import json
import os
import time

import httpx
import pytest
from websockets.sync.client import connect

from tests.support.engine import engine_settings
from tests.support.processes import slipway
from tests.support.panel_server import IMAGE, _get, _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime

HANGS = (f"services:\n  app:\n    image: {IMAGE}\n    command: [sleep, '100000']\n"
         "    healthcheck:\n      test: [CMD, 'false']\n      interval: 1s\n      retries: 1000\n")
SLEEPER = f"services:\n  app:\n    image: {IMAGE}\n    command: [sleep, '600']\n"
WEB = (f"services:\n  web:\n    image: {IMAGE}\n"
       "    command: [sh, -c, 'mkdir -p /www; echo hello-$$HOSTNAME > /www/index.html; exec httpd -f -p 8080 -h /www']\n"
       "    ports: ['8080']\n")


def _name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 1000000}"


class Server:
    def __init__(self, runtime_url, database_url, ulimits, **env):
        from app.pluginmanager import make_plugin_manager, runtimes

        self.database_url = database_url
        self.key = admin_key(database_url)
        self.env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=ulimits, SLIPWAY_DATABASE_URL=database_url,
                        SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0", **env)
        self.process, self.http = serve_panel(self.key, self.env)
        self.engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, ulimits))
        self.made: list[str] = []

    def customer(self, name: str) -> dict:
        return self.http.post("/api/customers", json={"name": name}).json()

    def create(self, customer: dict, compose: str, prefix: str) -> str:
        created = self.http.post("/api/services", json={"name": _name(prefix), "customer_id": customer["id"],
                                                        "deploy_method": "compose", "compose": compose})
        assert created.status_code == 201, created.text
        self.made.append(created.json()["id"])
        return created.json()["id"]

    def job(self, service_id: str):
        """The service's latest deploy job, read from the database."""
        from app.storage.store import Store

        store = Store(self.database_url, threads=1)
        try:
            with store.uow(write=False) as uow:
                J = uow.deploy_jobs.m.DeployJob
                row = J.select().where(J.service_id == service_id).order_by(J.created_at.desc()).first()
                return uow.deploy_jobs.get(row.id)
        finally:
            store.close()

    def routes(self) -> dict:
        return {r["service_id"]: r["target"] for r in slipway(self.database_url, "route", "list")[1]["routes"]}

    def published(self, service_id: str) -> str:
        """The host port of the service's one container; after a health-gated redeploy
        the old set goes ``SLIPWAY_DEPLOY_DRAIN`` seconds after the switch: waited out."""
        deadline = time.monotonic() + 30
        while len(states := self.engine.containers(service_id)) != 1:
            assert time.monotonic() < deadline, states
            time.sleep(0.2)
        return f"http://127.0.0.1:{states[0].ports[8080]}"

    def close(self):
        for service_id in self.made:
            self.engine.remove_service(service_id)
        self.http.close()
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def server(runtime_url, migrated_database_url, engine_ulimits):
    made = []

    def start(**env):
        made.append(Server(runtime_url, migrated_database_url, engine_ulimits, **env))
        return made[-1]

    yield start
    for s in made:
        s.close()


def _eventually(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_one_customers_hanging_deploys_do_not_hold_up_another_customer(server):
    panel = server(SLIPWAY_DEPLOY_CONCURRENCY="4", SLIPWAY_DEPLOYS_PER_CUSTOMER="2")
    a, b = panel.customer("Attacker"), panel.customer("Bystander")
    hanging = [panel.create(a, HANGS, "hang") for _ in range(3)]
    for service_id in hanging[:2]:  # two of A's deploys wait for a healthcheck that never passes
        _eventually(lambda: panel.job(service_id).step == "wait", 60, "A's deploy did not reach its wait")

    started = time.monotonic()
    bystander = panel.create(b, SLEEPER, "calm")
    _until(panel.http, bystander, "running")
    took = time.monotonic() - started
    print(f"\ncustomer B's deploy reached running in {took:.1f} s while customer A had 3 hanging deploys")

    jobs = [panel.job(service_id) for service_id in hanging]
    assert [j.state for j in jobs] == ["running", "running", "queued"]  # A's third waits: A is at its limit
    assert [j.step for j in jobs[:2]] == ["wait", "wait"] and panel.engine.containers(hanging[2]) == []

    for service_id in hanging:  # deleting them stops the hanging deploys (the third's has just started)
        deleted = panel.http.delete(f"/api/services/{service_id}")
        assert deleted.status_code == 204, deleted.text
    for service_id in hanging:
        job = _eventually(lambda: panel.job(service_id).state == "failed" and panel.job(service_id), 15,
                          "a deleted service's deploy did not end")
        assert job.error == "service deleted"
        assert panel.engine.labelled(service_id)["containers"] == []


def test_deleting_a_service_stops_its_deploy_within_10_s(server):
    panel = server()
    service_id = panel.create(panel.customer("Acme"), HANGS, "doomed")
    _eventually(lambda: panel.job(service_id).step == "wait", 60, "the deploy did not reach its wait")
    assert panel.http.get(f"/api/services/{service_id}").json()["status"] == "deploying"

    deleted_at = time.monotonic()
    assert panel.http.delete(f"/api/services/{service_id}").status_code == 204
    job = _eventually(lambda: panel.job(service_id).state != "running" and panel.job(service_id), 10,
                      "the deploy went on more than 10 s after its service was deleted")
    ended = time.monotonic() - deleted_at
    assert (job.state, job.error) == ("failed", "service deleted")
    assert panel.engine.labelled(service_id) == {"containers": [], "volumes": [], "networks": []}
    print(f"\nthe deploy ended {ended:.1f} s after the delete")


def _ws_messages(ws, until, seconds: float = 90) -> list[dict]:
    got, deadline = [], time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; received {got[-10:]}"
        got.append(json.loads(ws.recv(timeout=remaining)))
        if until(got[-1]):
            return got


def test_a_service_whose_container_exits_later_becomes_failed(server):
    panel = server(SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_BASE_DOMAIN="apps.example.test")
    compose = (f"services:\n  web:\n    image: {IMAGE}\n    command: [sh, -c, 'echo serving; httpd -p 8080 -h /etc;"
               " sleep 15; echo giving up >&2; exit 4']\n    ports: ['8080']\n")
    ws_url = panel.http.base_url.copy_with(scheme="ws", path="/api/ws", params={"api_key": panel.key})
    with connect(str(ws_url), open_timeout=20) as ws:
        service_id = panel.create(panel.customer("Acme"), compose, "fragile")
        got = _ws_messages(ws, lambda m: m["type"] == "service.status" and m["data"]["id"] == service_id
                           and m["data"]["status"] in ("running", "failed"))
        assert got[-1]["data"]["status"] == "running", got
        assert service_id in panel.routes()
        _ws_messages(ws, lambda m: m["type"] == "service.status" and m["data"] == {"id": service_id,
                                                                                   "status": "failed"})
    detail = panel.http.get(f"/api/services/{service_id}").json()
    assert detail["status"] == "failed"
    events = panel.http.get(f"/api/services/{service_id}/events").json()["data"]
    assert (events[0]["type"], events[0]["status"]) == ("health", "failed")
    assert "exited with code 4" in events[0]["message"] and "giving up" in events[0]["message"]
    assert service_id not in panel.routes()  # its host port is free: no hostname points there


def test_the_route_record_follows_the_host_port(server):
    panel = server(SLIPWAY_BASE_DOMAIN="apps.example.test")
    service_id = panel.create(panel.customer("Acme"), WEB, "moving")
    _until(panel.http, service_id, "running")

    def routed_to_the_engine():
        target = panel.routes().get(service_id)
        assert target == panel.published(service_id)
        assert "hello-" in _get(target)
        return target

    seen = {routed_to_the_engine()}
    assert panel.http.post(f"/api/services/{service_id}/stop").status_code == 200
    assert service_id not in panel.routes()  # stopped: the port is given up, so is the record
    assert panel.http.post(f"/api/services/{service_id}/start").status_code == 200
    seen.add(routed_to_the_engine())
    assert panel.http.post(f"/api/services/{service_id}/restart").status_code == 200
    seen.add(routed_to_the_engine())
    assert panel.http.post(f"/api/services/{service_id}/redeploy").status_code == 200
    _until(panel.http, service_id, "running")
    seen.add(routed_to_the_engine())
    print(f"\nhost ports the service had: {sorted(seen)}")
    assert panel.http.delete(f"/api/services/{service_id}").status_code == 204
    assert service_id not in panel.routes()


def test_a_start_without_a_base_domain_updates_the_url(server):
    panel = server()
    service_id = panel.create(panel.customer("Acme"), WEB, "plain")
    assert _until(panel.http, service_id, "running")["url"] == panel.published(service_id)
    assert panel.http.post(f"/api/services/{service_id}/stop").status_code == 200
    assert panel.http.post(f"/api/services/{service_id}/start").status_code == 200
    url = panel.http.get(f"/api/services/{service_id}").json()["url"]
    assert url == panel.published(service_id) and "hello-" in httpx.get(url, timeout=10).text


@pytest.mark.parametrize("client", ["podman", "docker"])
def test_a_customers_hanging_builds_hold_up_neither_another_customer_nor_a_delete(server, tmp_path, request, client):
    """The attack of the issue: a Containerfile ``RUN sleep 100000`` used to hold the only
    deploy worker. Customer A's two such builds (A's share of the workers) run, customer
    B's deploy still reaches ``running`` beside them, in about the time it takes alone
    (the baseline, measured first in the same test), and deleting A's services stops the
    hanging builds within 10 s."""
    from tests.support.git_repos import BUSYBOX, repository
    from tests.fixtures.builds import build_sleeps, kill_build_sleeps, sleep_seconds

    panel = server(SLIPWAY_GIT_ALLOWED_SCHEMES="https,file", SLIPWAY_GIT_ALLOW_PRIVATE="1", SLIPWAY_RUNTIME=client)
    a, b = panel.customer("Builder"), panel.customer("Neighbour")

    started = time.monotonic()
    _until(panel.http, panel.create(b, SLEEPER, "alone"), "running")
    alone = time.monotonic() - started

    seconds = sleep_seconds()
    request.addfinalizer(lambda: kill_build_sleeps(seconds, expected=2))
    url, _ = repository(tmp_path / "hangs", {"Containerfile": f"FROM {BUSYBOX}\nRUN sleep {seconds}\n"})
    hanging = []
    for _ in range(2):
        created = panel.http.post("/api/services", json={"name": _name("build"), "customer_id": a["id"],
                                                         "deploy_method": "git", "git_url": url})
        assert created.status_code == 201, created.text
        panel.made.append(created.json()["id"])
        hanging.append(created.json()["id"])
    for service_id in hanging:  # both builds are under way (step "source": clone and build)
        _eventually(lambda: panel.job(service_id).state == "running", 60, "A's deploy was not claimed")
    # the engine is running both RUN steps: B's deploy is timed while they hang
    _eventually(lambda: len(build_sleeps(seconds)) == 2, 120, "A's two builds never reached their RUN sleep")

    started = time.monotonic()
    beside = panel.create(b, SLEEPER, "beside")
    _until(panel.http, beside, "running")
    took = time.monotonic() - started
    print(f"\n[{client}] customer B's deploy: {alone:.1f} s alone, {took:.1f} s while customer A's two builds hang")
    jobs = [panel.job(s) for s in hanging]
    assert [j.state for j in jobs] == ["running", "running"], [(j.state, j.error) for j in jobs]  # nothing faked

    deleted_at = time.monotonic()
    for service_id in hanging:
        assert panel.http.delete(f"/api/services/{service_id}").status_code == 204
    for service_id in hanging:
        job = _eventually(lambda: panel.job(service_id).state == "failed" and panel.job(service_id), 10,
                          "deleting the service did not stop its hanging build within 10 s")
        assert job.error == "service deleted", job.error
    print(f"[{client}] deleting A's services ended their builds in {time.monotonic() - deleted_at:.1f} s")
