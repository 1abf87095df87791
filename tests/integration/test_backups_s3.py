"""Backups off the host, on real Podman through a real server: a volume service's files
backed up to an S3-compatible server (moto's, started by the tests) and to ``local``,
changed, restored and verified; a corrupted object fails verification and a restore from
it touches nothing; an unreachable destination fails the backup; a server killed
mid-upload leaves a ``failed`` backup and no object."""
from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from ports.runtime import ContainerSpec
from tests.support.database import age_worker_leases
from tests.support.engine import _tree, engine_settings
from tests.support.panel_server import _until, admin_key, serve_panel
from tests.support.processes import free_port
from tests.support.s3 import s3_bucket, s3_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"


class Panel:
    """A panel server (started again by ``restart``) whose destinations are ``local``,
    ``offsite`` (the test's bucket) and ``dead`` (an endpoint where nothing listens)."""

    def __init__(self, database_url, runtime_url, ulimits, backup_dir, bucket):
        self.bucket, self.backup_dir, self.database_url = bucket, backup_dir, database_url
        self.key = admin_key(database_url)
        destinations = {"offsite": bucket.destination(),
                        "dead": {**bucket.destination(), "endpoint": f"http://127.0.0.1:{free_port()}"}}
        self.env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=ulimits, SLIPWAY_DATABASE_URL=database_url,
                        SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
                        SLIPWAY_BACKUP_DIR=str(backup_dir), SLIPWAY_RUNTIME_HELPER_IMAGE=IMAGE,
                        SLIPWAY_BACKUP_DESTINATIONS=json.dumps(destinations))
        self.server, self.client = serve_panel(self.key, self.env)
        self.customer = self.client.post("/api/customers", json={"name": "Acme"}).json()
        from app.pluginmanager import make_plugin_manager, runtimes

        self.engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, ulimits))
        self.engine.helper_image = IMAGE
        self.made = []

    def restart(self):
        self.client.close()
        self.server, self.client = serve_panel(self.key, self.env)

    def stop(self):
        for service_id in self.made:
            self.engine.remove_service(service_id)
        self.client.close()
        if self.server.poll() is None:
            self.server.terminate()
            self.server.wait(timeout=20)

    def site(self, name):
        created = self.client.post("/api/services", json={
            "name": f"{name}-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": self.customer["id"],
            "deploy_method": "template", "template_id": "static-site",
            "variables": {"IMAGE": IMAGE, "TITLE": "Off the host"}})
        assert created.status_code == 201, created.text
        service_id = created.json()["id"]
        self.made.append(service_id)
        _until(self.client, service_id, "running")
        return service_id

    def volume(self, service_id):
        return _tree(b"".join(self.engine.export_volume(f"slw-{service_id}-site")))

    def change(self, service_id, script="echo changed > /www/index.html && echo extra > /www/added.txt"):
        mutator = self.engine.run(ContainerSpec(
            name=f"{service_id}-mutator-{time.monotonic_ns() % 100000}", image=IMAGE,
            labels={"slipway.test": "backups"}, volumes=((f"slw-{service_id}-site", "/www"),),
            command=("sh", "-c", script)))
        deadline = time.monotonic() + 60
        while self.engine.inspect(mutator).running:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        self.engine.remove_container(mutator)

    def wait(self, path, done, seconds=120):
        deadline = time.monotonic() + seconds
        while True:
            backup = self.client.get(path).json()
            if done(backup):
                return backup
            assert time.monotonic() < deadline, backup
            time.sleep(0.2)

    def key_of(self, service_id, backup_id):
        return f"backups/{self.customer['id']}/{service_id}/{backup_id}.tar"

    def timeline(self, service_id):
        events = self.client.get(f"/api/services/{service_id}/events").json()["data"]
        return [(e["type"], e["status"], e["message"]) for e in events if e["type"] in ("backup", "restore")]


@pytest.fixture
def panel(migrated_database_url, runtime_url, engine_ulimits, tmp_path, s3_bucket, umask_022):
    made = Panel(migrated_database_url, runtime_url, engine_ulimits, tmp_path / "backups", s3_bucket)
    yield made
    made.stop()


