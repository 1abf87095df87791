"""Scheduled backups to S3 restored, end to end on real Podman, through a real server whose
default backup destination is a bucket on an S3-compatible server (moto's, started by the
tests): a ``postgres``, a ``mariadb`` and a ``redis`` template service (their images built
from Debian's packages) and a volume service (``static-site``).

For each: a client writes its first rows (keys, files), connecting with the password read
from ``GET /api/services/{id}/secrets``; a backup policy (``keep_last`` 1, ``verify``) is
put without a destination, so it takes the default, the bucket; its run is made due by
moving ``next_run_at`` into the past in the database (what a coming cron time does, so
the test waits on states, not on minutes); the scheduled backup's object is in the bucket
at ``<prefix>/<customer>/<service>/<backup>.tar`` with the recorded SHA-256, and the
policy's verification sets ``verified_at`` (for a database, after its dump was restored in
a scratch container where the engine's own check ran: the engine's events show that
container). The rows are changed, the backup restored, and the client reads the first rows
again, not the changed ones. A second scheduled run then deletes exactly the first
backup's object from the bucket and keeps its own."""
from __future__ import annotations

import hashlib
import os
import time

import pytest

from tests.support.database import make_policy_due
from tests.support.dbimages import mariadb_image, postgres_image, redis_image  # noqa: F401 (fixtures)
from tests.support.engine import BUSYBOX, engine_settings, wait_for
from tests.support.panel_server import _until, admin_key, serve_panel
from tests.support.s3 import s3_bucket, s3_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.runtime
DESTINATION = "offsite"


def _wait(what: str, check, seconds: float = 180):
    """``check()`` once it answers something true (an exception counts as not yet: a
    database still starting refuses its clients)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except Exception as exc:  # noqa: BLE001 - the check is asked again until the deadline
            found, last = None, exc
        else:
            last = found
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}: {last!r}"
        time.sleep(0.3)


class Panel:
    """A real server on Podman whose backup destinations are ``local`` and ``offsite`` (the
    test's bucket), ``offsite`` the default; one customer; a Podman runtime of the test's
    own to run clients in the services' containers."""

    def __init__(self, database_url, runtime_url, ulimits, tmp_path, bucket):
        from app.pluginmanager import make_plugin_manager, runtimes

        self.database_url, self.bucket = database_url, bucket
        self.log = open(tmp_path / "server.log", "w+")
        env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=ulimits, SLIPWAY_DATABASE_URL=database_url,
                   SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
                   SLIPWAY_HEALTH_INTERVAL="1", SLIPWAY_DEPLOY_HEALTH_TIMEOUT="180",
                   SLIPWAY_BACKUP_DIR=str(tmp_path / "backups"), SLIPWAY_RUNTIME_HELPER_IMAGE=BUSYBOX,
                   SLIPWAY_BACKUP_DESTINATIONS=bucket.destinations_json(DESTINATION),
                   SLIPWAY_BACKUP_DEFAULT=DESTINATION, SLIPWAY_WORK_DIR=str(tmp_path / "work"),
                   SLIPWAY_CUSTOMER_MAX_CPUS="64", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536")
        self.server, self.client = serve_panel(admin_key(database_url), env, stderr=self.log)
        self.customer = self.client.post("/api/customers", json={"name": "Acme"}).json()
        self.engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, ulimits))
        self.made = []
        self.started = int(time.time()) - 1

    def stop(self):
        for service_id in self.made:  # its backups and their objects go with it
            self.client.delete(f"/api/services/{service_id}")
        self.client.close()
        self.server.terminate()
        self.server.wait(timeout=20)
        for service_id in self.made:
            self.engine.remove_service(service_id)
        self.log.close()

    def deploy(self, template: str, variables: dict) -> str:
        created = self.client.post("/api/services", json={
            "name": f"{template}-{os.getpid() % 1000}-{time.monotonic_ns() % 100000}",
            "customer_id": self.customer["id"], "deploy_method": "template", "template_id": template,
            "variables": variables})
        assert created.status_code == 201, created.text
        service_id = created.json()["id"]
        self.made.append(service_id)
        _until(self.client, service_id, "running", seconds=240)
        return service_id

    def container(self, service_id: str) -> str:
        [state] = [s for s in self.engine.containers(service_id) if s.running]
        return state.id

    def backup(self, service_id: str, backup_id: str, done, seconds: float = 240) -> dict:
        path = f"/api/services/{service_id}/backups/{backup_id}"

        def ended():
            backup = self.client.get(path).json()
            assert backup["status"] != "failed", backup
            assert (backup["restore"] or {}).get("status") != "failed", backup
            return backup if done(backup) else None

        return _wait(f"backup {backup_id}", ended, seconds)

    def scheduled_run(self, service_id: str, previous: str | None) -> dict:
        """Make the policy's run due; the backup it made, once completed and verified."""
        policy = f"/api/services/{service_id}/backup-policy"
        make_policy_due(self.database_url, service_id)
        backup_id = _wait("the scheduled run's backup",
                          lambda: (latest := self.client.get(policy).json()["last_backup_id"]) != previous and latest)
        return self.backup(service_id, backup_id, lambda b: b["verify_status"] == "completed")

    def scratch_containers(self, backup_id: str) -> list[str]:
        """The names of the containers the verifications of ``backup_id`` created (the
        engine's events: the scratch containers are removed once their check ends)."""
        events = self.engine.client.events(since=self.started, until=int(time.time()) + 1, decode=True, filters={
            "event": "create", "type": "container", "label": f"slipway.verify-of={backup_id}"})
        return [event["Actor"]["Attributes"]["name"] for event in events]

    def key_of(self, service_id: str, backup_id: str) -> str:
        return f"{self.bucket.prefix}/{self.customer['id']}/{service_id}/{backup_id}.tar"


