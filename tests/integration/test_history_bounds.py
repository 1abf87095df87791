"""Bounded history (docs/decisions.md "Tenant safety, second round"): a service keeps its
newest ``SLIPWAY_EVENTS_KEEP`` timeline events and newest 200 deploy jobs; a periodic job
deletes older rows, never a queued or running job, and leaves other services alone. On
the real database (SQLite, and PostgreSQL with ``SLIPWAY_DATABASE_URL``)."""
from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from app.config import Config, ConfigError
from app.workers.history import HistoryCleanup
from core.panel import customers as panel_customers
from core.panel.history import JOBS_KEEP
from core.panel.services import DeployJob, Service, ServiceEvent
from tests.support.fakes import FakeClock
from tests.support.panel_server import admin_key, serve_panel

KEEP = 5


def _service(store, clock, name: str, status: str = "stopped") -> Service:
    customer = panel_customers.create_customer(store.uow(), clock, name=name)
    now = clock.now()
    service = Service(id=f"svc_{name}", name=name, customer_id=customer.id, deploy_method="compose", status=status,
                      created_at=now, updated_at=now, compose="services:\n  a: {image: x}\n")
    with store.uow() as uow:
        uow.services.add(service)
        uow.commit()
    return service


def _events(store, clock, service_id: str, count: int) -> list[int]:
    ids = []
    with store.uow() as uow:
        for i in range(count):
            ids.append(uow.service_events.add(ServiceEvent(None, service_id, "deploy", "started", f"event {i}",
                                                           clock.now())).id)
        uow.commit()
    return ids


def _jobs(store, clock, service_id: str, states) -> list[str]:
    """Jobs in ``states``, oldest first, a second apart."""
    ids = []
    with store.uow() as uow:
        for i, state in enumerate(states):
            at = clock.now() + timedelta(seconds=i)
            job = DeployJob(id=f"job_{service_id[4:]}_{i:04d}", service_id=service_id, kind="deploy", state=state,
                            created_at=at, updated_at=at)
            uow.deploy_jobs.add(job)
            ids.append(job.id)
        uow.commit()
    return ids


def _kept(store, service_id: str) -> tuple[list[int], list[str]]:
    M = store.models
    with store.db.connection_context():
        events = [r[0] for r in M.ServiceEvent.select(M.ServiceEvent.id)
                  .where(M.ServiceEvent.service_id == service_id).order_by(M.ServiceEvent.id).tuples()]
        jobs = [r[0] for r in M.DeployJob.select(M.DeployJob.id)
                .where(M.DeployJob.service_id == service_id).order_by(M.DeployJob.id).tuples()]
    return events, jobs


def test_the_job_keeps_the_newest_events_and_jobs_of_each_service(store, clock):
    crowded, quiet = _service(store, clock, "crowded"), _service(store, clock, "quiet")
    events = _events(store, clock, crowded.id, 12)
    quiet_events = _events(store, clock, quiet.id, KEEP)  # at the bound: nothing goes
    # 210 jobs: the oldest one still queued and the second still running (a worker holds it)
    states = ["queued", "running"] + ["succeeded", "failed", "cancelled"] * 68 + ["succeeded", "running", "failed", "queued"]
    jobs = _jobs(store, clock, crowded.id, states)
    quiet_jobs = _jobs(store, clock, quiet.id, ["succeeded"] * 3)
    assert len(jobs) == JOBS_KEEP + 10

    gone = asyncio.run(HistoryCleanup(store, clock, events_keep=KEEP).once())

    assert gone == (12 - KEEP, 10 - 2)
    kept_events, kept_jobs = _kept(store, crowded.id)
    assert kept_events == events[-KEEP:]  # exactly the newest
    assert kept_jobs == jobs[:2] + jobs[-JOBS_KEEP:]  # the newest 200, and the unfinished never go
    assert _kept(store, quiet.id) == (quiet_events, quiet_jobs)  # another service: untouched
    # the timeline still answers newest first
    with store.uow(write=False) as uow:
        page, total = uow.service_events.page(crowded.id, page=1, per_page=50)
    assert total == KEEP and [e.id for e in page] == events[-KEEP:][::-1]
    # deleting is idempotent: a second run, or one of another process, finds nothing
    assert asyncio.run(HistoryCleanup(store, clock, events_keep=KEEP).once()) == (0, 0)


