"""One suite for every container-runtime plugin (``podman`` through podman-py, ``docker``
through docker-py) against the engine at ``SLIPWAY_RUNTIME_URL``; a Podman service serves
both APIs on one socket. Needs the local image ``localhost/busybox:latest`` (made by
``../shared/tools/podman-service``); no registry is used.

Every test works in its own service id and removes the service afterwards.
"""
from __future__ import annotations

import secrets
import socket
from datetime import datetime, timedelta, timezone

import pytest

from ports.runtime import (
    COMPONENT_LABEL,
    SERVICE_LABEL,
    ContainerRuntime,
    EngineError,
    Gone,
    Healthcheck,
    PortSpec,
    Usage,
)
from tests.support.engine import BUSYBOX, Service, _factories, _tree, http_get, wait_for, engine_settings

pytestmark = pytest.mark.runtime


@pytest.fixture
def service(runtime, request):
    service = Service(runtime)
    request.addfinalizer(lambda: runtime.remove_service(service.id))
    return service


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- basics ---------------------------------------------------------------------------


def test_is_a_runtime_and_answers(runtime):
    assert isinstance(runtime, ContainerRuntime) and runtime.name in ("podman", "docker", "swarm")
    assert runtime.ping() is True
    assert runtime.has_image(BUSYBOX)
    assert not runtime.has_image("localhost/slipway-no-such-image:none")
    assert runtime.inspect("slipway-no-such-container") is None


def test_register_runtimes_provides_podman_docker_and_swarm(monkeypatch):
    from app.pluginmanager import make_plugin_manager

    names = [factory.name for batch in make_plugin_manager().hook.register_runtimes() for factory in batch]
    assert {"podman", "docker", "swarm"} <= set(names)
    monkeypatch.setenv("SLIPWAY_RUNTIME_ULIMITS", "nofile=1024:2048, nproc=512")
    for name in ("podman", "docker", "swarm"):
        runtime = _factories()[name].create(engine_settings(None))  # the client's default engine, contacted on first use
        assert isinstance(runtime, ContainerRuntime) and runtime.name == name
        assert runtime.ulimits == (("nofile", 1024, 2048), ("nproc", 512, 512))
        assert _factories()[name].create(engine_settings(None, "")).ulimits == ()
        with pytest.raises(ValueError):
            _factories()[name].create(engine_settings(None, "nofile"))


@pytest.mark.parametrize("name", ["podman", "docker", "swarm"])
def test_an_unreachable_engine_does_not_answer_ping(name):
    dead = _factories()[name].create(engine_settings("unix:///nonexistent/slipway.sock"))
    assert dead.ping() is False
    with pytest.raises(EngineError):
        dead.containers("svc_nothing")


def test_pulling_without_a_registry_is_an_engine_error(runtime):
    with pytest.raises(EngineError, match="registry.invalid"):
        runtime.pull_image("registry.invalid/slipway/nothing:1")


def test_running_a_missing_image_is_an_engine_error_and_leaves_nothing(runtime, service):
    with pytest.raises(EngineError):
        service.run("ghost", "true", image="localhost/slipway-no-such-image:none")
    assert runtime.inspect(service.name("ghost")) is None


def test_a_taken_name_is_an_engine_error(runtime, service):
    first = service.run("app", "sleep", "600")
    with pytest.raises(EngineError):
        service.run("app", "sleep", "600")
    assert runtime.inspect(first).running


# --- networking -----------------------------------------------------------------------


def test_containers_reach_each_other_by_alias_and_share_a_volume(runtime, service):
    network, volume = service.name("net"), service.name("www")
    runtime.create_network(network, service.labels)
    runtime.create_network(network, service.labels)  # an existing one is kept
    runtime.create_volume(volume, service.labels)
    runtime.create_volume(volume, service.labels)
    service.run("web", "sh", "-c", "echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www",
                volumes=((volume, "/www"),), network=network, aliases=("web",))
    client = service.run(
        "client", "sh", "-c",
        "for i in $(seq 1 100); do wget -q -O - http://web:8080/ && exit 0; sleep 0.2; done; exit 1",
        network=network)
    service.wait_exited(client)
    output = [f"{line.stream}: {line.message}" for line in runtime.logs(client, tail=None)]
    assert "stdout: hello-from-web" in output, output


