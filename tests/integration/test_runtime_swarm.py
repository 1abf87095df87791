"""What only the ``swarm`` runtime does, on the single-node swarm
(``SLIPWAY_TEST_SWARM_URL``): placement, overlay networks, host-mode ports, and the
warning about ``no-new-privileges`` on engines that cannot set it per service."""
from __future__ import annotations

import logging
import secrets
import time

import pytest

from ports.runtime import PortSpec
from tests.support.engine import BUSYBOX, Service, _factories, engine_settings

pytestmark = pytest.mark.runtime


@pytest.fixture
def swarm(swarm_url):
    return _factories()["swarm"].create(engine_settings(swarm_url, ""))


@pytest.fixture
def service(swarm, request):
    service = Service(swarm)
    request.addfinalizer(lambda: swarm.remove_service(service.id))
    return service


def _spec(swarm, service_id: str) -> dict:
    return swarm.client.api.inspect_service(service_id)["Spec"]


def test_services_with_a_volume_or_a_local_image_stay_on_the_manager(swarm, service):
    manager = swarm.client.info()["Swarm"]["NodeID"]
    volume = service.name("data")
    swarm.create_volume(volume, service.labels)
    stateful = service.run("db", "sleep", "600", volumes=((volume, "/data"),))
    local = service.run("app", "sleep", "600")  # localhost/busybox: only the manager holds it
    for ident in (stateful, local):
        assert _spec(swarm, ident)["TaskTemplate"]["Placement"]["Constraints"] == [f"node.id=={manager}"]
    body = swarm._service_spec(service.spec("web", image="docker.io/library/nginx:1.27"))
    assert "Placement" not in body["TaskTemplate"]  # a registry image goes wherever Swarm schedules it


def test_the_service_spec_carries_limits_ports_and_one_replica(swarm, service):
    web = service.run("web", "sh", "-c", "exec httpd -f -p 8080 -h /", ports=(PortSpec(8080),), cpus=0.25,
                      memory_mb=48)
    spec = _spec(swarm, web)
    assert spec["Mode"]["Replicated"]["Replicas"] == 1
    assert spec["TaskTemplate"]["RestartPolicy"]["Condition"] == "none"
    limits = spec["TaskTemplate"]["Resources"]["Limits"]
    assert (limits["NanoCPUs"], limits["MemoryBytes"]) == (250_000_000, 48 * 1024 * 1024)
    assert limits["Pids"] == swarm.settings.pids_limit
    (port,) = spec["EndpointSpec"]["Ports"]
    assert port["PublishMode"] == "host" and port["TargetPort"] == 8080
    assert swarm.settings.host_ports[0] <= port["PublishedPort"] <= swarm.settings.host_ports[1]
    assert swarm.inspect(web).ports == {8080: port["PublishedPort"]}


def test_networks_are_overlay_networks(swarm, service):
    network = service.name("net")
    swarm.create_network(network, service.labels)
    # the manager's allocator fills in the driver a moment after the network is made (on
    # a busy machine the first inspect answered Driver "" in CI)
    deadline = time.monotonic() + 30
    attrs = swarm.client.api.inspect_network(network)
    while not attrs["Driver"] and time.monotonic() < deadline:
        time.sleep(0.2)
        attrs = swarm.client.api.inspect_network(network)
    assert (attrs["Driver"], attrs["Scope"]) == ("overlay", "swarm")
    assert attrs["Labels"] == service.labels


def test_an_engine_without_per_service_no_new_privileges_is_warned_about(swarm_url, caplog):
    swarm = _factories()["swarm"].create(engine_settings(swarm_url, ""))
    version = swarm.client.version()["ApiVersion"]
    security = swarm.client.info().get("SecurityOptions") or []
    with caplog.at_level(logging.WARNING, logger="slipway.runtime.swarm"):
        can = swarm._no_new_privileges()
    body = swarm._service_spec(Service(swarm).spec("x", image=BUSYBOX))
    if tuple(int(p) for p in version.split(".")) >= (1, 44):
        assert can and body["TaskTemplate"]["ContainerSpec"]["Privileges"] == {"NoNewPrivileges": True}
    else:
        assert not can and "Privileges" not in body["TaskTemplate"]["ContainerSpec"]
        warned = any("no-new-privileges" in record.getMessage() for record in caplog.records)
        assert warned == (not any("no-new-privileges" in str(o) for o in security))


def test_an_engine_that_is_no_swarm_manager_is_an_engine_error(runtime_url):
    from ports.runtime import EngineError

    podman = _factories()["swarm"].create(engine_settings(runtime_url, ""))  # Podman: no swarm
    service = Service(podman)
    volume = service.name("v" + secrets.token_hex(2))
    with pytest.raises(EngineError, match="not a swarm manager"):
        podman.run(service.spec("x", "true", volumes=((volume, "/v"),)))
    plain = _factories()["podman"].create(engine_settings(runtime_url, ""))
    assert plain.labelled(service.id) == {"containers": [], "volumes": [], "networks": []}  # nothing made