class _CountingClock(FakeClock):
    def __init__(self):
        super().__init__()
        self.looks = 0

    def monotonic(self) -> float:
        self.looks += 1
        return super().monotonic()


async def _until(condition, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


def test_the_job_runs_at_start_up_and_then_every_interval_of_the_clock(store):
    clock = _CountingClock()
    service = _service(store, clock, "ticking")
    _events(store, clock, service.id, KEEP + 3)
    rounds = []

    class Counted(HistoryCleanup):
        TICK_S = 0.001

        async def once(self):
            done = await super().once()
            rounds.append(done)
            return done

    async def scenario():
        job = Counted(store, clock, events_keep=KEEP)
        job.start()
        try:
            await _until(lambda: rounds, "the first round runs at start-up")
            assert rounds == [(3, 0)]
            _events(store, clock, service.id, 2)
            # the clock does not move: the job looks at it again and again, and waits
            looked = clock.looks
            await _until(lambda: clock.looks > looked + 20, "the job keeps looking at the clock")
            assert len(rounds) == 1
            clock.advance(HistoryCleanup.INTERVAL_S - 1)
            looked = clock.looks
            await _until(lambda: clock.looks > looked + 20, "the job keeps looking at the clock")
            assert len(rounds) == 1
            clock.advance(1)  # an interval of the Clock port has passed
            await _until(lambda: len(rounds) == 2, "the next round runs once the interval has passed")
            assert rounds[1] == (2, 0)
        finally:
            await job.stop()

    asyncio.run(scenario())
    assert len(_kept(store, service.id)[0]) == KEEP


@pytest.mark.parametrize("bad", ["0", "-5", "many", "1.5"])
def test_the_events_keep_setting_is_checked_at_start_up(bad):
    with pytest.raises(ConfigError, match="SLIPWAY_EVENTS_KEEP"):
        Config.from_env({"SLIPWAY_EVENTS_KEEP": bad})
    assert Config.from_env({}).events_keep == 1000
    assert Config.from_env({"SLIPWAY_EVENTS_KEEP": "25"}).events_keep == 25


@pytest.mark.storage
def test_a_server_bounds_the_timeline_with_its_setting(migrated_database_url, tmp_path):
    """The real server: ``SLIPWAY_EVENTS_KEEP`` reaches the job it runs, and the timeline
    API answers the newest events only."""
    import os

    from app.storage.store import Store

    key = admin_key(migrated_database_url)
    store = Store(migrated_database_url, threads=1)
    try:
        clock = FakeClock()
        # failed: the server's start-up reconcile and health checks leave them (and their timelines) alone
        crowded, quiet = _service(store, clock, "busy", "failed"), _service(store, clock, "calm", "failed")
        _events(store, clock, crowded.id, 9)
        _events(store, clock, quiet.id, 2)
    finally:
        store.close()
    env = dict(os.environ, SLIPWAY_DATABASE_URL=migrated_database_url, SLIPWAY_EVENTS_KEEP="3",
               SLIPWAY_BILLING_INTERVAL="0",
               SLIPWAY_WORK_DIR=str(tmp_path / "work"), SLIPWAY_BACKUP_DIR=str(tmp_path / "backups"))

    def timeline(service_id):
        answer = client.get(f"/api/services/{service_id}/events", params={"per_page": 100}).json()
        return [e["message"] for e in answer["data"]]

    with open(tmp_path / "server.log", "w+") as log:
        server, client = serve_panel(key, env, stderr=log)
        try:
            deadline = time.monotonic() + 30
            while (kept := timeline(crowded.id)) != ["event 8", "event 7", "event 6"]:  # the newest three
                assert time.monotonic() < deadline, kept
                time.sleep(0.05)
            assert timeline(quiet.id) == ["event 1", "event 0"]  # under the bound: untouched
        finally:
            client.close()
            server.terminate()
            server.wait(timeout=20)


def test_a_bad_events_keep_stops_the_server(database_url, tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_EVENTS_KEEP="0")
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "serve", "--port", "1"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "SLIPWAY_EVENTS_KEEP" in proc.stdout + proc.stderr