def test_a_container_joins_further_networks_under_their_aliases(runtime, service):
    """``ContainerSpec.networks`` (a customer's network): the container is on its own
    network and on the further one, where it answers by the aliases given; a container on
    a third network neither resolves the alias nor reaches it."""
    own, shared, elsewhere = service.name("own"), service.name("shared"), service.name("else")
    for network in (own, shared, elsewhere):
        runtime.create_network(network, service.labels)
    service.run("db", "sh", "-c", "exec httpd -f -p 7000 -h /", network=own, aliases=("db",),
                networks=((shared, ("shop-db", "shop-db-db")),))
    probe = ("(for i in $(seq 1 {n}); do nc -w 2 {host} 7000 -e true 2>/dev/null && echo reached {host} && exit 0; "
             "sleep 0.3; done; echo unreached {host})")
    near = service.run("near", "sh", "-c", probe.format(n=100, host="shop-db") + "; " +
                       probe.format(n=100, host="shop-db-db"), network=shared)
    far = service.run("far", "sh", "-c", probe.format(n=5, host="shop-db"), network=elsewhere)
    service.wait_exited(near)
    service.wait_exited(far)
    assert [line.message for line in runtime.logs(near, tail=None) if "reached" in line.message] == [
        "reached shop-db", "reached shop-db-db"]
    assert [line.message for line in runtime.logs(far, tail=None) if "reached" in line.message] == [
        "unreached shop-db"]


def test_published_ports_answer_on_loopback(runtime, service):
    fixed = free_port()
    web = service.run("web", "sh", "-c",
                      "echo published > /www/index.html && httpd -p 8081 -h /www && exec httpd -f -p 8080 -h /www",
                      ports=(PortSpec(8080, host_port=fixed), PortSpec(8081)))
    state = runtime.inspect(web)
    assert state.ports[8080] == fixed
    assert isinstance(state.ports[8081], int) and 20000 <= state.ports[8081] <= 29999  # SLIPWAY_HOST_PORTS
    assert http_get(fixed).strip() == "published"
    assert http_get(state.ports[8081]).strip() == "published"


# --- lifecycle ------------------------------------------------------------------------


def test_stop_start_restart_and_states(runtime, service):
    app = service.run("app", "sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done",
                      environment={"GREETING": "hi"})
    state = runtime.inspect(app)
    assert (state.id, state.name, state.status, state.running, state.health) == (
        app, service.name("app"), "running", True, None)
    assert state.labels[SERVICE_LABEL] == service.id and state.labels[COMPONENT_LABEL] == "app"
    assert state.ports == {}
    assert [s.id for s in runtime.containers(service.id)] == [app]

    runtime.stop(app, timeout=5)
    state = runtime.inspect(app)
    assert (state.status, state.running) == ("exited", False)
    assert [s.status for s in runtime.containers(service.id)] == ["exited"]  # stopped ones are listed too
    assert runtime.usage(app) == Usage(0.0, 0.0, 0.0)
    runtime.stop(app, timeout=1)  # stopping a stopped container is fine

    runtime.start(app)
    assert runtime.inspect(app).running
    runtime.restart(app, timeout=5)
    state = runtime.inspect(app)
    assert (state.status, state.running) == ("running", True)
    runtime.remove_container(app)
    assert runtime.inspect(app) is None and runtime.containers(service.id) == []
    runtime.remove_container(app)  # already gone is fine
    with pytest.raises(Gone):  # an EngineError the deploy job tells apart (a delete under way)
        runtime.start(app)
    with pytest.raises(Gone):
        runtime.start("slipway-no-such-container")
    with pytest.raises(Gone):
        runtime.stop("slipway-no-such-container", timeout=1)


def test_logs_split_streams_and_respect_tail_and_since(runtime, service):
    talker = service.run("talker", "sh", "-c",
                         "echo out1; echo err1 >&2; sleep 1; echo last-out; sleep 1; echo last-err >&2; exec sleep 600")
    lines = wait_for(lambda: (lambda ls: ls if len(ls) >= 4 else None)(runtime.logs(talker, tail=None)),
                     "four log lines")
    assert sorted((line.stream, line.message) for line in lines) == [
        ("stderr", "err1"), ("stderr", "last-err"), ("stdout", "last-out"), ("stdout", "out1")]
    assert [line.message for line in lines][-2:] == ["last-out", "last-err"]
    now = datetime.now(timezone.utc)
    for line in lines:
        assert line.timestamp.tzinfo is not None and abs(line.timestamp - now) < timedelta(minutes=2)
    assert [(l.stream, l.message) for l in runtime.logs(talker, tail=1)] == [("stderr", "last-err")]
    assert [l.message for l in runtime.logs(talker, tail=2)] == ["last-out", "last-err"]
    assert runtime.logs(talker, tail=0) == []
    assert len(runtime.logs(talker)) == 4
    last_out = next(line for line in lines if line.message == "last-out")
    assert [l.message for l in runtime.logs(talker, tail=None, since=last_out.timestamp)] == ["last-out", "last-err"]
    assert len(runtime.logs(talker, tail=None, since=now - timedelta(hours=1))) == 4
    assert runtime.logs(talker, tail=None, since=now + timedelta(hours=1)) == []


