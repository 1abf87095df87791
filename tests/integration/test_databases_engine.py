"""The database templates on real Podman, through a real server: a PostgreSQL, a MariaDB
and a Redis service deploy with generated passwords and become healthy; a client on the
customer network connects with the password read from ``/secrets`` (and not without it);
the password shows in no other answer, no event and not in the server's log; a viewer
key is 403 on ``/secrets``, another customer's key 404. Over the customer network a
customer's app (a busybox service with ``nc``) reaches its own databases by their service
names and not another customer's database by its name; the network goes with the last
service on it."""
from __future__ import annotations

import json
import os
import time

import pytest

from ports.runtime import SERVICE_LABEL, ContainerSpec
from tests.support.dbimages import mariadb_image, postgres_image, redis_image  # noqa: F401 (fixtures)
from tests.support.engine import BUSYBOX
from tests.support.panel_server import _until, admin_key, serve_panel
from tests.support.processes import read_output

pytestmark = pytest.mark.runtime


@pytest.fixture(params=["podman"])
def panel(request, runtime_url, migrated_database_url, engine_ulimits, tmp_path):
    """A real server on the Podman service, through the Podman client. Through the Docker
    client (Podman's Docker-compatible API) the database's name on the customer network
    was not served to every client within 30 s in this environment (sometimes it was):
    not understood yet, so not claimed here; the attachment itself passes the runtime
    conformance suite with the Podman, Docker and Swarm runtimes."""
    from app.pluginmanager import make_plugin_manager, runtimes
    from tests.support.engine import engine_settings

    engine = runtimes(make_plugin_manager())[request.param].create(engine_settings(runtime_url, engine_ulimits))
    key = admin_key(migrated_database_url)
    log = open(tmp_path / "server.log", "w+")
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME=request.param, SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_HEALTH_INTERVAL="1",
               SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_WORK_DIR=str(tmp_path / "work"),
               SLIPWAY_DEPLOY_HEALTH_TIMEOUT="180", SLIPWAY_CUSTOMER_MAX_CPUS="64",
               SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536")
    server, client = serve_panel(key, env, stderr=log)
    made, helpers, networks = [], [], []
    yield client, engine, made, helpers, networks, log
    client.close()
    server.terminate()
    server.wait(timeout=20)
    for service_id in made + helpers:
        engine.remove_service(service_id)
    for network in networks:
        engine.remove_network(network)
    log.close()


def _key(client, role: str, customer_id: str | None = None) -> dict:
    body = {"name": f"{role}-key", "role": role, **({"customerId": customer_id} if customer_id else {})}
    created = client.post("/api/v1/api-keys", json=body)
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['key']}"}


def _create(client, made, customer, name, **body):
    created = client.post("/api/services", json={"name": name, "customer_id": customer["id"], **body})
    assert created.status_code == 201, created.text
    made.append(created.json()["id"])
    return created.json()["id"]


def _client(engine, helpers, network: str, image: str, script: str, env: dict) -> tuple[int, str]:
    """Run ``script`` in a one-off container of ``image`` on ``network``: (exit code, output).
    The container is removed (a container left on the network, even stopped, keeps it)."""
    helper = f"svc_dbclient{time.monotonic_ns() % 10**9}"
    helpers.append(helper)
    container = engine.run(ContainerSpec(name=f"slw-{helper}", image=image, labels={SERVICE_LABEL: helper},
                                         command=("sh", "-c", script), environment=env, network=network))
    deadline = time.monotonic() + 90
    while (state := engine.inspect(container)).running:
        assert time.monotonic() < deadline, "the client did not finish"
        time.sleep(0.3)
    output = "\n".join(line.message for line in engine.logs(container, tail=None))
    engine.remove_service(helper)
    return state.exit_code, output


