"""Stable host ports on a real engine through a real server (no base domain: a service's
URL is ``http://127.0.0.1:<host port>``), on each runtime: a component keeps its host port, and the
service its URL, across a redeploy (health-gated: its new set starts beside the old one,
then takes the port back), a rollback, a restart and a stop and start; a port taken by
something else meanwhile gives another one and a timeline event naming both."""
from __future__ import annotations

import os
import socket
import time

import pytest

from tests.support.engine import ENGINES, engine_for, engine_settings
from tests.support.http import wait_answering
from tests.support.panel_server import _until, admin_key, serve_panel
from tests.support.releases import redeploy, wait_job

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"
COMPOSE = f"""services:
  web:
    image: {IMAGE}
    command: [sh, -c, 'mkdir -p /www && echo "$$GREETING" > /www/index.html && exec httpd -f -p 8080 -h /www']
    environment:
      GREETING: ${{GREETING}}
    ports: ['8080']
"""


#: not Swarm: there the take-back after a gated redeploy finds the old service's host port
#: still in use (a removed service's published port is not given up within the take-back's
#: tries), so the component moves to the gated set's port with a "taken" event; a known
#: gap (docs/api/releases.md), not a test that may pass or fail
PARAMS = [name for name in ENGINES if name != "swarm"]


@pytest.fixture(params=PARAMS)
def panel(request, migrated_database_url):
    runtime_url, engine_ulimits = engine_for(request, request.param)
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME=request.param, SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_DEPLOY_DRAIN="0.5")
    env.pop("SLIPWAY_BASE_DOMAIN", None)
    server, client = serve_panel(key, env)
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())[request.param].create(engine_settings(runtime_url, engine_ulimits))
    made = []
    yield client, made, engine
    for service_id in made:
        client.delete(f"/api/services/{service_id}")
    for service_id in made:
        engine.remove_service(service_id)
    client.close()
    server.terminate()
    server.wait(timeout=20)


def _page(url: str) -> str:
    return wait_answering(url + "/", seconds=30).text.strip()


def _progress(client, service_id) -> list:
    events = client.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
    return [(e["type"], e["message"]) for e in reversed(events) if e["status"] == "progress"]


def _url_back(client, service_id, url, seconds=60) -> dict:
    """The service once its URL is ``url`` again: a gated job's switch goes to the new set's
    own ports, then (after the old set's retirement and the new one's health) to the kept one."""
    deadline = time.monotonic() + seconds
    while True:
        detail = client.get(f"/api/services/{service_id}").json()
        if detail["url"] == url:
            return detail
        assert time.monotonic() < deadline, (detail, client.get(f"/api/services/{service_id}/events").json())
        time.sleep(0.2)


def _one_container(engine, service_id, seconds=60) -> None:
    """Wait until the engine has one container of the service (a gated job's first
    containers go after the drain, once the job has ended)."""
    deadline = time.monotonic() + seconds
    while True:
        names = [s.name for s in engine.containers(service_id)]
        if len(names) == 1:
            return
        assert time.monotonic() < deadline, names
        time.sleep(0.2)


def _patch_greeting(client, service_id, greeting):
    answer = client.patch(f"/api/services/{service_id}", json={"variables": {"GREETING": greeting}})
    assert answer.status_code == 200, answer.text


def test_the_host_port_and_url_stay_across_redeploy_rollback_and_restart(panel):
    client, made, engine = panel
    customer = client.post("/api/customers", json={"name": "Acme"}).json()
    created = client.post("/api/services", json={
        "name": f"hp-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose", "compose": COMPOSE, "variables": {"GREETING": "one"}})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    url = _until(client, service_id, "running")["url"]
    assert url.startswith("http://127.0.0.1:") and _page(url) == "one"

    _patch_greeting(client, service_id, "two")
    redeploy(client, service_id, "succeeded")
    detail = _url_back(client, service_id, url)
    assert detail["release"] == 2 and _page(url) == "two"  # the new release, on the same port
    _one_container(engine, service_id)

    answer = client.post(f"/api/services/{service_id}/rollback", json={})
    assert answer.status_code == 200, answer.text
    assert wait_job(client, service_id, answer.json()["deploy_job_id"])["status"] == "succeeded"
    detail = _url_back(client, service_id, url)
    assert detail["release"] == 3 and _page(url) == "one"
    _one_container(engine, service_id)

    restarted = client.post(f"/api/services/{service_id}/restart")
    assert restarted.status_code == 200, restarted.text
    assert _until(client, service_id, "running")["url"] == url and _page(url) == "one"
    assert client.post(f"/api/services/{service_id}/stop").status_code == 200
    _until(client, service_id, "stopped")
    assert client.post(f"/api/services/{service_id}/start").status_code == 200
    assert _until(client, service_id, "running")["url"] == url and _page(url) == "one"
    assert _progress(client, service_id) == []  # nothing moved

    # stopped, its port is taken by something else: the next deploy gets another one and says so
    port = int(url.rsplit(":", 1)[1])
    assert client.post(f"/api/services/{service_id}/stop").status_code == 200
    _until(client, service_id, "stopped")
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 30
        while True:  # the stopped container's forwarding lets go of the port
            try:
                squatter.bind(("127.0.0.1", port))
                break
            except OSError:
                assert time.monotonic() < deadline, f"port {port} stays bound after the stop"
                time.sleep(0.2)
        squatter.listen()
        redeploy(client, service_id, "succeeded")
        moved = client.get(f"/api/services/{service_id}").json()["url"]
        new_port = int(moved.rsplit(":", 1)[1])
        assert new_port != port and _page(moved) == "one"
        assert _progress(client, service_id) == [
            ("redeploy", f"web: host port {port} was taken by something else meanwhile; its port 8080/tcp is now "
                         f"published on {new_port}")]
    redeploy(client, service_id, "succeeded")  # the new port is the one it keeps now
    assert _url_back(client, service_id, moved)["release"] == 5 and _page(moved) == "one"
    assert len(_progress(client, service_id)) == 1
