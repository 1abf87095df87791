"""Deploy jobs against a real database (SQLite, or PostgreSQL with SLIPWAY_DATABASE_URL)
and a scripted engine: the per-customer limit of the queue, also under concurrent
claims; the final progress before the status it leads to; a cancelled job cleans up;
the deploy worker runs several jobs at once and cancels those of deleted services."""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from app.workers.deploys import DeployWorker
from app.engine_calls import EngineCalls
from app.panel.realtime import DeployProgress
from core.panel import deploys, access, customers, services
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from ports.events import EventBus
from ports.runtime import ContainerState
from tests.support.scripted_engine import ScriptedEngine

#: the deploy times core used to default to (it takes them from the caller now)
DEPLOY_TIMES = DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0)

ONE = "services:\n  a:\n    image: localhost/busybox:latest\n"


class RecordingBus(EventBus):
    def __init__(self):
        self.events, self._lock = [], threading.Lock()

    def publish(self, event):
        with self._lock:
            self.events.append(event)

    def subscribe(self, callback):
        return None

    def unsubscribe(self, handle):
        pass

    def of(self, service_id):
        return [(e.type, e.data.get("step") or e.data.get("status")) for e in self.events
                if e.service_id == service_id]


def _admin(store, clock):
    _, key = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=1000)
    return access.authenticate_key(store.uow(), clock, key)


def _create(store, clock, principal, customer, name, compose=ONE):
    from app.pluginmanager import deploy_methods, make_plugin_manager, templates

    pm = make_plugin_manager()
    service, job = services.create_service(store.uow(), clock, principal, {
        "name": name, "customer_id": customer.id, "deploy_method": "compose", "compose": compose},
        deploy_methods(pm), templates(pm))
    clock.advance(1)  # the queue is first come, first served
    return service, job


def _customer_of(store, job):
    with store.uow() as uow:
        return uow.services.get(job.service_id).customer_id


def test_a_customer_at_its_limit_waits_while_others_are_claimed(store, clock):
    principal = _admin(store, clock)
    a = customers.create_customer(store.uow(), clock, name="A")
    b = customers.create_customer(store.uow(), clock, name="B")
    a_jobs = [_create(store, clock, principal, a, f"a{i}")[1] for i in range(3)]
    _, b_job = _create(store, clock, principal, b, "b0")

    first = deploys.claim_next(store.uow(), clock, "wkr_one", per_customer=2)
    second = deploys.claim_next(store.uow(), clock, "wkr_two", per_customer=2)  # another process
    assert [first.id, second.id] == [a_jobs[0].id, a_jobs[1].id]
    third = deploys.claim_next(store.uow(), clock, "wkr_one", per_customer=2)
    assert third.id == b_job.id  # a2, older, waits: A has two running (in two processes)
    assert deploys.claim_next(store.uow(), clock, "wkr_one", per_customer=2) is None
    with store.uow() as uow:
        assert uow.deploy_jobs.get(a_jobs[2].id).state == "queued"
        assert uow.deploy_jobs.running_by_customer() == {a.id: 2, b.id: 1}
        uow.deploy_jobs.finish(first.id, "succeeded", None, clock.now())
        uow.commit()
    assert deploys.claim_next(store.uow(), clock, "wkr_two", per_customer=2).id == a_jobs[2].id


def test_concurrent_claims_never_run_more_than_the_limit_of_one_customer(store, clock):
    """Many claimers at once (threads with their own connections, as processes would):
    claims are serialized, so the count of a customer's running jobs is exact."""
    principal = _admin(store, clock)
    a = customers.create_customer(store.uow(), clock, name="A")
    b = customers.create_customer(store.uow(), clock, name="B")
    for i in range(4):  # the default customer limits allow 4 CPUs: 4 services of 1
        _create(store, clock, principal, a, f"a{i}")
        _create(store, clock, principal, b, f"b{i}")
    barrier = threading.Barrier(8)

    def claim(i):
        barrier.wait()
        return deploys.claim_next(store.uow(), clock, f"wkr_{i}", per_customer=2)

    with ThreadPoolExecutor(max_workers=8) as pool:
        claimed = [job for job in pool.map(claim, range(8)) if job is not None]
    by_customer = {}
    for job in claimed:
        by_customer[_customer_of(store, job)] = by_customer.get(_customer_of(store, job), 0) + 1
    assert by_customer == {a.id: 2, b.id: 2}, by_customer


