"""Engine-aware backups on real Podman, through a real server: PostgreSQL, MariaDB and
Redis services (composes written here, with the ``slipway.backup`` label and a command that
starts the server of Debian's packages) get rows from a client, are backed up (a dump
through exec in the running container, their data volume not archived), changed,
restored, and the first rows are read again. A backup taken while a client writes to
PostgreSQL without pause restores to a consistent state. A dump verifies in a scratch
container; a damaged or cut one fails with the reason."""
from __future__ import annotations

import os
import threading
import time

import pytest

from app.storage.backup_archives import BackupArchives
from core.panel import dumps
from core.panel.backups import archive_key
from core.panel.dumps import manifest_parts
from plugins.backup_local import LocalFactory
from ports.settings import Settings
from tests.support.dbimages import mariadb_image, postgres_image, redis_image  # noqa: F401 (fixtures)
from tests.support.engine import engine_for, engine_settings
from tests.support.panel_server import _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime
BUSYBOX = "localhost/busybox:latest"
PASSWORD = "s3cret-Pw"

POSTGRES = """
services:
  db:
    image: {image}
    labels:
      slipway.backup: postgres
    environment:
      POSTGRES_PASSWORD: {password}
    volumes:
      - pgdata:/var/lib/postgresql/data
    command:
      - sh
      - -c
      - >-
        mkdir -p /var/lib/postgresql/data /run/postgresql &&
        chown -R postgres:postgres /var/lib/postgresql /run/postgresql &&
        exec su postgres -s /bin/sh -c 'P=/usr/lib/postgresql/15/bin; D=/var/lib/postgresql/data;
        [ -s $$D/PG_VERSION ] || {{ echo "$$POSTGRES_PASSWORD" > /tmp/pw &&
        $$P/initdb -D $$D -U postgres --pwfile=/tmp/pw --auth=scram-sha-256 >/dev/null && rm /tmp/pw; }};
        exec $$P/postgres -D $$D -c listen_addresses=127.0.0.1'
volumes:
  pgdata: {{}}
"""

MARIADB = """
services:
  db:
    image: {image}
    labels: ["slipway.backup=mysql"]
    volumes:
      - mydata:/var/lib/mysql
    command:
      - sh
      - -c
      - >-
        mkdir -p /run/mysqld /var/lib/mysql && chown -R mysql:mysql /run/mysqld /var/lib/mysql &&
        {{ [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null; }} &&
        exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=127.0.0.1
volumes:
  mydata: {{}}
"""

REDIS = """
services:
  cache:
    image: {image}
    labels:
      slipway.backup: redis
    environment:
      REDIS_PASSWORD: {password}
    volumes:
      - rdata:/data
    command: [sh, -c, 'exec redis-server --dir /data --bind 127.0.0.1 --requirepass "$$REDIS_PASSWORD" --save "60 1" --appendonly {appendonly}']
  files:
    image: {busybox}
    command: [sh, -c, "echo kept > /files/a.txt; exec sleep 100000"]
    volumes:
      - files:/files
volumes:
  rdata: {{}}
  files: {{}}
"""


@pytest.fixture(params=["podman"])
def panel(request, migrated_database_url, tmp_path):
    runtime_url, engine_ulimits = engine_for(request, request.param)
    backup_dir = tmp_path / "backups"
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME=request.param, SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_BACKUP_DIR=str(backup_dir), SLIPWAY_RUNTIME_HELPER_IMAGE=BUSYBOX,
               SLIPWAY_CUSTOMER_MAX_CPUS="64", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536")
    server, client = serve_panel(key, env)
    customer = client.post("/api/customers", json={"name": "Acme"}).json()
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())[request.param].create(engine_settings(runtime_url, engine_ulimits))
    engine.helper_image = BUSYBOX
    made = []
    yield Panel(client, customer, engine, made, backup_dir)
    for service_id in made:
        engine.remove_service(service_id)
    client.close()
    server.terminate()
    server.wait(timeout=20)