@pytest.mark.parametrize("destination", ["offsite", "local"])
def test_a_volume_backed_up_to_a_destination_is_restored_and_verified(panel, destination):
    p = panel
    service_id = p.site("dest")
    snapshot = p.volume(service_id)
    backups = f"/api/services/{service_id}/backups"
    accepted = p.client.post(backups, json={"destination": destination})
    assert accepted.status_code == 202 and accepted.json()["destination"] == destination
    path = f"{backups}/{accepted.json()['id']}"
    backup = p.wait(path, lambda b: b["status"] in ("completed", "failed"))
    assert backup["status"] == "completed", backup
    assert (backup["destination"], backup["kind"], backup["volumes"]) == (destination, "volumes", ["site"])
    if destination == "offsite":  # the object is at the decided key, its SHA-256 the recorded one
        assert p.bucket.keys() == [p.key_of(service_id, backup["id"])]
        data = p.bucket.read(p.key_of(service_id, backup["id"]))
    else:
        data = (p.backup_dir / p.customer["id"] / service_id / f"{backup['id']}.tar").read_bytes()
        assert p.bucket.keys() == []
    assert backup["checksum_sha256"] == hashlib.sha256(data).hexdigest() and backup["size_bytes"] == len(data)

    p.change(service_id)
    assert p.volume(service_id) != snapshot
    assert p.client.post(f"{path}/restore").status_code == 202
    restored = p.wait(path, lambda b: (b["restore"] or {}).get("status") in ("completed", "failed"))
    assert restored["restore"]["status"] == "completed", restored
    assert p.volume(service_id) == snapshot  # exactly the backed-up files
    assert all(state.running for state in p.engine.containers(service_id))

    verifying = p.client.post(f"{path}/verify")
    assert verifying.status_code == 202 and verifying.json()["verify_status"] in ("pending", "running")
    verified = p.wait(path, lambda b: b["verify_status"] in ("completed", "failed"))
    assert (verified["status"], verified["verify_status"], verified["verify_error"]) == ("completed", "completed",
                                                                                          None)
    assert verified["verified_at"]

    assert p.client.delete(path).status_code == 204
    assert p.bucket.keys() == [] and not (p.backup_dir / p.customer["id"] / service_id).exists()


def test_a_corrupted_object_fails_verification_and_its_restore_touches_nothing(panel):
    p = panel
    service_id = p.site("corrupt")
    backups = f"/api/services/{service_id}/backups"
    path = f"{backups}/{p.client.post(backups, json={'destination': 'offsite'}).json()['id']}"
    backup = p.wait(path, lambda b: b["status"] in ("completed", "failed"))
    assert backup["status"] == "completed", backup
    key = p.key_of(service_id, backup["id"])
    data = bytearray(p.bucket.read(key))
    data[600] ^= 0xFF  # a byte of the volume's data, changed at the destination
    p.bucket.write(key, bytes(data))

    p.change(service_id)
    changed = p.volume(service_id)
    assert p.client.post(f"{path}/restore").status_code == 202
    refused = p.wait(path, lambda b: (b["restore"] or {}).get("status") in ("completed", "failed"))
    assert refused["restore"]["status"] == "failed" and "SHA-256" in refused["restore"]["error"], refused
    assert p.volume(service_id) == changed  # nothing was touched
    assert all(state.running for state in p.engine.containers(service_id))

    assert p.client.post(f"{path}/verify").status_code == 202
    failed = p.wait(path, lambda b: b["verify_status"] in ("completed", "failed"))
    assert (failed["status"], failed["verify_status"], failed["verified_at"]) == ("failed", "failed", None)
    assert f"its SHA-256 is {hashlib.sha256(data).hexdigest()}" in failed["verify_error"]
    assert f"the backup recorded {backup['checksum_sha256']}" in failed["verify_error"]
    kind, status, message = p.timeline(service_id)[0]
    assert (kind, status) == ("backup", "failed") and failed["verify_error"] in message
    assert p.client.post(f"{path}/restore").status_code == 409  # a failed backup is not restored


def test_an_unreachable_destination_fails_the_backup_with_its_error(panel):
    p = panel
    service_id = p.site("dead")
    backups = f"/api/services/{service_id}/backups"
    path = f"{backups}/{p.client.post(backups, json={'destination': 'dead'}).json()['id']}"
    failed = p.wait(path, lambda b: b["status"] in ("completed", "failed"))
    assert failed["status"] == "failed" and "Could not connect" in failed["error"], failed
    assert failed["completed_at"] is None and failed["checksum_sha256"] is None
    assert p.client.get(backups, params={"status": "completed"}).json()["total"] == 0
    kind, status, message = p.timeline(service_id)[0]
    assert (kind, status) == ("backup", "failed") and "Could not connect" in message


def test_a_server_killed_mid_upload_leaves_a_failed_backup_and_no_object(panel):
    p = panel
    service_id = p.site("killed")
    p.change(service_id, "dd if=/dev/urandom of=/www/big.bin bs=1048576 count=160 2>/dev/null")
    backups = f"/api/services/{service_id}/backups"
    path = f"{backups}/{p.client.post(backups, json={'destination': 'offsite'}).json()['id']}"
    deadline = time.monotonic() + 60
    while not p.bucket.uploads():  # the upload has begun: the archive is streaming up
        assert time.monotonic() < deadline and p.client.get(path).json()["status"] in ("pending", "running")
        time.sleep(0.02)
    p.server.kill()
    p.server.wait(timeout=20)
    assert p.bucket.keys() == []  # no object: an upload not completed is not one

    age_worker_leases(p.database_url)  # the minute the killed worker's lease takes to go stale
    p.restart()  # the killed worker's lease is stale: the backup is settled
    failed = p.wait(path, lambda b: b["status"] != "running", seconds=60)
    assert failed["status"] == "failed" and failed["error"] == "interrupted by a restart of Slipway", failed
    # its upload is aborted once the failure is committed (core.panel.backups.recover_interrupted:
    # the destination is no part of the database's transaction), so a moment after
    deadline = time.monotonic() + 30
    while p.bucket.uploads():
        assert time.monotonic() < deadline, p.bucket.uploads()
        time.sleep(0.1)
    assert p.bucket.keys() == []
