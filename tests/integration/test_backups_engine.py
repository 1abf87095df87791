"""Backups on a real engine, through a real uvicorn server and httpx: a template service's
volume is backed up, changed, restored to exactly the backed-up bytes (a file added
since is gone), and the backup deleted with its archive; deleting the service takes its
archives along. Once through the Podman client and once through the Docker client."""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import time

import httpx
import pytest
from websockets.sync.client import connect

from ports.runtime import ContainerSpec
from tests.support.engine import ENGINES, _tree, engine_for, engine_settings
from tests.support.files import modes
from tests.support.http import wait_answering
from tests.support.panel_server import _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"


@pytest.fixture(params=ENGINES)
def panel(request, migrated_database_url, tmp_path, umask_022):
    runtime_url, engine_ulimits = engine_for(request, request.param)
    backup_dir = tmp_path / "backups"
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME=request.param, SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_BACKUP_DIR=str(backup_dir), SLIPWAY_RUNTIME_HELPER_IMAGE=IMAGE)
    server, client = serve_panel(key, env)
    customer = client.post("/api/customers", json={"name": "Acme"}).json()
    from app.pluginmanager import make_plugin_manager, runtimes

    engine = runtimes(make_plugin_manager())[request.param].create(engine_settings(runtime_url, engine_ulimits))
    engine.helper_image = IMAGE
    made = []
    yield client, customer, engine, made, backup_dir
    for service_id in made:
        engine.remove_service(service_id)
    client.close()
    server.terminate()
    server.wait(timeout=20)


def _wait_backup(client, path, done, seconds=90):
    deadline = time.monotonic() + seconds
    while True:
        backup = client.get(path).json()
        if done(backup):
            return backup
        assert backup["status"] != "failed" and (backup["restore"] or {}).get("status") != "failed", backup
        assert time.monotonic() < deadline, backup
        time.sleep(0.2)


def _volume_in(data: bytes) -> dict:
    """The files of the first part (a volume's tar) of a backup archive, by name."""
    with tarfile.open(fileobj=io.BytesIO(data)) as outer:
        manifest = json.loads(outer.extractfile("manifest.json").read())
        assert [(p["name"], p["kind"], p["member"]) for p in manifest["parts"]] == [("site", "volumes", "parts/0")]
        segments = sorted(n for n in outer.getnames() if n.startswith("parts/0/"))
        return _tree(b"".join(outer.extractfile(n).read() for n in segments))


def _received(ws, until, seconds: float = 90) -> list[dict]:
    """The channel's JSON messages until ``until(message)``, all of them in order."""
    got, deadline = [], time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; received {got[-10:]}"
        got.append(json.loads(ws.recv(timeout=remaining)))
        if until(got[-1]):
            return got


def _fetch(url: str, seconds: float = 30) -> httpx.Response:
    return wait_answering(url, seconds=seconds)