def test_the_final_progress_comes_before_the_status_it_leads_to(store, clock):
    principal = _admin(store, clock)
    customer = customers.create_customer(store.uow(), clock, name="Acme")
    bus = RecordingBus()
    store.bus = bus
    progress = DeployProgress(store, bus)
    engine = ScriptedEngine()

    ok, _ = _create(store, clock, principal, customer, "fine")
    deployer = Deployer(clock, engine, DeploySettings(health_timeout=90, drain_seconds=2.0, settle_seconds=0),
                        progress=progress)
    run_job(store.uow(), deployer, deploys.claim_next(store.uow(), clock))
    assert bus.of(ok.id)[-2:] == [("deploy.progress", "done"), ("service.status", "running")], bus.of(ok.id)
    [done] = [e for e in bus.events if e.type == "deploy.progress" and e.data["step"] == "done"]
    assert done.customer_id == customer.id and done.data["progress"] == 100

    broken, _ = _create(store, clock, principal, customer, "broken")
    original_run = engine.run

    def run_and_exit(spec):  # the container is gone at once
        cid = original_run(spec)
        state = engine.containers_by_id[cid]
        engine.containers_by_id[cid] = ContainerState(cid, state.name, "exited", False, None, {}, state.labels,
                                                      exit_code=3)
        return cid

    engine.run, engine.logs = run_and_exit, lambda cid, tail=10: []
    run_job(store.uow(), deployer, deploys.claim_next(store.uow(), clock))
    assert bus.of(broken.id)[-2:] == [("deploy.progress", "failed"), ("service.status", "failed")]
    with store.uow() as uow:
        events, _ = uow.service_events.page(broken.id, page=1, per_page=5)
    assert "exited with code 3" in events[0].message


def test_a_cancelled_job_removes_what_it_made_and_ends_service_deleted(store, clock):
    principal = _admin(store, clock)
    customer = customers.create_customer(store.uow(), clock, name="Acme")
    service, job = _create(store, clock, principal, customer, "doomed")
    job = deploys.claim_next(store.uow(), clock)
    engine = ScriptedEngine()
    cancel = threading.Event()
    engine.on_run = lambda spec: (services.delete_service(store.uow(), engine, principal, service.id), cancel.set())
    run_job(store.uow(), Deployer(clock, engine, DEPLOY_TIMES), job, cancel=cancel)
    assert engine.containers(service.id) == [] and engine.removed_services == [service.id] * 3
    with store.uow() as uow:
        assert uow.deploy_jobs.get(job.id).error == "service deleted"


class HangingEngine(ScriptedEngine):
    """Containers whose healthcheck never passes: every job waits until cancelled."""

    def run(self, spec):
        cid = super().run(spec)
        state = self.containers_by_id[cid]
        self.containers_by_id[cid] = ContainerState(cid, state.name, "running", True, "starting", {}, state.labels)
        return cid


def test_the_worker_runs_jobs_side_by_side_within_the_limits_and_cancels_deleted_ones(store, clock, tmp_path):
    principal = _admin(store, clock)
    a = customers.create_customer(store.uow(), clock, name="A")
    b = customers.create_customer(store.uow(), clock, name="B")
    made = [_create(store, clock, principal, a, f"a{i}")[0] for i in range(3)]
    made += [_create(store, clock, principal, b, f"b{i}")[0] for i in range(3)]
    engine = HangingEngine()
    worker = DeployWorker(store, clock, engine, EngineCalls(threads=4), concurrency=4, per_customer=2,
                          work_dir=str(tmp_path / "work"))
    worker.CANCEL_POLL_S = 0.2

    async def scenario():
        worker.start()
        try:
            while len(worker.running_jobs()) < 4:
                await asyncio.sleep(0.05)
            running = set(worker.running_jobs().values())
            assert running == {made[0].id, made[1].id, made[3].id, made[4].id}  # two of each customer
            await asyncio.sleep(0.5)
            assert len(worker.running_jobs()) == 4  # a2 and b2 wait in the queue
            for service in made[:2]:  # deleted: their jobs stop, a2 takes a slot
                await asyncio.to_thread(services.delete_service, store.uow(), engine, principal, service.id)
            expected = {made[2].id, made[3].id, made[4].id}
            for _ in range(200):  # the deleted ones' threads finish; a2 was claimed meanwhile
                if set(worker.running_jobs().values()) == expected:
                    break
                await asyncio.sleep(0.05)
            assert set(worker.running_jobs().values()) == expected
        finally:
            for service in made[2:]:
                await asyncio.to_thread(services.delete_service, store.uow(), engine, principal, service.id)
            for _ in range(200):  # a queued job of a deleted service is claimed and ended too
                if not worker.running_jobs() and await asyncio.to_thread(_all_ended, store, made):
                    break
                await asyncio.sleep(0.05)
            await worker.stop()

    asyncio.run(scenario())
    with store.uow() as uow:
        assert {uow.deploy_jobs.get(j).error for j in _job_ids(uow, made)} == {"service deleted"}
    assert engine.containers_by_id == {}