def test_healthchecks_become_healthy_or_unhealthy(runtime, service):
    healthy = service.run("healthy", "sh", "-c", "touch /tmp/ready; exec sleep 600", healthcheck=Healthcheck(
        test=("CMD-SHELL", "test -f /tmp/ready"), interval_s=1, timeout_s=3, retries=3))
    failing = service.run("failing", "sleep", "600", healthcheck=Healthcheck(
        test=("CMD", "cat", "/tmp/missing"), interval_s=1, timeout_s=3, retries=2))
    assert runtime.inspect(healthy).health in ("starting", "healthy")

    def both_settled():
        states = {state.name: state.health for state in runtime.containers(service.id)}
        settled = states.get(service.name("healthy")) == "healthy" and \
            states.get(service.name("failing")) == "unhealthy"
        return settled or None

    wait_for(both_settled, "one container healthy and one unhealthy", interval=0.3)
    assert runtime.inspect(healthy).health == "healthy"
    assert runtime.inspect(failing).health == "unhealthy"


def test_usage_reports_numbers(runtime, service):
    busy = service.run("busy", "sh", "-c", "while true; do :; done")
    idle = service.run("idle", "sleep", "600")
    for container in (busy, idle):
        usage = runtime.usage(container)
        assert isinstance(usage, Usage)
        assert all(isinstance(value, float) and value >= 0 for value in
                   (usage.cpu_percent, usage.memory_mb, usage.memory_limit_mb))
        assert 0 < usage.memory_mb <= usage.memory_limit_mb
    assert runtime.usage(busy).cpu_percent > 5  # a spinning shell keeps about one core busy
    with pytest.raises(EngineError):
        runtime.usage("slipway-no-such-container")


def test_limits_storage_and_running_containers_by_service(runtime, service):
    """CPU and memory limits reach the engine and come back in the state and the usage;
    the service's volume sizes add up; one call lists running containers by service."""
    from ports.runtime import ContainerSpec

    volume = f"{service.id}-data"
    runtime.create_volume(volume, service.labels)
    limited = runtime.run(ContainerSpec(
        name=f"{service.id}-limited", image=BUSYBOX, labels=service.labels, cpus=0.5, memory_mb=64,
        command=("sh", "-c", "head -c 300000 /dev/zero > /data/blob; exec sleep 600"), volumes=((volume, "/data"),)))
    free = service.run("free", "sleep", "600")
    # a container whose spec sets no limits gets SLIPWAY_DEFAULT_CPUS (1) / SLIPWAY_DEFAULT_MEMORY_MB (512)
    assert runtime.inspect(limited).cpu_limit == 50.0 and runtime.inspect(free).cpu_limit == 100.0
    assert runtime.usage(limited).memory_limit_mb == 64.0 and runtime.usage(free).memory_limit_mb == 512.0
    wait_for(lambda: runtime.storage_bytes(service.id) >= 300000, "the volume to hold the blob")
    assert runtime.storage_bytes("svc_no_such_service") == 0
    running = runtime.running_by_service()
    assert sorted(running[service.id]) == sorted([limited, free])
    runtime.stop(free, timeout=0)
    assert runtime.running_by_service()[service.id] == [limited]


# --- images ---------------------------------------------------------------------------


def test_build_run_and_remove_an_image(runtime, service, tmp_path, request):
    tag = f"localhost/{service.id}:1"
    request.addfinalizer(lambda: runtime.remove_image(tag))  # runs after remove_service (LIFO)
    (tmp_path / "Containerfile").write_text("FROM localhost/busybox:latest\nRUN echo built > /built.txt\n")
    output = runtime.build_image(str(tmp_path), tag, "Containerfile")
    assert output and all(isinstance(line, str) for line in output)
    assert runtime.has_image(tag)
    assert runtime.build_image(str(tmp_path), tag)  # Containerfile found without naming it
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "Containerfile").write_text("FROM localhost/busybox:latest\nRUN echo built > /built.txt\n")
    assert runtime.build_image(str(tmp_path), tag, "sub/Containerfile")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Containerfile", "sub"]  # nothing left behind

    reader = service.run("reader", "cat", "/built.txt", image=tag)
    service.wait_exited(reader)
    assert [line.message for line in runtime.logs(reader)] == ["built"]
    runtime.remove_service(service.id)
    runtime.remove_image(tag)
    assert not runtime.has_image(tag)
    runtime.remove_image(tag)  # already gone is fine