def test_backup_change_restore_delete(panel):
    client, customer, engine, made, backup_dir = panel
    created = client.post("/api/services", json={
        "name": f"bk-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "template", "template_id": "static-site",
        "variables": {"IMAGE": IMAGE, "TITLE": "Backed up"}})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    url = _until(client, service_id, "running")["url"]
    volume = f"slw-{service_id}-site"
    original = _fetch(f"{url}/index.html")
    assert original.status_code == 200 and b"Backed up" in original.content
    snapshot = _tree(b"".join(engine.export_volume(volume)))
    assert set(snapshot) == {"index.html"}

    backups = f"/api/services/{service_id}/backups"
    accepted = client.post(backups)
    assert accepted.status_code == 202 and accepted.json()["status"] in ("pending", "running")
    path = f"{backups}/{accepted.json()['id']}"
    backup = _wait_backup(client, path, lambda b: b["status"] == "completed")
    assert backup["progress"] == 100 and backup["completed_at"] and backup["volumes"] == ["site"]
    assert (backup["destination"], backup["kind"]) == ("local", "volumes")
    archive = backup_dir / customer["id"] / service_id / f"{backup['id']}.tar"
    data = archive.read_bytes()
    assert backup["size_bytes"] == len(data) and backup["checksum_sha256"] == hashlib.sha256(data).hexdigest()
    assert backup["sha256"] == backup["checksum_sha256"]
    assert _volume_in(data) == snapshot
    assert client.get(backups).json()["total"] == 1

    mutator = engine.run(ContainerSpec(
        name=f"{service_id}-mutator", image=IMAGE, labels={"slipway.test": "backups"}, volumes=((volume, "/www"),),
        command=("sh", "-c", "echo changed > /www/index.html && echo extra > /www/added.txt")))
    deadline = time.monotonic() + 30
    while engine.inspect(mutator).running:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    engine.remove_container(mutator)
    assert _fetch(f"{url}/index.html").text == "changed\n" and _fetch(f"{url}/added.txt").status_code == 200

    ws_url = str(client.base_url).replace("http://", "ws://") + "/api/ws"
    with connect(ws_url, additional_headers={"Authorization": client.headers["Authorization"]},
                 open_timeout=20) as ws:
        ws.send(json.dumps({"type": "subscribe", "services": [service_id]}))
        _received(ws, lambda m: m["type"] == "subscribed")
        restoring = client.post(f"{path}/restore")
        assert restoring.status_code == 202 and restoring.json()["restore"]["status"] in ("pending", "running")
        got = _received(ws, lambda m: m["type"] == "backup.progress" and m["data"]["operation"] == "restore"
                        and m["data"]["status"] in ("completed", "failed"))
    restored = _wait_backup(client, path, lambda b: (b["restore"] or {}).get("status") == "completed")
    assert restored["restore"]["progress"] == 100 and restored["restore"]["error"] is None
    # the restore's steps, in order, on the real-time channel and on the timeline
    restore = [m["data"] for m in got if m["type"] == "backup.progress" and m["data"]["operation"] == "restore"]
    assert {d["backup_id"] for d in restore} == {backup["id"]}
    assert [(d["step"], d["part"]) for d in restore if d["step"]] == [
        ("fetched", None), ("verified", None), ("loaded", "site"), ("completed", None)], restore
    assert [d["progress"] for d in restore] == sorted(d["progress"] for d in restore)
    events = client.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
    mine = [e for e in reversed(events) if e["type"] == "restore"]  # newest first: oldest first now
    assert [e["status"] for e in mine] == ["started", "progress", "progress", "progress", "success"], mine
    assert [e["message"].split(": ", 1)[1].split(" ", 1)[0] for e in mine[1:4]] == ["fetched", "verified", "loaded"]
    assert "loaded volume site (1 of 1)" in mine[3]["message"]
    assert client.get(f"/api/services/{service_id}").json()["status"] == "running"
    assert all(state.running for state in engine.containers(service_id))  # started again
    assert _tree(b"".join(engine.export_volume(volume))) == snapshot  # exactly the backed-up files
    again = _fetch(f"{url}/index.html")
    assert again.status_code == 200 and again.content == original.content
    assert _fetch(f"{url}/added.txt").status_code == 404

    assert client.delete(path).status_code == 204
    assert not archive.exists() and client.get(path).status_code == 404
    assert client.get(backups).json()["total"] == 0

    second = client.post(backups).json()
    _wait_backup(client, f"{backups}/{second['id']}", lambda b: b["status"] == "completed")
    assert (backup_dir / customer["id"] / service_id / f"{second['id']}.tar").exists()
    assert client.delete(f"/api/services/{service_id}").status_code == 204
    assert not (backup_dir / customer["id"] / service_id).exists()  # the service's archives went with it
    assert client.get(backups).status_code == 404


def test_backup_archives_and_their_folders_are_the_server_users_only(panel):
    """Under umask 022 (the server's too), with the backup folder made 0755 beforehand:
    the folder, the service's folder and the archive are 0700, 0700 and 0600."""
    client, customer, engine, made, backup_dir = panel
    backup_dir.mkdir(mode=0o755)
    os.chmod(backup_dir, 0o755)
    created = client.post("/api/services", json={
        "name": f"bkm-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "template", "template_id": "static-site",
        "variables": {"IMAGE": IMAGE, "TITLE": "Private"}})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    _until(client, service_id, "running")
    backups = f"/api/services/{service_id}/backups"
    for _ in range(2):  # the second finds the folders there
        backup = _wait_backup(client, f"{backups}/{client.post(backups).json()['id']}",
                              lambda b: b["status"] == "completed")
    first = client.get(backups).json()["data"]
    assert len(first) == 2
    folder = os.path.join(customer["id"], service_id)
    expected = {".": 0o700, customer["id"]: 0o700, folder: 0o700}
    expected.update({os.path.join(folder, f"{b['id']}.tar"): 0o600 for b in first})
    assert modes(backup_dir) == expected, backup
