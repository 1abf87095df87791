"""Scheduled tasks end to end: two real ``slipway serve`` processes running the workers on
one database (SQLite, or PostgreSQL with ``SLIPWAY_DATABASE_URL``) and real Podman, a
static site (busybox) whose ``web`` container runs the tasks.

- A ``* * * * *`` task runs when the next minute comes, by the servers' own clocks; its run
  is listed with its output and exit status 0.
- Each due run runs once, whichever server claims it: later runs are made due by moving
  the task's ``next_run_at`` into the past in the database (what a coming cron time
  does), so the test waits on states, not on minutes; the runs are counted at the end.
- A command that exits 3 is ``failed`` with exit code 3; one that outlives ``timeout_s``
  is ``timed_out`` and its process is gone from the container; a run due while one runs
  is ``skipped``.
"""
from __future__ import annotations

import os
import time

import pytest

from tests.support.database import make_task_due
from tests.support.engine import wait_for
from tests.support.panel_server import _until, admin_key, serve_panel

pytestmark = pytest.mark.runtime
IMAGE = "localhost/busybox:latest"
WAIT_S = 120  # at most, for each state (a loaded CI machine)


def _runs(client, base, task_id) -> list[dict]:
    answer = client.get(f"{base}/{task_id}/runs", params={"per_page": 100})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def _ended(client, base, task_id, count):
    """The task's runs once ``count`` of them ended (none running), else None."""
    runs = _runs(client, base, task_id)
    return runs if len(runs) >= count and all(r["status"] != "running" for r in runs) else None


@pytest.fixture
def panel(migrated_database_url, runtime_url, engine_ulimits):
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME="podman", SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_DEPLOY_WORKER="1")
    from app.pluginmanager import make_plugin_manager, runtimes
    from tests.support.engine import engine_settings

    engine = runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url, engine_ulimits))
    servers, made = [], []

    def start():
        server, client = serve_panel(key, env)
        servers.append((server, client))
        return client

    yield start, engine, made
    for server, client in servers:
        client.close()
        server.terminate()
        server.wait(timeout=30)
    for service_id in made:
        engine.remove_service(service_id)


def test_two_servers_run_each_due_task_once_with_output_exit_codes_timeouts_and_skips(panel, database_url):
    start, engine, made = panel
    one, two = start(), start()
    customer = one.post("/api/customers", json={"name": "Acme"}).json()
    created = one.post("/api/services", json={
        "name": f"tasks-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
        "deploy_method": "template", "template_id": "static-site", "variables": {"IMAGE": IMAGE}})
    assert created.status_code == 201, created.text
    service_id = created.json()["id"]
    made.append(service_id)
    _until(one, service_id, "running")
    base = f"/api/services/{service_id}/tasks"

    # the first run comes with the next minute, by the servers' clocks
    task = two.post(base, json={"name": "tick", "schedule": "* * * * *", "component": "web",
                                "command": ["sh", "-c", "echo tick-$((6*7)); echo to-stderr >&2"]})
    assert task.status_code == 201, task.text
    tick = task.json()["id"]
    (first,) = wait_for(lambda: _ended(one, base, tick, 1), "the first scheduled run", timeout=150)
    assert (first["status"], first["exit_code"], first["trigger"]) == ("succeeded", 0, "schedule")
    assert sorted(first["output"].split()) == ["tick-42", "to-stderr"] and first["started_at"] and first["finished_at"]
    # from now on a run comes only when the test makes it due
    assert two.patch(f"{base}/{tick}", json={"schedule": "0 0 1 1 *"}).status_code == 200
    for count in range(2, 6):
        make_task_due(database_url, tick)
        wait_for(lambda: _ended(two, base, tick, count), f"run {count}", timeout=WAIT_S)
    runs = _runs(one, base, tick)
    assert len(runs) == len({r["id"] for r in runs}) == 5  # each due time ran once, on one server
    assert {(r["status"], r["exit_code"]) for r in runs} == {("succeeded", 0)}
    assert one.get(f"{base}/{tick}").json()["last_run"]["id"] == runs[0]["id"]

    # a failing command, a command past its time limit, a run due while one runs
    failing = one.post(base, json={"name": "fails", "schedule": "0 0 1 1 *", "component": "web",
                                   "command": ["sh", "-c", "echo broken; exit 3"]}).json()["id"]
    assert one.post(f"{base}/{failing}/run").status_code == 202
    (failed,) = wait_for(lambda: _ended(two, base, failing, 1), "the failing run", timeout=WAIT_S)
    assert (failed["status"], failed["exit_code"], failed["trigger"]) == ("failed", 3, "manual")
    assert failed["output"].startswith("broken")

    slow = one.post(base, json={"name": "slow", "schedule": "0 0 1 1 *", "component": "web", "timeout_s": 15,
                                "command": ["sleep", "3171"]}).json()["id"]
    assert one.post(f"{base}/{slow}/run").status_code == 202
    wait_for(lambda: _runs(one, base, slow)[0]["started_at"], "the slow run to start", timeout=WAIT_S)
    assert one.post(f"{base}/{slow}/run").status_code == 409  # it runs
    make_task_due(database_url, slow)  # the schedulers look every 5 s: well within its 15 s
    wait_for(lambda: any(r["status"] == "skipped" for r in _runs(two, base, slow)), "a skipped run", timeout=WAIT_S)
    runs = wait_for(lambda: _ended(one, base, slow, 2), "the slow run to end", timeout=WAIT_S)
    assert sorted(r["status"] for r in runs) == ["skipped", "timed_out"]
    timed_out = next(r for r in runs if r["status"] == "timed_out")
    assert timed_out["exit_code"] is None and "timeout_s" in timed_out["output"]
    (web,) = [c for c in engine.containers(service_id) if c.running]
    script = 'for d in /proc/[0-9]*; do tr "\\0" " " < "$d/cmdline" 2>/dev/null; echo; done'
    assert b"sleep 3171" not in engine.exec_run(web.id, ["sh", "-c", script])  # its process is gone