def test_image_ports_are_what_the_image_exposes(runtime, tmp_path, request):
    tag = "localhost/svc_test" + secrets.token_hex(4) + ":ports"
    request.addfinalizer(lambda: runtime.remove_image(tag))
    (tmp_path / "Containerfile").write_text("FROM localhost/busybox:latest\nEXPOSE 8080 53/udp\nEXPOSE 443\n")
    runtime.build_image(str(tmp_path), tag)
    assert runtime.image_ports(tag) == [PortSpec(53, None, "udp"), PortSpec(443), PortSpec(8080)]
    assert runtime.image_ports(BUSYBOX) == []
    with pytest.raises(EngineError):
        runtime.image_ports("localhost/slipway-no-such-image:1")


def test_a_failing_build_is_an_engine_error_with_its_output(runtime, tmp_path):
    tag = "localhost/svc_test" + secrets.token_hex(4) + ":broken"
    (tmp_path / "Dockerfile").write_text("FROM localhost/busybox:latest\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(EngineError) as failure:
        runtime.build_image(str(tmp_path), tag)
    assert "about-to-fail" in str(failure.value)
    assert not runtime.has_image(tag)
    with pytest.raises(EngineError):
        runtime.build_image(str(tmp_path / "missing"), tag)


# --- removal --------------------------------------------------------------------------


def test_remove_service_leaves_nothing_and_is_idempotent(runtime, service):
    network, volume = service.name("net"), service.name("data")
    runtime.create_network(network, service.labels)
    runtime.create_volume(volume, service.labels)
    app = service.run("app", "sleep", "600", network=network, aliases=("app",),
                      volumes=((volume, "/data"), (service.name("implicit"), "/more")))
    stopped = service.run("once", "true")
    service.wait_exited(stopped)
    assert runtime.labelled(service.id) == {
        "containers": sorted([service.name("app"), service.name("once")]),
        "volumes": sorted([volume, service.name("implicit")]),  # the engine-made one got the label too
        "networks": [network],
    }
    runtime.remove_service(service.id)
    assert runtime.labelled(service.id) == {"containers": [], "volumes": [], "networks": []}
    assert runtime.inspect(app) is None and runtime.containers(service.id) == []
    runtime.remove_service(service.id)


def test_remove_service_takes_what_a_deploy_starts_while_it_removes(runtime, service, monkeypatch):
    """A delete while the service deploys: the deploy starts a container on the service's
    network after the removal listed the containers, so the engine refuses to remove the
    network (in use) at first; the removal goes over what is left again and leaves nothing."""
    network = service.name("net")
    runtime.create_network(network, service.labels)
    service.run("app", "sleep", "600", network=network, aliases=("app",))
    collection, late = type(runtime.client.networks), []
    listed = collection.list

    def deploying(self, *args, **kwargs):  # the deploy's container starts as the removal turns to the networks
        if not late:
            late.append(service.run("late", "sleep", "600", network=network, aliases=("late",)))
        return listed(self, *args, **kwargs)

    monkeypatch.setattr(collection, "list", deploying)
    runtime.remove_service(service.id)
    assert late and runtime.labelled(service.id) == {"containers": [], "volumes": [], "networks": []}


# --- volume content -------------------------------------------------------------------


def _helpers(runtime, service) -> list:
    """Helper containers mounting a volume of ``service``: other tests may be exporting
    volumes of their own at the same time (pytest-xdist)."""
    helpers = runtime.client.containers.list(all=True, filters={"label": "slipway.helper"})
    mounts = {helper.id: (runtime._attrs(helper.id) or {}).get("Mounts") or [] for helper in helpers}
    return [helper for helper in helpers
            if any(isinstance(mount, dict) and service.id in (mount.get("Name") or "") for mount in mounts[helper.id])]


def test_volume_export_and_import_round_trip(runtime, service):
    volume = service.name("data")
    runtime.create_volume(volume, service.labels)
    writer = service.run("writer", "sh", "-c",
                         "mkdir -p /d/sub && printf 'one\\n' > /d/a.txt && head -c 300000 /dev/urandom > /d/sub/b.bin"
                         " && echo hidden > /d/.hidden && chmod 600 /d/a.txt && ln -s a.txt /d/link",
                         volumes=((volume, "/d"),))
    assert service.wait_exited(writer).status == "exited"
    chunks = list(runtime.export_volume(volume))
    assert len(chunks) > 1 and all(isinstance(c, bytes) for c in chunks)  # streamed in chunks
    archive = b"".join(chunks)
    before = _tree(archive)
    assert before["a.txt"] == ("file", 0o600, b"one\n") and before[".hidden"][2] == b"hidden\n"
    assert len(before["sub/b.bin"][2]) == 300000 and before["link"] == ("link", 0o777, "a.txt")
    assert before["sub"][0] == "dir"

    changer = service.run("changer", "sh", "-c",
                          "echo changed > /d/a.txt && echo new > /d/added && mkdir /d/.more && rm /d/.hidden",
                          volumes=((volume, "/d"),))
    service.wait_exited(changer)
    assert _tree(b"".join(runtime.export_volume(volume))) != before
    runtime.import_volume(volume, (archive[i:i + 65536] for i in range(0, len(archive), 65536)))
    assert _tree(b"".join(runtime.export_volume(volume))) == before  # exactly, and nothing more
    reader = service.run("reader", "sh", "-c", "cd /d && ls -A | sort | xargs echo && cat a.txt",
                         volumes=((volume, "/d"),))
    service.wait_exited(reader)
    assert [line.message for line in runtime.logs(reader)] == [".hidden a.txt link sub", "one"]

    empty = service.name("empty")
    runtime.create_volume(empty, service.labels)
    runtime.import_volume(empty, iter([archive]))
    assert _tree(b"".join(runtime.export_volume(empty))) == before
    runtime.create_volume(service.name("blank"), service.labels)
    runtime.import_volume(empty, runtime.export_volume(service.name("blank")))
    assert _tree(b"".join(runtime.export_volume(empty))) == {}  # an empty archive empties the volume
    assert _helpers(runtime, service) == []  # every helper container is gone


def test_volume_export_and_import_errors(runtime, service):
    with pytest.raises(EngineError, match="no such volume"):
        list(runtime.export_volume(service.name("missing")))
    with pytest.raises(EngineError, match="no such volume"):
        runtime.import_volume(service.name("missing"), iter([b""]))
    volume = service.name("data")
    runtime.create_volume(volume, service.labels)
    with pytest.raises(EngineError):
        runtime.import_volume(volume, iter([b"this is not a tar archive" * 100]))
    stream = runtime.export_volume(volume)
    next(stream, None)
    stream.close()  # a reader that stops early leaves no helper behind
    runtime.helper_image = "registry.invalid/slipway/helper:1"
    with pytest.raises(EngineError, match="registry.invalid") as failed:
        list(runtime.export_volume(volume))
    assert "SLIPWAY_RUNTIME_HELPER_IMAGE" in str(failed.value)  # the setting that chose the image
    assert _helpers(runtime, service) == []
    assert runtime.labelled(service.id)["volumes"] == [volume]  # nothing was created on the way


def test_image_names_lists_what_the_engine_has(runtime):
    names = runtime.image_names()
    assert BUSYBOX in names and names == sorted(names)


def test_image_ids_tags_and_networks(runtime, request):
    """``image_id`` answers the engine's sha256 id (None when absent), ``tag_image`` gives
    an image another name (releases keep their images so), ``remove_network`` is
    idempotent."""
    found = runtime.image_id(BUSYBOX)
    assert found is not None and found.startswith("sha256:") and len(found) == 71
    tag = f"localhost/slw-keep-conformance-{secrets.token_hex(4)}:1-web"
    request.addfinalizer(lambda: runtime.remove_image(tag))
    assert runtime.image_id(tag) is None
    runtime.tag_image(found, tag)  # by id
    assert runtime.image_id(tag) == found
    runtime.remove_image(tag)  # the tag only: the image stays
    assert runtime.image_id(tag) is None and runtime.image_id(BUSYBOX) == found
    network = f"slw-conformance-{secrets.token_hex(4)}"
    runtime.create_network(network, {SERVICE_LABEL: "svc_conformance"})
    runtime.remove_network(network)
    runtime.remove_network(network)
    assert network not in runtime.labelled("svc_conformance")["networks"]
    kept = f"localhost/slw-keep-svc_conformance{secrets.token_hex(4)}"
    runtime.tag_image(found, f"{kept}:1-web")
    runtime.remove_service(kept.rpartition("/")[2][len("slw-keep-"):])  # a service's kept images go with it
    assert runtime.image_id(f"{kept}:1-web") is None and runtime.image_id(BUSYBOX) == found