def _all_ended(store, made) -> bool:
    with store.uow(write=False) as uow:
        return all(uow.deploy_jobs.get(j).state == "failed" for j in _job_ids(uow, made))


def _job_ids(uow, made):
    J = uow.deploy_jobs.m.DeployJob
    return [row.id for row in J.select().where(J.service_id.in_([s.id for s in made]))]


class StuckPullEngine(ScriptedEngine):
    """An image pull that goes on until its ``cancel`` event is set (as the runtimes'
    pulls do): only the worker's watch for deleted services can end the job."""

    def __init__(self):
        super().__init__()
        self.pulls = []

    def has_image(self, image):
        return False

    def pull_image(self, image, *, timeout=None, cancel=None):
        self.pulls.append(cancel)
        while not cancel.wait(0.05):
            pass
        raise RuntimeError(f"cancelled: pulling {image}")


def test_the_worker_cancels_a_pull_whose_service_was_deleted(store, clock, tmp_path):
    principal = _admin(store, clock)
    customer = customers.create_customer(store.uow(), clock, name="Acme")
    service, job = _create(store, clock, principal, customer, "pulling",
                           "services:\n  a:\n    image: slipway-test/big:1\n")  # no registry host: nothing to look up
    engine = StuckPullEngine()
    worker = DeployWorker(store, clock, engine, EngineCalls(threads=2), work_dir=str(tmp_path / "work"))

    async def scenario():
        worker.start()
        try:
            while not engine.pulls:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(services.delete_service, store.uow(), engine, principal, service.id)
            deleted_at = asyncio.get_running_loop().time()
            while worker.running_jobs():
                await asyncio.sleep(0.05)
            return asyncio.get_running_loop().time() - deleted_at
        finally:
            await worker.stop()

    took = asyncio.run(scenario())
    assert took < 10  # the decisions' bound; the watch looks every DeployWorker.CANCEL_POLL_S
    with store.uow() as uow:
        assert uow.deploy_jobs.get(job.id).error == "service deleted"
    assert engine.removed_services == [service.id] * 3  # the delete, its sweep, then the job's clean-up


def test_deploy_settings_are_read_and_bad_values_stop_start_up():
    import pytest

    from app.config import Config, ConfigError

    config = Config.from_env({})
    assert (config.deploy_concurrency, config.deploys_per_customer, config.deploy_settle) == (4, 2, 3.0)
    config = Config.from_env({"SLIPWAY_DEPLOY_CONCURRENCY": "8", "SLIPWAY_DEPLOYS_PER_CUSTOMER": "1",
                              "SLIPWAY_DEPLOY_SETTLE": "0"})
    assert (config.deploy_concurrency, config.deploys_per_customer, config.deploy_settle) == (8, 1, 0.0)
    for name, bad in (("SLIPWAY_DEPLOY_CONCURRENCY", "0"), ("SLIPWAY_DEPLOY_CONCURRENCY", "two"),
                      ("SLIPWAY_DEPLOYS_PER_CUSTOMER", "-1"), ("SLIPWAY_DEPLOY_SETTLE", "soon"),
                      ("SLIPWAY_DEPLOY_SETTLE", "-3")):
        with pytest.raises(ConfigError, match=name):
            Config.from_env({name: bad})