def _verdicts(client, service_id: str, expected: dict) -> dict:
    """What the app service's log said last of each target ("yes" reached, "no" not): once
    it says what is ``expected`` of every target (names may take a moment to be served on
    a network a container just joined), or what it said at the deadline."""
    deadline = time.monotonic() + 60
    while True:
        lines = client.get(f"/api/services/{service_id}/logs", params={"tail": 400}).json()["logs"]
        said = {}
        for line in lines:
            words = line["message"].split()
            if len(words) == 3 and words[0] == "reach":
                said[words[1]] = words[2]
        if said == expected or (time.monotonic() > deadline and set(said) == set(expected)):
            return said
        assert time.monotonic() < deadline + 30, lines
        time.sleep(0.5)


def _until_it_answers(script: str) -> str:
    """``script`` tried for up to 30 s (a name may take a moment to be served on the network).
    Only the last try's output is the container's: a failed try's error written beside the
    answer of the next one could be read back after it (the engine's log orders stdout and
    stderr lines by their time stamps), and the answer would not be the last line."""
    return (f"for i in $(seq 1 60); do out=$( ( {script} ) 2>&1) && {{ echo \"$out\"; exit 0; }}; sleep 0.5; done; "
            f"echo \"$out\"; exit 1")


def _until_it_refuses(script: str, refusal: str) -> str:
    """``script`` tried for up to 30 s until its output says ``refusal``; then its output and
    exit code are the container's. Podman's name server serves a network's names to a
    container only once it has read that container's address, which it does after the
    container has started: a one-off client's first lookups can be "Name or service not
    known". Only such a try is repeated: an answer that is not ``refusal`` (a connection
    let in without the password) runs out the 30 s and fails the check."""
    return (f"for i in $(seq 1 60); do out=$( ( {script} ) 2>&1); code=$?; "
            f"case \"$out\" in *'{refusal}'*) echo \"$out\"; exit $code;; esac; sleep 0.5; done; "
            f"echo \"$out\"; exit 99")


#: a customer's app: says every second whether it can open a TCP connection to each target
APP = ("services:\n  app:\n    image: " + BUSYBOX + "\n    environment:\n      TARGETS: '${TARGETS}'\n"
       "    command: [sh, -c, 'while true; do for t in $$TARGETS; do h=$${t%:*}; p=$${t#*:}; "
       "if nc -w 2 $$h $$p -e true 2>/dev/null; then echo reach $$t yes; else echo reach $$t no; fi; done; "
       "sleep 1; done']\n")


