"""Backup policies end to end: two real ``slipway serve`` processes running the workers on
one database (SQLite, or PostgreSQL with ``SLIPWAY_DATABASE_URL``) and real Podman.

- A ``* * * * *`` policy makes its first scheduled backup when the next minute comes, by
  the servers' own clocks.
- Each due run makes exactly one backup, whichever of the two servers claims it: the
  timeline's ``scheduled`` events and the backup ids are counted at the end. The later
  runs are made due by moving the policy's ``next_run_at`` into the past in the database
  (what a coming cron time does), so the test waits on states, not on minutes.
- Retention keeps the newest ``keep_last`` scheduled backups: the others' rows and
  archives on disk are gone; the backup asked for by hand stays.
- With both servers stopped, a run that comes due is made once by the next server to
  start.
"""
from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import pytest

from tests.support.database import make_policy_due
from tests.support.panel_server import _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"
KEEP = 2


def _wait(what, check, seconds=120):
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.3)


def _scheduled_events(client, service_id) -> list[str]:
    events = client.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()["data"]
    return [e["message"] for e in events if e["type"] == "backup" and e["status"] == "started"
            and e["message"].endswith(" scheduled")]


def _next_backup(client, policy_path, previous):
    """The policy's newest run's backup once it is not ``previous``, else None."""
    latest = client.get(policy_path).json()["last_backup_id"]
    return latest if latest != previous else None


def _retained(client, backups, ids):
    """The service's backups once the scheduled ones are exactly the newest ``KEEP`` of
    ``ids`` (retention ran), else None."""
    listed = client.get(backups, params={"per_page": 100}).json()["data"]
    return listed if [b["id"] for b in listed if b["scheduled"]] == ids[:-KEEP - 1:-1] else None


def _archives(backup_dir) -> set:
    return {path.stem for path in backup_dir.rglob("*.tar")}


@pytest.fixture
def panel(migrated_database_url, runtime_url, engine_ulimits, tmp_path):
    key = admin_key(migrated_database_url)
    backup_dir = tmp_path / "backups"
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_BACKUP_DIR=str(backup_dir), SLIPWAY_RUNTIME_HELPER_IMAGE=IMAGE, SLIPWAY_DEPLOY_WORKER="1")
    servers = []

    def start():
        server, client = serve_panel(key, env)
        servers.append((server, client))
        return client

    def stop_all():
        for server, client in servers:
            client.close()
            server.terminate()
            server.wait(timeout=30)
        servers.clear()

    made = []
    yield start, stop_all, backup_dir, made
    from app.pluginmanager import make_plugin_manager, runtimes
    from tests.support.engine import engine_settings

    stop_all()
    engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
    for service_id in made:
        engine.remove_service(service_id)


def test_two_servers_make_one_backup_per_due_run_and_keep_the_newest(panel, database_url):
    start, stop_all, backup_dir, made = panel
    one, two = start(), start()
    customer = one.post("/api/customers", json={"name": "Acme"}).json()
    created = one.post("/api/services", json={
        "name": f"pol-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "template", "template_id": "static-site", "variables": {"IMAGE": IMAGE, "TITLE": "Kept"}})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    _until(one, service_id, "running")
    backups, policy_path = f"/api/services/{service_id}/backups", f"/api/services/{service_id}/backup-policy"

    by_hand = one.post(backups).json()["id"]
    _wait("the backup asked for", lambda: one.get(f"{backups}/{by_hand}").json()["status"] == "completed")

    # the first run comes with the next minute, by the servers' clocks
    policy = two.put(policy_path, json={"schedule": "* * * * *", "keep_last": KEEP})
    assert policy.status_code == 200, policy.text
    first = _wait("the first scheduled backup", lambda: one.get(policy_path).json()["last_backup_id"], seconds=150)
    # from now on a run comes only when the test makes it due
    assert two.put(policy_path, json={"schedule": "0 0 1 1 *", "keep_last": KEEP}).status_code == 200
    ids = [first]
    for _ in range(4):
        _wait("the last run's backup", lambda: one.get(f"{backups}/{ids[-1]}").json()["status"] == "completed")
        make_policy_due(database_url, service_id)
        ids.append(_wait("a new scheduled backup", lambda: _next_backup(two, policy_path, ids[-1])))
    _wait("the last backup", lambda: one.get(f"{backups}/{ids[-1]}").json()["status"] == "completed")

    listed = _wait("retention", lambda: _retained(one, backups, ids))
    assert len(set(ids)) == len(ids) == 5
    assert sorted(_scheduled_events(one, service_id)) == sorted(f"backup {i} of site to local scheduled" for i in ids)
    assert [b["id"] for b in listed if not b["scheduled"]] == [by_hand]
    assert all(b["status"] == "completed" for b in listed)
    assert _archives(backup_dir) == {by_hand, *ids[-KEEP:]}  # the older scheduled archives are gone from disk

    # both servers stop; a run comes due while none runs; the next to start makes it once
    stop_all()
    make_policy_due(database_url, service_id)
    again = start()
    latest = _wait("the run that came due while stopped", lambda: _next_backup(again, policy_path, ids[-1]))
    _wait("it to complete", lambda: again.get(f"{backups}/{latest}").json()["status"] == "completed")
    ids.append(latest)
    _wait("retention", lambda: _retained(again, backups, ids))
    assert sorted(_scheduled_events(again, service_id)) == sorted(f"backup {i} of site to local scheduled" for i in ids)
    next_run = datetime.fromisoformat(again.get(policy_path).json()["next_run_at"].replace("Z", "+00:00"))
    assert next_run > datetime.now(timezone.utc)  # the next 1 January, counted from now, not from 2000
    assert _archives(backup_dir) == {by_hand, *ids[-KEEP:]}
