"""Services on a real engine, through a real uvicorn server: template and compose deploys
reach running, answer HTTP on their url, stop, start, restart, redeploy, show logs and
events, and are deleted with nothing left in the engine. Once through the Podman client,
once through the Docker client (Podman serves Docker's API on the same socket), and once
as Swarm services on the single-node swarm."""
from __future__ import annotations

import os
import time

import pytest

from tests.support.engine import ENGINES, engine_for, engine_settings
from tests.support.panel_server import IMAGE, _get, _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime

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


@pytest.fixture(params=ENGINES)
def panel(request, migrated_database_url):
    runtime_url, engine_ulimits = engine_for(request, request.param)
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME=request.param,
               SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_BILLING_INTERVAL="0")
    server, client = serve_panel(key, env)
    customer = client.post("/api/customers", json={"name": "Acme"}).json()
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())[request.param].create(engine_settings(runtime_url, env["SLIPWAY_RUNTIME_ULIMITS"]))
    made = []
    yield client, customer, engine, made
    for service_id in made:
        engine.remove_service(service_id)
    client.close()
    server.terminate()
    server.wait(timeout=20)


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

    answer = client.get(f"/api/services/{service_id}/logs", params={"tail": 5})
    assert answer.status_code == 200, answer.text  # CI saw an answer without logs on Swarm under load
    logs = answer.json()["logs"]
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
    lines = client.get(f"/api/services/{service_id}/logs").json()["logs"]
    messages = [line["message"] for line in lines]
    assert "backend up" in messages and "web up" in messages
    # each line names its component and the release whose containers wrote it
    origins = {line["message"]: (line["component"], line["release"]) for line in lines}
    assert (origins["backend up"], origins["web up"]) == (("backend", 1), ("web", 1))
    assert detail["volumes"] == ["data"]
    deadline = time.monotonic() + 30
    while client.get(f"/api/services/{service_id}").json()["health"]["status"] != "healthy":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert client.delete(f"/api/services/{service_id}").status_code == 204
    assert engine.labelled(service_id) == {"containers": [], "volumes": [], "networks": []}


def test_a_failing_deploy_ends_failed_with_the_reason(panel):
    """A container that exits at once still shows running right after its start: the
    settle window makes such a deploy fail every time, never end ``running``."""
    client, customer, engine, made = panel
    created = [client.post("/api/services", json={
        "name": f"broken-{i}-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose",
        "compose": "services:\n  app:\n    image: localhost/busybox:latest\n    command: [sh, -c, 'echo boom >&2; exit 3']\n"})
        for i in range(3)]
    for response in created:
        service_id = response.json()["id"]
        made.append(service_id)
        _until(client, service_id, "failed")
        failed = [e for e in client.get(f"/api/services/{service_id}/events").json()["data"]
                  if e["status"] == "failed"]
        assert failed and "exited with code 3" in failed[0]["message"] and "boom" in failed[0]["message"], failed
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


def test_a_pull_that_fails_names_what_chose_the_image(panel):
    """On an engine that reaches no registry (or lacks the image) the job's error names
    the template variable, or the compose service's ``image:``, that chose the image."""
    client, customer, engine, made = panel
    if engine.has_image("docker.io/library/busybox:stable"):
        pytest.skip("the engine has the static-site template's default image")
    suffix = f"{os.getpid()}-{time.monotonic_ns() % 100000}"
    site = client.post("/api/services", json={"name": f"site-{suffix}", "customer_id": customer["id"],
                                             "deploy_method": "template", "template_id": "static-site"})
    assert site.status_code == 201, site.text
    compose = client.post("/api/services", json={
        "name": f"pull-{suffix}", "customer_id": customer["id"], "deploy_method": "compose",
        "compose": "services:\n  app:\n    image: docker.io/library/slipway-no-such-image:1\n"})
    assert compose.status_code == 201, compose.text
    expected = {site.json()["id"]: ("docker.io/library/busybox:stable", "the variable IMAGE of template static-site"),
                compose.json()["id"]: ("docker.io/library/slipway-no-such-image:1",
                                       "the compose's service app `image:`")}
    for service_id, (image, origin) in expected.items():
        made.append(service_id)
        _until(client, service_id, "failed")
        failed = [e for e in client.get(f"/api/services/{service_id}/events").json()["data"]
                  if e["status"] == "failed"]
        assert failed and image in failed[0]["message"] and origin in failed[0]["message"], failed
        assert client.delete(f"/api/services/{service_id}").status_code == 204


def store_status(store, service_id: str) -> str:
    with store.uow(write=False) as uow:
        return uow.services.get(service_id).status