class Panel:
    def __init__(self, client, customer, engine, made, backup_dir):
        self.client, self.customer, self.engine, self.made, self.backup_dir = client, customer, engine, made, backup_dir

    def service(self, compose: str, prefix: str) -> str:
        created = self.client.post("/api/services", json={
            "name": f"{prefix}-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": self.customer["id"],
            "deploy_method": "compose", "compose": compose})
        assert created.status_code == 201, created.text
        service_id = created.json()["id"]
        self.made.append(service_id)
        _until(self.client, service_id, "running", seconds=180)
        return service_id

    def container(self, service_id: str, component: str = "db") -> str:
        [state] = [s for s in self.engine.containers(service_id)
                   if s.labels.get("slipway.component") == component and s.running]
        return state.id

    def backup(self, service_id: str) -> dict:
        accepted = self.client.post(f"/api/services/{service_id}/backups")
        assert accepted.status_code == 202, accepted.text
        return wait_backup(self.client, f"/api/services/{service_id}/backups/{accepted.json()['id']}",
                           lambda b: b["status"] == "completed")

    def restore(self, service_id: str, backup: dict) -> dict:
        path = f"/api/services/{service_id}/backups/{backup['id']}"
        assert self.client.post(f"{path}/restore").status_code == 202
        return wait_backup(self.client, path, lambda b: (b["restore"] or {}).get("status") == "completed",
                           seconds=240)

    def _archives(self, service_id: str, backup: dict):
        """The ``local`` destination the server writes to, and the backup's object key there."""
        local = LocalFactory().create(Settings({"kind": "local", "path": str(self.backup_dir), "name": "local"}))
        return BackupArchives({"local": local}), archive_key(self.customer["id"], service_id, backup["id"])

    def manifest(self, service_id: str, backup: dict) -> dict:
        archives, key = self._archives(service_id, backup)
        return archives.verify("local", key, backup["checksum_sha256"])

    def reader(self, service_id: str, backup: dict):
        archives, key = self._archives(service_id, backup)
        entries = {part["member"]: part for part in manifest_parts(self.manifest(service_id, backup))}
        return lambda member: archives.part_chunks("local", key, entries[member])


def wait_backup(client, path, done, seconds=180):
    deadline = time.monotonic() + seconds
    while True:
        backup = client.get(path).json()
        if done(backup):
            return backup
        assert backup["status"] != "failed" and (backup["restore"] or {}).get("status") != "failed", (
            backup["error"], (backup["restore"] or {}).get("error"))
        assert time.monotonic() < deadline, backup
        time.sleep(0.3)


