"""Tenant safety on a real engine, through both runtime clients (podman-py and docker-py on
one Podman socket): what one customer's containers could try against the host or other
customers is run for real and shown refused or contained.

- published ports bind to ``SLIPWAY_PUBLISH_ADDRESS`` only, on host ports the runtime
  picks from ``SLIPWAY_HOST_PORTS`` (also when another deploy took the port first);
- a service's network has no route to another service's containers, nor to the host's
  loopback services; a service's components reach each other by name;
- ``no-new-privileges``, a pids limit, default memory and CPU limits on every container;
- no registry credentials of the server user leave the client;
- pulls end on their time limit and on cancel.
"""
from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from plugins.runtime_common.hostports import HostPorts
from ports.runtime import Cancelled, EngineError, PortSpec
from tests.support.engine import BUSYBOX, Service, _factories, http_get, wait_for
from tests.support.silent import close_listener, silent_listener

pytestmark = pytest.mark.runtime

UPPER_BOUND_S = 10.0  # "promptly": a generous bound, never a timing of the happy path


def make_runtime(name, runtime_url, ulimits, **settings):
    return _factories()[name].create({"SLIPWAY_RUNTIME_URL": runtime_url, "SLIPWAY_RUNTIME_ULIMITS": ulimits, **settings})


@pytest.fixture(params=["podman", "docker"])
def client_name(request):
    return request.param


@pytest.fixture
def runtime(client_name, runtime_url, engine_ulimits):
    return make_runtime(client_name, runtime_url, engine_ulimits)


@pytest.fixture
def services(runtime, request):
    """Throw-away services (removed afterwards) made by calling the fixture."""
    made = []

    def make(engine=None):
        service = Service(engine or runtime)
        made.append(service)
        return service

    yield make
    for service in made:
        service.runtime.remove_service(service.id)


def attrs(runtime, container_id: str) -> dict:
    return runtime.client.containers.get(container_id).attrs


def host_addresses() -> list[str]:
    """The machine's addresses other than loopback (``hostname -I``)."""
    words = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True).stdout.split()
    return [word for word in words if not word.startswith(("127.", "::1"))]