def test_databases_with_generated_passwords_on_the_customer_network(panel, postgres_image, mariadb_image,
                                                                     redis_image):
    client, engine, made, helpers, networks, log = panel
    acme = client.post("/api/customers", json={"name": "Acme"}).json()
    other = client.post("/api/customers", json={"name": "Other"}).json()
    networks += [f"slw-net-{acme['id']}", f"slw-net-{other['id']}"]
    tag = f"{os.getpid() % 1000}{time.monotonic_ns() % 10000}"
    pg, maria, cache = f"pg{tag}", f"maria{tag}", f"cache{tag}"
    pg_id = _create(client, made, acme, pg, deploy_method="template", template_id="postgres",
                    customer_network=True, variables={"IMAGE": postgres_image})
    maria_id = _create(client, made, acme, maria, deploy_method="template", template_id="mariadb",
                       customer_network=True, variables={"IMAGE": mariadb_image})
    cache_id = _create(client, made, other, cache, deploy_method="template", template_id="redis",
                       customer_network=True, variables={"IMAGE": redis_image})
    details = {sid: _until(client, sid, "running", seconds=240) for sid in (pg_id, maria_id, cache_id)}
    for sid, detail in details.items():
        assert set(detail["variables"].values()) >= {"***"}, detail["variables"]

    # healthy: each template's healthcheck passes (the service's health follows the engine's)
    deadline = time.monotonic() + 60
    while not all(client.get(f"/api/services/{sid}").json()["health"]["status"] == "healthy" for sid in details):
        assert time.monotonic() < deadline, [client.get(f"/api/services/{sid}").json()["health"] for sid in details]
        time.sleep(0.5)
    assert details[pg_id]["connections"] == [{"component": "db", "host": pg, "port": 5432}]
    assert details[cache_id]["connections"] == [{"component": "redis", "host": cache, "port": 6379}]

    secrets = {sid: client.get(f"/api/services/{sid}/secrets").json()["secrets"] for sid in details}
    pg_password = secrets[pg_id]["POSTGRES_PASSWORD"]
    maria_password = secrets[maria_id]["MARIADB_ROOT_PASSWORD"]
    redis_password = secrets[cache_id]["REDIS_PASSWORD"]
    assert len({pg_password, maria_password, redis_password}) == 3 and all(
        len(p) == 32 for p in (pg_password, maria_password, redis_password))

    # clients on the customer network connect by the service's name with the password, not without it
    acme_net, other_net = f"slw-net-{acme['id']}", f"slw-net-{other['id']}"
    code, out = _client(engine, helpers, acme_net, postgres_image,
                        _until_it_answers(f"psql -h {pg} -U postgres -d app -Atc 'select 40 + 2'"),
                        {"PGPASSWORD": pg_password})
    assert (code, out.strip().splitlines()[-1]) == (0, "42"), out
    code, out = _client(engine, helpers, acme_net, postgres_image,
                        _until_it_refuses(f"psql -h {pg} -U postgres -d app -Atc 'select 1'",
                                          "password authentication failed"), {"PGPASSWORD": "wrong"})
    assert code != 0 and "password authentication failed" in out, out
    code, out = _client(engine, helpers, acme_net, mariadb_image,
                        _until_it_answers(f"mariadb -h {maria} -uroot -N -e 'select 40 + 2; show databases like \"app\"'"),
                        {"MYSQL_PWD": maria_password})
    assert code == 0 and out.split()[-2:] == ["42", "app"], out
    code, out = _client(engine, helpers, acme_net, mariadb_image,
                        _until_it_refuses(f"mariadb -h {maria} -uroot -e 'select 1'", "Access denied"),
                        {"MYSQL_PWD": "wrong"})
    assert code != 0 and "Access denied" in out, out
    code, out = _client(engine, helpers, other_net, redis_image,
                        _until_it_answers(f"redis-cli -h {cache} set k v | grep -q OK && redis-cli -h {cache} get k"),
                        {"REDISCLI_AUTH": redis_password})
    assert code == 0 and out.split()[-1] == "v", out
    code, out = _client(engine, helpers, other_net, redis_image,
                        _until_it_refuses(f"redis-cli -h {cache} get k", "NOAUTH"), {})
    assert code != 99 and "NOAUTH" in out, out

    # keys: a viewer reads no secret; another customer's key sees neither the service nor its secrets
    viewer = _key(client, "viewer")
    assert client.get(f"/api/services/{pg_id}/secrets", headers=viewer).status_code == 403
    assert client.get(f"/api/services/{pg_id}", headers=viewer).json()["variables"]["POSTGRES_PASSWORD"] == "***"
    stranger = _key(client, "customer", other["id"])
    assert client.get(f"/api/services/{pg_id}/secrets", headers=stranger).status_code == 404
    assert client.get(f"/api/services/{pg_id}", headers=stranger).status_code == 404
    own = _key(client, "customer", acme["id"])
    assert client.get(f"/api/services/{pg_id}/secrets", headers=own).json()["secrets"] == secrets[pg_id]

    # a customer's app reaches its own databases by name, not another customer's database by
    # that customer's service name (by address the networks are isolated as every network
    # Slipway makes: tests/integration/test_runtime_tenant_safety.py, with its engine fault)
    app = _create(client, made, acme, f"app{tag}", deploy_method="compose", compose=APP, customer_network=True,
                  variables={"TARGETS": f"{pg}:5432 {maria}:3306 {cache}:6379"})
    other_app = _create(client, made, other, f"other{tag}", deploy_method="compose", compose=APP,
                        customer_network=True, variables={"TARGETS": f"{cache}:6379 {pg}:5432"})
    _until(client, app, "running", seconds=120)
    _until(client, other_app, "running", seconds=120)
    mine = {f"{pg}:5432": "yes", f"{maria}:3306": "yes", f"{cache}:6379": "no"}
    assert _verdicts(client, app, mine) == mine
    theirs = {f"{cache}:6379": "yes", f"{pg}:5432": "no"}
    assert _verdicts(client, other_app, theirs) == theirs

    # the passwords are in no answer but /secrets, in no event and not in the server's log
    admin_seen = []
    for sid in made:
        for path in (f"/api/services/{sid}", f"/api/services/{sid}/events", f"/api/services/{sid}/releases",
                     f"/api/services/{sid}/deploys"):
            answer = client.get(path)
            assert answer.status_code == 200, answer.text
            admin_seen.append(answer.text)
    admin_seen.append(client.get("/api/services", params={"per_page": 100}).text)
    everything = "\n".join(admin_seen) + read_output(log)
    for password in (pg_password, maria_password, redis_password):
        assert password not in everything

    # a PATCH sending *** back keeps the password, one sending a new one changes it at the
    # redeploy (which stops the old server first: one server per data volume); the data stays
    kept = client.patch(f"/api/services/{pg_id}", json={"variables": {**details[pg_id]["variables"],
                                                                       "POSTGRES_DB": "app"}})
    assert kept.status_code == 200, kept.text
    assert client.get(f"/api/services/{pg_id}/secrets").json()["secrets"]["POSTGRES_PASSWORD"] == pg_password
    code, out = _client(engine, helpers, acme_net, postgres_image,
                        f"psql -h {pg} -U postgres -d app -Atc 'create table kept (n int); insert into kept values (7)'",
                        {"PGPASSWORD": pg_password})
    assert code == 0, out
    changed = client.patch(f"/api/services/{pg_id}", json={"variables": {**details[pg_id]["variables"],
                                                                          "POSTGRES_PASSWORD": "n3w-pass'word"}})
    assert changed.status_code == 200 and changed.json()["variables"]["POSTGRES_PASSWORD"] == "***"
    assert client.post(f"/api/services/{pg_id}/redeploy").status_code == 200
    _until(client, pg_id, "running", seconds=180)
    code, out = _client(engine, helpers, acme_net, postgres_image,
                        _until_it_answers(f"psql -h {pg} -U postgres -d app -Atc 'select n from kept'"),
                        {"PGPASSWORD": "n3w-pass'word"})
    assert (code, out.strip().splitlines()[-1]) == (0, "7"), out
    code, out = _client(engine, helpers, acme_net, postgres_image,
                        f"psql -h {pg} -U postgres -d app -Atc 'select 1'", {"PGPASSWORD": pg_password})
    assert code != 0, out
    for sid in (pg_id, maria_id, app):
        assert client.delete(f"/api/services/{sid}").status_code == 204
    assert not _network_exists(engine, acme_net)
    assert _network_exists(engine, other_net)  # the other customer's services still use theirs


def _network_exists(engine, name: str) -> bool:
    return any(network.name == name for network in engine.client.networks.list())




def test_server_refuses_to_start_without_a_key(database_url, tmp_path):
    """No SLIPWAY_SECRET_KEY and no key file in the work folder: `slipway serve` stops with a
    clear configuration error; after `slipway init` (which writes the file) it starts."""
    from tests.support.processes import free_port, slipway

    work = tmp_path / "work"
    env = {"SLIPWAY_SECRET_KEY": "", "SLIPWAY_WORK_DIR": str(work)}
    slipway(database_url, "init", env={"SLIPWAY_WORK_DIR": str(tmp_path / "elsewhere")})
    status, document = slipway(database_url, "serve", "--port", str(free_port()), env=env, check=False)
    assert status == 1 and document["error"]["code"] == "configuration"
    assert "SLIPWAY_SECRET_KEY" in document["error"]["message"] and "slipway init" in document["error"]["message"]
    _, initialised = slipway(database_url, "init", env=env)
    assert initialised["secretKeyFile"] == str(work / "secret.key") and json.dumps(initialised)