def test_start_up_reconciles_services_with_the_engine(panel, database_url):
    """Containers that vanished behind Slipway's back are noticed from their labels."""
    from app.storage.store import Store
    from core.panel import deploys
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
        found = deploys.reconcile(store.uow(), SystemClock(), engine)
        # the server's own health monitor (every second here) may notice first; then the
        # start-up pass finds the service failed already, and both say why below
        assert found == [created["id"]] or (found == [] and store_status(store, created["id"]) == "failed"), found
    finally:
        store.close()
    detail = client.get(f"/api/services/{created['id']}").json()
    assert detail["status"] == "failed"
    said = client.get(f"/api/services/{created['id']}/events").json()["data"][0]["message"]
    # the monitor may also have seen the container stopped (removing it kills it first: 137)
    # before it was gone, on two checks in a row while the engine took its time to remove it
    assert "missing from the engine" in said or (found == [] and "exited with code 137" in said), said


def test_a_service_deleted_while_deploying_leaves_nothing_behind(panel):
    """The spec allows delete from any state: the deploy job, told its service is gone
    (``tests/integration/test_deploy_safety_engine.py`` times it), removes what it made
    after the delete."""
    client, customer, engine, made = panel
    slow = ("services:\n  app:\n    image: localhost/busybox:latest\n"
            "    command: [sh, -c, 'sleep 3; exec httpd -f -p 8080']\n    healthcheck:\n"
            "      test: [CMD, wget, -q, -O, /dev/null, 'http://127.0.0.1:8080/']\n      interval: 1s\n"
            "      retries: 30\n    ports: ['8080']\n")
    created = client.post("/api/services", json={
        "name": f"gone-early-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "compose", "compose": slow}).json()
    made.append(created["id"])
    deadline = time.monotonic() + 120
    while not engine.labelled(created["id"])["containers"]:  # the job is starting containers
        detail = client.get(f"/api/services/{created['id']}").json()
        events = client.get(f"/api/services/{created['id']}/events").json()["data"]
        said = [(e["status"], e["message"]) for e in events]  # the job's failure says why, first
        assert detail["status"] == "deploying", (detail["status"], said)
        assert time.monotonic() < deadline, (detail["status"], said)
        time.sleep(0.2)
    assert client.get(f"/api/services/{created['id']}").json()["status"] == "deploying"
    assert client.delete(f"/api/services/{created['id']}").status_code == 204
    assert client.get(f"/api/services/{created['id']}").status_code == 404
    deadline = time.monotonic() + 120
    while engine.labelled(created["id"]) != {"containers": [], "volumes": [], "networks": []}:
        assert time.monotonic() < deadline, engine.labelled(created["id"])
        time.sleep(0.3)


NOTHING = {"containers": [], "volumes": [], "networks": []}


def test_a_delete_at_any_moment_of_its_deploy_leaves_nothing_in_the_engine_after_the_204(panel):
    """Issue 35: a deploy queued for a service started its container about 0.5 s after the
    service's DELETE answered 204. Deleted at each moment of its deploy (queued, just
    claimed, starting its containers), a service has no container, volume or network in
    the engine once the 204 is answered: the delete ends its queued job first and waits
    for a running one to end, and a job that finds its service gone removes what it made.
    Each service is looked at again once every other was deleted, later."""
    client, customer, engine, made = panel
    compose = ("services:\n  app:\n    image: localhost/busybox:latest\n"
               "    command: [sh, -c, 'exec httpd -f -p 8080']\n    ports: ['8080']\n"
               "    volumes: [data:/data]\nvolumes:\n  data: {}\n")

    def create(tag):
        created = client.post("/api/services", json={
            "name": f"race-{tag}-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
            "deploy_method": "compose", "compose": compose})
        assert created.status_code == 201, created.text
        made.append(created.json()["id"])
        return created.json()

    def job_state(created):
        answer = client.get(f"/api/services/{created['id']}/deploys/{created['deploy_job_id']}")
        return answer.json()["status"] if answer.status_code == 200 else None

    def until(what, check, seconds=120, created=None):
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() >= deadline:  # what the server saw (CI once waited 120 s for a first container)
                events = "" if created is None else client.get("/api/services/%s/events" % created["id"]).text
                said = "" if created is None else f"; job {job_state(created)}; events {events[:3000]}"
                pytest.fail(f"still waiting for {what}{said}")
            time.sleep(0.05)

    deleted = []
    moments = {
        "queued": lambda created: None,  # at once: the job queued, or just claimed
        "claimed": lambda created: until("the job running", lambda: job_state(created) != "queued", created=created),
        "starting": lambda created: until("its first container", lambda: engine.labelled(created["id"])["containers"],
                                          created=created),
    }
    for tag, moment in moments.items():
        created = create(tag)
        moment(created)
        assert client.delete(f"/api/services/{created['id']}").status_code == 204
        assert engine.labelled(created["id"]) == NOTHING, (tag, engine.labelled(created["id"]))
        assert client.get(f"/api/services/{created['id']}").status_code == 404
        deleted.append((tag, created["id"]))
    for tag, service_id in deleted:  # later: no job of theirs made anything since
        assert engine.labelled(service_id) == NOTHING, (tag, engine.labelled(service_id))