def connects(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


def output(service: Service, container_id: str) -> list[str]:
    service.wait_exited(container_id)
    return [line.message for line in service.runtime.logs(container_id, tail=None)]


def probe(service: Service, component: str, network: str, *targets: str, port: int = 8080, tries: int = 1) -> dict:
    """From a container on ``network``: which ``targets`` answer on ``port``
    (``{target: "hi"/"connected"/"refused"}``), each tried up to ``tries`` times a second
    apart (a name: the network's DNS server may not answer it the moment the container
    starts; CI saw a component's own name fail once while its address answered)."""
    script = "; ".join(
        f'ok=; for i in $(seq {tries}); do if out=$(nc -w 2 {target} {port} </dev/null 2>&1); then ok=1; break; fi; '
        f'[ "$i" -lt {tries} ] && sleep 1; done; '
        f'if [ -n "$ok" ]; then echo "{target} ok $out"; else echo "{target} refused"; fi' for target in targets)
    container = service.run(component, "sh", "-c", script, network=network)
    results = {}
    for line in output(service, container):
        target, _, rest = line.partition(" ")
        results[target] = "refused" if rest == "refused" else (rest[3:].strip() or "connected")
    return results


# --- published ports --------------------------------------------------------------------


def test_a_port_without_host_port_gets_one_in_range_bound_to_loopback_only(runtime, services):
    service = services()
    web = service.run("web", "sh", "-c", "echo published > /www/index.html && exec httpd -f -p 8080 -h /www",
                      ports=(PortSpec(8080),))
    port = runtime.inspect(web).ports[8080]
    assert 20000 <= port <= 29999  # SLIPWAY_HOST_PORTS default, not an ephemeral port
    bindings = attrs(runtime, web)["HostConfig"]["PortBindings"]["8080/tcp"]
    assert bindings == [{"HostIp": "127.0.0.1", "HostPort": str(port)}]
    assert http_get(port).strip() == "published"
    others = host_addresses()
    assert others, "the machine has an address besides loopback to try"
    for address in others:
        assert not connects(address, port), f"port {port} answers on {address}"


def test_publish_address_and_range_come_from_the_settings(client_name, runtime_url, engine_ulimits, services):
    low = free_pair()
    engine = make_runtime(client_name, runtime_url, engine_ulimits, SLIPWAY_HOST_PORTS=f"{low}-{low + 1}",
                          SLIPWAY_PUBLISH_ADDRESS="127.0.0.1")
    service = services(engine)
    one = service.run("one", *server_saying("hi"), ports=(PortSpec(8080),))
    two = service.run("two", *server_saying("hi"), ports=(PortSpec(8080),))
    assert {engine.inspect(one).ports[8080], engine.inspect(two).ports[8080]} == {low, low + 1}
    with pytest.raises(EngineError, match=f"no free host port left in {low}-{low + 1}"):
        service.run("three", *server_saying("hi"), ports=(PortSpec(8080),))
    assert engine.inspect(service.name("three")) is None


class InOrder(HostPorts):
    """Walks the range from its low end: makes which port is tried first certain."""

    def _one(self, protocol, taken):
        return next((port for port in range(self.low, self.high + 1) if port not in taken), None)


def test_a_port_another_deploy_took_meanwhile_is_picked_again(client_name, runtime_url, engine_ulimits,
                                                              services):
    """Two processes racing: the second one does not see the first one's container yet
    (a blind view of the engine, every port looks free), picks the same port, and the
    engine refuses the start; it picks another and starts."""
    low = free_pair()
    first = make_runtime(client_name, runtime_url, engine_ulimits, SLIPWAY_HOST_PORTS=f"{low}-{low}")
    second = make_runtime(client_name, runtime_url, engine_ulimits, SLIPWAY_HOST_PORTS=f"{low}-{low + 1}")
    second.host_ports = InOrder("127.0.0.1", low, low + 1, probe=lambda *_: True)
    second._used_host_ports = set  # blind: it cannot see the first one's container
    a, b = services(first), services(second)
    winner = a.run("web", *server_saying("hi"), ports=(PortSpec(8080),))
    assert first.inspect(winner).ports[8080] == low
    loser = b.run("web", *server_saying("hi"), ports=(PortSpec(8080),))
    assert second.inspect(loser).ports[8080] == low + 1
    assert first.inspect(winner).running and second.inspect(loser).running


def free_pair() -> int:
    """A port P such that P and P + 1 are free on loopback, high in the range."""
    for _ in range(200):
        low = secrets.randbelow(900) + 29000
        if all(connectable_free(port) for port in (low, low + 1)):
            return low
    pytest.fail("no two free ports next to each other in 29000-29900")


def connectable_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# --- networks ---------------------------------------------------------------------------


def test_services_cannot_reach_each_other_but_components_reach_by_name(runtime, services, runtime_url):
    a, b = services(), services()
    net_a, net_b = a.name("net"), b.name("net")
    runtime.create_network(net_a, a.labels)
    runtime.create_network(net_b, b.labels)
    server = a.run("web", *server_saying("from-a"), network=net_a, aliases=("web",))
    b.run("web", *server_saying("from-b"), network=net_b, aliases=("web",))
    address = attrs(runtime, server)["NetworkSettings"]["Networks"][net_a]["IPAddress"]
    assert address

    inside = probe(a, "client", net_a, "web", address, tries=5)  # (an answer once is enough; refused stays refused)
    assert inside == {"web": "from-a", address: "from-a"}, inside
    across = probe(b, "client", net_b, address)
    if across != {address: "refused"}:  # the whole rule set: pytest would cut an assertion's text short
        pytest.fail(f"B reached A: {across}; the operator's jumps in place: {operator_isolation_jump()}\n"
                    f"{firewall()}", pytrace=False)
    # B's own "web" answers B, by the same name: the names do not cross either
    assert probe(b, "other", net_b, "web", tries=5) == {"web": "from-b"}

    # the control: the same probe from a network made without isolation gets through,
    # so "refused" above is the isolation and not a probe that cannot connect
    import podman

    plain = b.name("plain")
    with podman.PodmanClient(base_url=runtime_url) as client:
        client.networks.create(plain, driver="bridge", labels=b.labels)
    assert probe(b, "control", plain, address) == {address: "from-a"}


def test_isolation_holds_after_another_services_last_container_stops(runtime_url, engine_ulimits, request):
    """A prober of service B tries A's server twice a second, for good; then the only
    container of a third service C stops. Every try after that must still be refused.
    netavark 1.4.0 (Podman 4.3) deletes the FORWARD jump to its isolation chain at that
    stop; the operator's own jumps (``scripts/keep-netavark-isolation``, docs/operator/
    engines.md) keep isolation. With them on the host (as CI has them, and requires with
    ``SLIPWAY_REQUIRE_ISOLATION_JUMP=1``) the test must pass; without them, it is expected to
    fail on such versions. The test first puts netavark's jump to NETAVARK_FORWARD at the
    top of FORWARD, as netavark itself does whenever it makes that jump again: a jump of the
    operator's in FORWARD alone (all the script made before) then fails it. (An engine
    fault, so once, through podman-py.)"""
    if not operator_isolation_jump():
        if os.environ.get("SLIPWAY_REQUIRE_ISOLATION_JUMP") == "1":  # CI: the jumps must be there
            pytest.fail("SLIPWAY_REQUIRE_ISOLATION_JUMP=1 but the operator's isolation jumps are not in FORWARD "
                        "and first in NETAVARK_FORWARD (scripts/keep-netavark-isolation, run as root)")
        request.applymarker(pytest.mark.xfail(
            reason="no operator isolation jump on this host (scripts/keep-netavark-isolation): netavark 1.4.0 "
                   "deletes its own when the last container of any isolated network stops", strict=False))
    netavark_forward_on_top(request)
    engine = make_runtime("podman", runtime_url, engine_ulimits)
    a, b, c = Service(engine), Service(engine), Service(engine)
    for service in (a, b, c):
        request.addfinalizer(lambda service=service: engine.remove_service(service.id))
    for service in (a, b, c):
        engine.create_network(service.name("net"), service.labels)
    server = a.run("web", *server_saying("from-a"), network=a.name("net"))
    address = attrs(engine, server)["NetworkSettings"]["Networks"][a.name("net")]["IPAddress"]
    prober = b.run("prober", "sh", "-c", f"while true; do echo \"try $(nc -w 1 {address} 8080 </dev/null 2>&1)\"; "
                                         f"sleep 0.5; done", network=b.name("net"))

    def tries():
        return [line.message for line in engine.logs(prober, tail=None) if line.message.startswith("try")]

    wait_for(lambda: len(tries()) >= 2, "the prober's first tries")
    assert "try from-a" not in tries()
    c.wait_exited(c.run("brief", "true", network=c.name("net")))
    before = len(tries())
    wait_for(lambda: len(tries()) >= before + 4, "four more tries")
    after = tries()[before:]
    if "try from-a" in after:
        pytest.fail(f"B reached A after C's last container stopped: {after}\n{firewall()}", pytrace=False)


def server_saying(text: str) -> tuple:
    """busybox: answers ``text`` to every connection on 8080, for good."""
    return ("nc", "-ll", "-p", "8080", "-e", "echo", text)


NETAVARK_JUMP = ("-m", "comment", "--comment", "netavark firewall plugin rules", "-j", "NETAVARK_FORWARD")


def netavark_forward_on_top(request) -> None:
    """A copy of netavark's jump to NETAVARK_FORWARD at the top of FORWARD, above the
    operator's jump there, for the test (where iptables can be changed: root). The copy is
    added, never moved, so no packet finds FORWARD without the jump meanwhile; the
    finalizer deletes the first copy (the same rule: which one goes makes no difference)."""
    def iptables(*args) -> int:
        try:
            return subprocess.run(["iptables", *args], capture_output=True, timeout=10).returncode
        except (OSError, subprocess.SubprocessError):
            return -1

    if iptables("-C", "FORWARD", *NETAVARK_JUMP) == 0 and iptables("-I", "FORWARD", "1", *NETAVARK_JUMP) == 0:
        request.addfinalizer(lambda: iptables("-D", "FORWARD", *NETAVARK_JUMP))


OPERATOR_JUMP = '-m comment --comment "slipway: keep netavark isolation" -j NETAVARK_ISOLATION_1'


def operator_isolation_jump() -> bool:
    """Whether the operator's jumps to netavark's isolation chain are in place
    (``scripts/keep-netavark-isolation``): in FORWARD, and as the first rule of
    NETAVARK_FORWARD, where netavark accepts what comes from its networks' subnets (a jump
    in FORWARD alone does nothing once netavark has put its jump to NETAVARK_FORWARD back
    above it). False where iptables cannot be asked."""
    try:
        forward = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, timeout=10)
        chain = subprocess.run(["iptables", "-S", "NETAVARK_FORWARD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    rules = chain.stdout.splitlines()[1:]  # after "-N NETAVARK_FORWARD"
    return (forward.returncode == chain.returncode == 0 and f"-A FORWARD {OPERATOR_JUMP}" in forward.stdout
            and rules[:1] == [f"-A NETAVARK_FORWARD {OPERATOR_JUMP}"])


def firewall() -> str:
    """The host's filter rules, for a failure message (root only; empty otherwise)."""
    try:
        return subprocess.run(["iptables", "-S"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def test_a_network_made_before_isolation_is_made_again_isolated(runtime, services, runtime_url):
    import podman

    service = services()
    name = service.name("net")
    with podman.PodmanClient(base_url=runtime_url) as client:
        client.networks.create(name, driver="bridge", dns_enabled=True, labels=service.labels)
        assert not client.networks.get(name).attrs.get("options", {}).get("isolate")
        runtime.create_network(name, service.labels)
        assert client.networks.get(name).attrs["options"]["isolate"] == "true"


def test_a_new_network_is_asked_again_when_the_engine_names_no_options_then_refused(runtime, services,
                                                                                   monkeypatch):
    """Podman once answered ``{}`` for the options of a network it had just made isolated:
    asked again, the network is used; an engine that keeps answering so gets the network
    removed and the deploy refused ("did not isolate")."""
    from ports.runtime import EngineError

    service = services()
    asked = type(runtime)._network_isolation
    answers = []

    def lagging(self, name):
        answers.append(asked(self, name) if len(answers) else {})  # the first answer names no options
        return answers[-1]
    monkeypatch.setattr(type(runtime), "_network_isolation", lagging)
    runtime.create_network(service.name("net"), service.labels)
    assert answers[0] == {} and answers[-1] is None and len(answers) >= 2
    assert runtime.labelled(service.id)["networks"] == [service.name("net")]

    monkeypatch.setattr(type(runtime), "_network_isolation", lambda self, name: {})
    with pytest.raises(EngineError, match="did not isolate"):
        runtime.create_network(service.name("other"), service.labels)
    assert runtime.labelled(service.id)["networks"] == [service.name("net")]  # the refused one is gone


def test_containers_do_not_reach_the_hosts_loopback_services(runtime, services):
    """A listener on the host's 127.0.0.1 (as PostgreSQL on 5432 is) cannot be reached from
    a service's container: not by the network's gateway, the host's other addresses or
    ``host.containers.internal``; nor is the host's PostgreSQL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    threading.Thread(target=_answer_hi, args=(listener,), daemon=True).start()
    try:
        assert connects("127.0.0.1", port)  # it answers on the host
        service = services()
        network = service.name("net")
        runtime.create_network(network, service.labels)
        gateway = _gateway(runtime, network)
        targets = [gateway, *host_addresses(), "host.containers.internal"]
        reached = still_the_hosts(probe(service, "prober", network, *targets, port=port), gateway)
        if not all(result == "refused" for result in reached.values()):  # whole: pytest cuts a dict short
            pytest.fail(f"a container reached the host's loopback listener: {reached}", pytrace=False)
        if connects("127.0.0.1", 5432):
            reached = still_the_hosts(probe(service, "pg", network, gateway, *host_addresses(), port=5432), gateway)
            if not all(result == "refused" for result in reached.values()):
                pytest.fail(f"a container reached the host's PostgreSQL: {reached}", pytrace=False)
    finally:
        close_listener(listener)


def still_the_hosts(reached: dict, gateway: str) -> dict:
    """``reached`` without the addresses that stopped being the host's while the probe ran:
    the gateway of another test's network, removed meanwhile, is then an address like any
    other, routed out of the host (where this machine's network accepts every connection:
    "connected", seen when the tests run side by side)."""
    now = {gateway, "host.containers.internal", *host_addresses()}
    return {target: result for target, result in reached.items() if target in now}


def _answer_hi(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.sendall(b"hi\n")


def _gateway(runtime, network: str) -> str:
    import podman

    with podman.PodmanClient(base_url=runtime.url) as client:
        return client.networks.get(network).attrs["subnets"][0]["gateway"]


# --- limits -----------------------------------------------------------------------------


def test_every_container_runs_without_new_privileges_and_with_limits(runtime, services):
    service = services()
    container = service.run("app", "sh", "-c", "grep NoNewPrivs /proc/self/status")
    lines = output(service, container)
    assert "NoNewPrivs:\t1" in lines, lines
    host = attrs(runtime, container)["HostConfig"]
    assert "no-new-privileges" in (host.get("SecurityOpt") or []), host.get("SecurityOpt")
    assert host["PidsLimit"] == 1024  # SLIPWAY_PIDS_LIMIT default
    assert host["Memory"] == 512 * 1024 * 1024  # SLIPWAY_DEFAULT_MEMORY_MB default
    assert runtime.inspect(container).cpu_limit == 100.0  # SLIPWAY_DEFAULT_CPUS default: one core
    limited = service.run("limited", "true", cpus=0.25, memory_mb=64)
    host = attrs(runtime, limited)["HostConfig"]
    assert host["Memory"] == 64 * 1024 * 1024 and runtime.inspect(limited).cpu_limit == 25.0


def test_a_fork_bomb_is_held_by_the_pids_limit(client_name, runtime_url, engine_ulimits, services):
    engine = make_runtime(client_name, runtime_url, engine_ulimits, SLIPWAY_PIDS_LIMIT="50",
                          SLIPWAY_DEFAULT_MEMORY_MB="256", SLIPWAY_DEFAULT_CPUS="0.5")
    service = services(engine)
    # the bomb runs in a child shell (ash gives up on the first fork that fails); the
    # container's first process stays to be counted with whatever the bomb left running
    bomb = service.run("bomb", "sh", "-c",
                       "sh -c 'for i in $(seq 2000); do sleep 100 & done'; echo loop-done; exec sleep 600")
    wait_for(lambda: "loop-done" in [line.message for line in engine.logs(bomb, tail=None)], "the loop to end")
    lines = [line.message for line in engine.logs(bomb, tail=None)]
    assert any("fork" in line or "Resource temporarily unavailable" in line for line in lines), lines[-5:]
    host = attrs(engine, bomb)["HostConfig"]
    assert host["PidsLimit"] == 50 and host["Memory"] == 256 * 1024 * 1024
    assert engine.inspect(bomb).cpu_limit == 50.0
    import docker  # the observer: the engine's own count of the container's processes

    observer = docker.DockerClient(base_url=runtime_url)
    try:
        pids = observer.api.stats(bomb, stream=False)["pids_stats"]["current"]
    finally:
        observer.close()
    assert 0 < pids <= 50, pids  # 2000 asked for


# --- registry credentials ---------------------------------------------------------------


class RecordingProxy:
    """A Unix socket that passes everything to the engine's socket and keeps the bytes
    the client sent: what really left the client, headers included."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.directory = tempfile.mkdtemp(prefix="slw-proxy-", dir="/tmp")
        self.path = os.path.join(self.directory, "engine.sock")
        self.sent = bytearray()
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(self.path)
        self._server.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def _accept(self):
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX)
            engine.connect(self.upstream)
            threading.Thread(target=self._pump, args=(client, engine, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client, False), daemon=True).start()

    def _pump(self, source, target, record):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if record:
                    with self._lock:
                        self.sent.extend(data)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def headers(self, name: str) -> list[str]:
        """Values of every ``name:`` header line the client sent."""
        with self._lock:
            text = bytes(self.sent).decode("latin-1")
        prefix = name.lower() + ":"
        return [line.split(":", 1)[1].strip() for line in text.split("\r\n") if line.lower().startswith(prefix)]

    def requests(self) -> list[str]:
        with self._lock:
            text = bytes(self.sent).decode("latin-1")
        return [line for line in text.split("\r\n") if line.startswith(("GET ", "POST ", "PUT ", "DELETE ", "HEAD "))]

    def close(self):
        close_listener(self._server)
        os.unlink(self.path)
        os.rmdir(self.directory)


@pytest.fixture
def docker_login(tmp_path, monkeypatch):
    """HOME holds the server user's registry logins (docker-py's ``~/.docker/config.json``);
    the password is returned."""
    password = "server-secret-" + secrets.token_hex(4)
    encoded = base64.b64encode(f"user:{password}".encode()).decode()
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    registries = ["127.0.0.1:9", "https://index.docker.io/v1/", "docker.io", "localhost"]
    (home / ".docker" / "config.json").write_text(json.dumps({"auths": {r: {"auth": encoded} for r in registries}}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    return password


@pytest.fixture
def proxy(runtime_url):
    proxy = RecordingProxy(runtime_url.removeprefix("unix://"))
    yield proxy
    proxy.close()


def test_pulls_and_builds_send_no_registry_credentials(client_name, proxy, docker_login, engine_ulimits,
                                                       tmp_path):
    # the control: docker-py as it comes sends the login it found with a pull
    import docker

    stock = docker.DockerClient(base_url=proxy.url)
    try:
        stock.api.pull("127.0.0.1:9/slipway/nothing", tag="1")
    except docker.errors.DockerException:
        pass
    finally:
        stock.close()
    leaked = proxy.headers("X-Registry-Auth")
    assert leaked and docker_login in base64.urlsafe_b64decode(leaked[0] + "==").decode(), leaked
    proxy.sent.clear()

    engine = make_runtime(client_name, proxy.url, engine_ulimits)
    with pytest.raises(EngineError, match="127.0.0.1:9/slipway/nothing"):
        engine.pull_image("127.0.0.1:9/slipway/nothing:1")
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {BUSYBOX}\nRUN true\n")
    tag = f"localhost/slw-test-auth-{secrets.token_hex(4)}:1"
    try:
        engine.build_image(str(context), tag)
    finally:
        engine.remove_image(tag)
    sent = proxy.requests()
    assert any("/images/create" in line or "/images/pull" in line for line in sent), sent
    assert any("/build" in line for line in sent), sent
    assert proxy.headers("X-Registry-Auth") == []
    assert proxy.headers("X-Registry-Config") == []
    for form in (docker_login, base64.b64encode(f"user:{docker_login}".encode()).decode()):
        assert form.encode() not in bytes(proxy.sent)


# --- pull time limit and cancel -------------------------------------------------------------


@pytest.fixture
def silent_registry():
    """A "registry" on loopback that accepts connections and never says a word: the
    engine's pull of ``127.0.0.1:<port>/...`` hangs (about 80 s) until the engine gives up."""
    with silent_listener() as (host, port):
        yield f"{host}:{port}"


def test_a_hanging_pull_times_out(runtime, silent_registry):
    started = time.monotonic()
    with pytest.raises(Cancelled, match=rf"pulling {silent_registry}/slipway/x:1 timed out after 1 s"):
        runtime.pull_image(f"{silent_registry}/slipway/x:1", timeout=1)
    assert time.monotonic() - started < UPPER_BOUND_S


def test_the_pull_time_limit_defaults_to_the_setting(client_name, runtime_url, engine_ulimits, silent_registry):
    engine = make_runtime(client_name, runtime_url, engine_ulimits, SLIPWAY_PULL_TIMEOUT="1.5")
    assert engine.settings.pull_timeout == 1.5
    started = time.monotonic()
    with pytest.raises(Cancelled, match="timed out after 1.5 s"):
        engine.pull_image(f"{silent_registry}/slipway/x:1")
    assert time.monotonic() - started < UPPER_BOUND_S


def test_a_hanging_pull_ends_when_cancelled(runtime, silent_registry):
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Cancelled, match=rf"^cancelled: pulling {silent_registry}/slipway/x:1$"):
        runtime.pull_image(f"{silent_registry}/slipway/x:1", timeout=300, cancel=cancel)
    assert time.monotonic() - started < UPPER_BOUND_S
    for _ in range(3):  # the client's pooled connections still work after giving up on a call
        assert runtime.ping() and runtime.has_image(BUSYBOX)