@pytest.fixture
def panel(migrated_database_url, runtime_url, engine_ulimits, tmp_path, s3_bucket):
    made = Panel(migrated_database_url, runtime_url, engine_ulimits, tmp_path, s3_bucket)
    yield made
    made.stop()


# --- the clients: each connects the way an application would, with the password from /secrets ---

class Postgres:
    template, variable, password = "postgres", "postgres_image", "POSTGRES_PASSWORD"
    first, changed = "1|one\n2|two", "1|changed\n2|two\n3|three"

    def __init__(self, panel, service_id, password):
        self.run = lambda sql: panel.engine.exec_run(panel.container(service_id), [
            "sh", "-c", ('for b in /usr/lib/postgresql/*/bin; do PATH="$b:$PATH"; done; '
                         'psql -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d app -c "$1"'), "sh", sql],
            env={"PGPASSWORD": password}).decode().strip()

    def ready(self):
        return self.run("select 40 + 2") == "42"

    def write_first(self):
        self.run("create table t (id int primary key, v text); insert into t values (1, 'one'), (2, 'two')")

    def change(self):
        self.run("update t set v = 'changed' where id = 1; insert into t values (3, 'three')")

    def read(self):
        return self.run("select id, v from t order by id")


class Mariadb:
    template, variable, password = "mariadb", "mariadb_image", "MARIADB_ROOT_PASSWORD"
    first, changed = "1\tone\n2\ttwo", "1\tchanged\n2\ttwo\n3\tthree"

    def __init__(self, panel, service_id, password):
        self.run = lambda sql: panel.engine.exec_run(panel.container(service_id), [
            "sh", "-c", 'mariadb --protocol=tcp -h 127.0.0.1 -uroot -N -B app -e "$1"', "sh", sql],
            env={"MYSQL_PWD": password}).decode().strip()

    def ready(self):
        return self.run("select 40 + 2") == "42"

    def write_first(self):
        self.run("create table t (id int primary key, v text) engine=InnoDB; insert into t values (1, 'one'), (2, 'two')")

    def change(self):
        self.run("update t set v = 'changed' where id = 1; insert into t values (3, 'three')")

    def read(self):
        return self.run("select id, v from t order by id")


class Redis:
    template, variable, password = "redis", "redis_image", "REDIS_PASSWORD"
    first, changed = "one\na\nb\n0", "changed\na\nb\nc\n1"

    def __init__(self, panel, service_id, password):
        self.run = lambda *args: panel.engine.exec_run(panel.container(service_id), [
            "sh", "-c", 'redis-cli -h 127.0.0.1 --raw "$@"', "sh", *args],
            env={"REDISCLI_AUTH": password}).decode().strip()

    def ready(self):
        return self.run("ping") == "PONG"

    def write_first(self):
        self.run("set", "first", "one")
        self.run("rpush", "list", "a", "b")

    def change(self):
        self.run("set", "first", "changed")
        self.run("rpush", "list", "c")
        self.run("set", "second", "two")

    def read(self):
        return "\n".join([self.run("get", "first"), self.run("lrange", "list", "0", "-1"),
                          self.run("exists", "second")])


