"""Fixtures of the integration tests (a real engine, a real panel server)."""
from __future__ import annotations

import os

import pytest

from ports.runtime import ContainerRuntime
from tests.support.engine import BUSYBOX, _factories, engine_settings
from tests.support.panel_server import admin_key, serve_panel
from tests.support.processes import read_output
from tests.support.releases import page_images  # noqa: F401 (a fixture: three local images serving pages)


@pytest.fixture(params=["podman", "docker"])
def start_panel(request, runtime_url, migrated_database_url, engine_ulimits, tmp_path):
    """``start_panel(**env)``: a real server on this database with extra environment (a
    value None unsets the variable; ``cwd``: the folder it starts in); answers (client,
    customer, made) and removes services and built images afterwards.
    ``start_panel.stop(client)`` stops that client's server: servers on one database share
    its deploy queue, so a test of another server's settings stops the first one, else
    whichever server claims a job first runs it."""
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())[request.param].create(engine_settings(runtime_url, engine_ulimits))
    servers, made = [], []
    key = admin_key(migrated_database_url)

    def start(cwd=None, **extra):
        log = open(tmp_path / f"server-{len(servers)}.log", "w+")
        # the repositories of these tests are on this machine: file:// and loopback URLs
        env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
                   SLIPWAY_RUNTIME=request.param, SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_HEALTH_INTERVAL="1",
                   SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_GIT_ALLOWED_SCHEMES="https,ssh,file",
                   SLIPWAY_GIT_ALLOW_PRIVATE="1", SLIPWAY_IMAGE_STATIC=BUSYBOX,
                   SLIPWAY_WORK_DIR=str(tmp_path / "work"),
                   # these tests deploy more services for one customer than its default CPUs allow
                   SLIPWAY_CUSTOMER_MAX_CPUS="64", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536")
        env.update(extra)
        env = {name: value for name, value in env.items() if value is not None}
        server, client = serve_panel(key, env, stderr=log, cwd=cwd)
        servers.append((server, client, log))
        customers = client.get("/api/customers").json()["data"]
        customer = customers[0] if customers else client.post("/api/customers", json={"name": "Acme"}).json()
        return client, customer, made

    stopped = []

    def stop(client) -> None:
        for server, its_client, _ in servers:
            if its_client is client:
                server.terminate()
                server.wait(timeout=20)
                stopped.append(server)

    start.engine = engine
    start.stop = stop
    start.logs = lambda: "".join(read_output(log) for _, _, log in servers)
    yield start
    images = set()
    for server, client, log in servers:
        for service_id in made if server not in stopped else ():
            detail = client.get(f"/api/services/{service_id}")
            if detail.status_code == 200:
                images.update(word for word in detail.json()["compose"].split() if word.startswith("localhost/slw-"))
        client.close()
        server.terminate()
        server.wait(timeout=20)
        log.close()
    for service_id in made:
        engine.remove_service(service_id)
    for image in images:
        engine.remove_image(image)
    work = tmp_path / "work"
    assert not work.exists() or not os.listdir(work), "job work directories are removed"


@pytest.fixture(params=["podman", "docker", "swarm"])
def runtime(request, monkeypatch) -> ContainerRuntime:
    """Each runtime plugin on its engine: ``podman`` and ``docker`` on the Podman service
    (``SLIPWAY_RUNTIME_URL``), ``swarm`` on the Swarm manager (``SLIPWAY_TEST_SWARM_URL``;
    Debian's dockerd, whose runc sets rlimits itself, so no ulimits are pinned)."""
    monkeypatch.setenv("SLIPWAY_RUNTIME_HELPER_IMAGE", BUSYBOX)  # volume export/import helpers
    if request.param == "swarm":
        return _factories()["swarm"].create(engine_settings(request.getfixturevalue("swarm_url"), ""))
    url, ulimits = request.getfixturevalue("runtime_url"), request.getfixturevalue("engine_ulimits")
    return _factories()[request.param].create(engine_settings(url, ulimits))


@pytest.fixture
def umask_022():
    """This process (and the servers it starts) with the common umask 022, so a file that
    comes out 0600 shows Slipway set its mode, not that the umask happened to be strict."""
    before = os.umask(0o022)
    yield
    os.umask(before)