def wait_for(check, what: str, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 - the server is still starting
            result = exc
        assert time.monotonic() < deadline, f"{what}: {result!r}"
        time.sleep(0.3)


_PSQL = 'PATH=/usr/lib/postgresql/15/bin:$PATH PGPASSWORD="$POSTGRES_PASSWORD" psql -X -At -v ON_ERROR_STOP=1 -U postgres '


def psql(engine, container: str, sql: str, db: str = "app") -> str:
    return engine.exec_run(container, ["sh", "-c", _PSQL + f'-d {db} -c "$1"', "sh", sql],
                           user="postgres").decode().strip()


@pytest.mark.parametrize("panel", ["podman", "docker"], indirect=True)  # the Podman and the Docker client
def test_postgres_backup_change_restore_and_verify(panel, postgres_image):
    service_id = panel.service(POSTGRES.format(image=postgres_image, password=PASSWORD), "pg")
    db = panel.container(service_id)
    wait_for(lambda: psql(panel.engine, db, "select 1", "postgres") == "1", "postgres answers")
    psql(panel.engine, db, "create database app", "postgres")
    psql(panel.engine, db, "create table t (id int primary key, v text); insert into t values (1, 'one'), (2, 'two')")

    backup = panel.backup(service_id)
    assert backup["volumes"] == []  # the database's volume is dumped, not archived
    manifest = panel.manifest(service_id, backup)
    assert manifest["kind"] == "postgres" and manifest["engines"] == {  # the image id its release ran
        "db": {"kind": "postgres", "image": postgres_image, "image_id": panel.engine.image_id(postgres_image)}}
    [part] = dumps.manifest_parts(manifest)
    assert (part["name"], part["kind"]) == ("db", "postgres") and part["size_bytes"] > 0

    psql(panel.engine, db, "update t set v = 'changed'; insert into t values (3, 'three'); create table u (x int)")
    psql(panel.engine, db, "create database other", "postgres")
    panel.restore(service_id, backup)
    db = panel.container(service_id)  # the same container, which kept running
    assert psql(panel.engine, db, "select id, v from t order by id") == "1|one\n2|two"
    assert psql(panel.engine, db, "select count(*) from pg_tables where tablename = 'u'") == "0"
    assert client_status(panel, service_id) == "running"

    # the dump verifies in a scratch container; a damaged or cut one does not, with the reason
    dumps.verify_parts(panel.engine, manifest, panel.reader(service_id, backup))
    damaged = damage(panel.reader(service_id, backup), part, b"CREATE TABLE", b"CREATE TBALE")
    with pytest.raises(dumps.DumpError, match="syntax error"):
        dumps.verify_parts(panel.engine, manifest, damaged)
    cut = truncated(panel.reader(service_id, backup), part)
    with pytest.raises(dumps.DumpError, match="incomplete"):
        dumps.verify_parts(panel.engine, {**manifest, "parts": [{**part, "size_bytes": part["size_bytes"] // 2}]},
                           cut)
    # the scratch containers and networks are gone
    helpers = {"label": f"{dumps.VERIFY_OF_LABEL}={backup['id']}"}  # this test's, not another's
    assert not panel.engine.client.containers.list(all=True, filters=helpers)
    assert not panel.engine.client.networks.list(filters=helpers)


def client_status(panel, service_id: str) -> str:
    return panel.client.get(f"/api/services/{service_id}").json()["status"]


def damage(read_part, part: dict, old: bytes, new: bytes):
    def read(member):
        data = b"".join(read_part(member))
        assert old in data
        return iter([data.replace(old, new, 1)])

    assert len(old) == len(new)
    return read


def truncated(read_part, part: dict):
    def read(member):
        data = b"".join(read_part(member))
        return iter([data[:part["size_bytes"] // 2]])

    return read


def test_a_postgres_backup_taken_while_a_client_writes_restores_consistently(panel, postgres_image):
    """Each transaction inserts the same number into two tables; the restored tables hold
    the same numbers, 1..n without a gap: every committed transaction up to a point, none
    half."""
    service_id = panel.service(POSTGRES.format(image=postgres_image, password=PASSWORD), "pgw")
    db = panel.container(service_id)
    wait_for(lambda: psql(panel.engine, db, "select 1", "postgres") == "1", "postgres answers")
    psql(panel.engine, db, "create database app", "postgres")
    psql(panel.engine, db, "create table a (n int primary key); create table b (n int primary key)")
    writer = ('i=0; while [ ! -e /tmp/stop-writing ]; do i=$((i+1)); '
              'echo "begin; insert into a values ($i); select pg_sleep(0.001); insert into b values ($i); commit;"; '
              'done | ' + _PSQL + '-q -d app >/dev/null')
    errors = []

    def write():
        try:
            panel.engine.exec_run(db, ["sh", "-c", writer], user="postgres")
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    wait_for(lambda: int(psql(panel.engine, db, "select count(*) from b") or 0) > 200, "the writer writes")
    backup = panel.backup(service_id)
    during = int(psql(panel.engine, db, "select count(*) from b"))
    panel.engine.exec_run(db, ["touch", "/tmp/stop-writing"])
    thread.join(60)
    assert not thread.is_alive() and not errors, errors
    written = int(psql(panel.engine, db, "select count(*) from a"))
    assert written >= during > 200

    panel.restore(service_id, backup)
    db = panel.container(service_id)
    a = psql(panel.engine, db, "select count(*), coalesce(min(n), 0), coalesce(max(n), 0) from a")
    b = psql(panel.engine, db, "select count(*), coalesce(min(n), 0), coalesce(max(n), 0) from b")
    count, low, high = (int(x) for x in a.split("|"))
    assert a == b and low == 1 and high == count  # the same transactions in both tables, no gap
    assert 200 < count < written  # a point while the client wrote
    assert psql(panel.engine, db, "select count(*) from a full join b using (n) where a.n is null or b.n is null") \
        == "0"


def mariadb(engine, container: str, sql: str) -> str:
    return engine.exec_run(container, ["sh", "-c", 'mariadb -uroot -N -B -e "$1"', "sh", sql]).decode().strip()


def test_mariadb_backup_change_restore_and_verify(panel, mariadb_image):
    service_id = panel.service(MARIADB.format(image=mariadb_image), "my")
    db = panel.container(service_id)
    wait_for(lambda: mariadb(panel.engine, db, "select 1") == "1", "mariadb answers")
    mariadb(panel.engine, db, "create database app; create table app.t (id int primary key, v text) engine=InnoDB; "
                              "insert into app.t values (1, 'one'), (2, 'two')")
    backup = panel.backup(service_id)
    manifest = panel.manifest(service_id, backup)
    assert manifest["kind"] == "mysql" and backup["volumes"] == []

    mariadb(panel.engine, db, "update app.t set v = 'changed'; insert into app.t values (3, 'three')")
    panel.restore(service_id, backup)
    db = panel.container(service_id)
    assert mariadb(panel.engine, db, "select id, v from app.t order by id") == "1\tone\n2\ttwo"

    dumps.verify_parts(panel.engine, manifest, panel.reader(service_id, backup))
    [part] = dumps.manifest_parts(manifest)
    damaged = damage(panel.reader(service_id, backup), part, b"INSERT INTO", b"INSERT INTI")
    with pytest.raises(dumps.DumpError, match="(?i)syntax"):
        dumps.verify_parts(panel.engine, manifest, damaged)


def redis(engine, container: str, *args: str) -> str:
    return engine.exec_run(container, ["sh", "-c", 'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli --raw "$@"', "sh",
                                       *args]).decode().strip()


@pytest.mark.parametrize("appendonly", ["no", "yes"])
def test_redis_backup_change_restore_and_verify(panel, redis_image, appendonly):
    """With a second component whose volume is archived as today (a mixed service: the
    backup's kind is the engine's). With the append-only file on, the server started again
    loads that file, not the RDB file: the restore puts the dump there too."""
    service_id = panel.service(REDIS.format(image=redis_image, password=PASSWORD, busybox=BUSYBOX,
                                            appendonly=appendonly), "rd")
    cache = panel.container(service_id, "cache")
    wait_for(lambda: redis(panel.engine, cache, "ping") == "PONG", "redis answers")
    redis(panel.engine, cache, "set", "first", "one")
    redis(panel.engine, cache, "rpush", "list", "a", "b")
    backup = panel.backup(service_id)
    assert backup["volumes"] == ["files"]
    manifest = panel.manifest(service_id, backup)
    assert manifest["kind"] == "redis"
    assert sorted((p["name"], p["kind"]) for p in dumps.manifest_parts(manifest)) == [
        ("cache", "redis"), ("files", "volumes")]

    redis(panel.engine, cache, "set", "first", "changed")
    redis(panel.engine, cache, "set", "second", "two")
    panel.restore(service_id, backup)
    cache = panel.container(service_id, "cache")
    wait_for(lambda: redis(panel.engine, cache, "ping") == "PONG", "redis answers again")
    assert redis(panel.engine, cache, "get", "first") == "one"
    assert redis(panel.engine, cache, "exists", "second") == "0"
    assert redis(panel.engine, cache, "lrange", "list", "0", "-1") == "a\nb"
    assert all(s.running for s in panel.engine.containers(service_id))

    dumps.verify_parts(panel.engine, manifest, panel.reader(service_id, backup))
    part = next(p for p in dumps.manifest_parts(manifest) if p["kind"] == "redis")
    cut = truncated(panel.reader(service_id, backup), part)
    short = {**manifest, "parts": [{**part, "size_bytes": part["size_bytes"] // 2}]}
    with pytest.raises(dumps.DumpError, match="redis dump of cache"):
        dumps.verify_parts(panel.engine, short, cut)


def test_a_postgres_backup_restored_as_a_new_service(panel, postgres_image):
    """The new service (same customer, same compose) gets deployed, then the dump is loaded
    into its own database; the first service keeps its later rows."""
    service_id = panel.service(POSTGRES.format(image=postgres_image, password=PASSWORD), "pgn")
    db = panel.container(service_id)
    wait_for(lambda: psql(panel.engine, db, "select 1", "postgres") == "1", "postgres answers")
    psql(panel.engine, db, "create database app", "postgres")
    psql(panel.engine, db, "create table t (id int primary key); insert into t values (1), (2)")
    backup = panel.backup(service_id)
    psql(panel.engine, db, "insert into t values (3)")

    path = f"/api/services/{service_id}/backups/{backup['id']}"
    name = f"pgcopy-{os.getpid()}-{time.monotonic_ns() % 100000}"
    accepted = panel.client.post(f"{path}/restore", json={"target": "new", "name": name})
    assert accepted.status_code == 202, accepted.text
    new_id = accepted.json()["restored_service_id"]
    panel.made.append(new_id)
    wait_backup(panel.client, path, lambda b: (b["restore"] or {}).get("status") == "completed", seconds=300)
    new = panel.client.get(f"/api/services/{new_id}").json()
    assert new["name"] == name and new["customer_id"] == panel.customer["id"] and new["status"] == "running"
    copy = panel.container(new_id)
    assert copy != db
    assert psql(panel.engine, copy, "select string_agg(id::text, ',' order by id) from t") == "1,2"
    assert psql(panel.engine, db, "select string_agg(id::text, ',' order by id) from t") == "1,2,3"