class Files:
    """A volume service's files, written and read in its running container."""
    template, variable, password = "static-site", None, None
    first, changed = "index first\ndata first\nno extra", "index changed\ndata first\nextra"

    def __init__(self, panel, service_id, password):
        self.run = lambda script: panel.engine.exec_run(panel.container(service_id),
                                                        ["sh", "-c", script]).decode().strip()

    def ready(self):
        return True

    def write_first(self):
        self.run("echo index first > /www/index.html && mkdir -p /www/d && echo data first > /www/d/data.txt")

    def change(self):
        self.run("echo index changed > /www/index.html && echo extra > /www/extra.txt")

    def read(self):
        return self.run("cat /www/index.html /www/d/data.txt; cat /www/extra.txt 2>/dev/null || echo no extra")


@pytest.mark.parametrize("kind", [Postgres, Mariadb, Redis, Files], ids=lambda k: k.template)
def test_a_scheduled_backup_to_s3_is_verified_restored_and_retained(request, panel, kind):
    p = panel
    variables = {"IMAGE": request.getfixturevalue(kind.variable)} if kind.variable else {"IMAGE": BUSYBOX}
    service_id = p.deploy(kind.template, variables)
    password = None
    if kind.password:
        secrets = p.client.get(f"/api/services/{service_id}/secrets")
        assert secrets.status_code == 200, secrets.text
        password = secrets.json()["secrets"][kind.password]
        assert p.client.get(f"/api/services/{service_id}").json()["variables"][kind.password] == "***"
    client = kind(p, service_id, password)
    _wait("the client to connect", client.ready)
    client.write_first()
    assert client.read() == kind.first

    # the policy names no destination: it takes the default, the bucket
    policy_path = f"/api/services/{service_id}/backup-policy"
    policy = p.client.put(policy_path, json={"schedule": "0 0 1 1 *", "keep_last": 1, "verify": True})
    assert policy.status_code == 200, policy.text
    assert (policy.json()["destination"], policy.json()["last_backup_id"]) == (DESTINATION, None)
    first = p.scheduled_run(service_id, None)
    expected_kind = {"static-site": "volumes", "mariadb": "mysql"}.get(kind.template, kind.template)
    assert (first["scheduled"], first["destination"], first["kind"]) == (True, DESTINATION, expected_kind)
    assert first["verified_at"] and first["verify_error"] is None and first["status"] == "completed"
    # a dump was checked by its engine in a scratch container; a volume archive by its checksums only
    if kind is Files:
        assert p.scratch_containers(first["id"]) == []
    else:  # the engine writes its events log on its own time: wait for the create event
        wait_for(lambda: len(p.scratch_containers(first["id"])) == 1, "the verification's scratch container event")
    first_key = p.key_of(service_id, first["id"])
    assert p.bucket.keys() == [first_key]
    data = p.bucket.read(first_key)
    assert (first["checksum_sha256"], first["size_bytes"]) == (hashlib.sha256(data).hexdigest(), len(data))

    client.change()
    assert client.read() == kind.changed
    path = f"/api/services/{service_id}/backups/{first['id']}"
    assert p.client.post(f"{path}/restore").status_code == 202
    p.backup(service_id, first["id"], lambda b: (b["restore"] or {}).get("status") == "completed")
    _wait("the client to connect after the restore", client.ready)
    assert client.read() == kind.first
    assert all(state.running for state in p.engine.containers(service_id))

    # retention on S3: the second run's backup replaces the first, object and row
    second = p.scheduled_run(service_id, first["id"])
    assert second["id"] != first["id"] and second["verified_at"]
    second_key = p.key_of(service_id, second["id"])
    _wait("retention", lambda: p.bucket.keys() == [second_key])
    assert hashlib.sha256(p.bucket.read(second_key)).hexdigest() == second["checksum_sha256"]
    listed = p.client.get(f"/api/services/{service_id}/backups").json()["data"]
    assert [b["id"] for b in listed] == [second["id"]]
    assert p.client.get(path).status_code == 404
