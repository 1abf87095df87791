"""Backup policies' due runs on a real database (SQLite, or PostgreSQL with
``SLIPWAY_DATABASE_URL``) shared by several schedulers, each with a store (connections)
of its own, as processes would have: however many run the same due tick at once, each due
run makes exactly one backup; a scheduler that read a due run another already made (even
one that has since completed) makes none; after a stop the run that came due (and the
many missed meanwhile) makes one backup."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from app.storage.store import Store
from app.workers.backup_scheduler import BackupScheduler
from core.panel import access, backup_policies, backups, customers, services
from core.panel.compose import parse_compose

pytestmark = pytest.mark.storage

VOLUME = "services:\n  app:\n    image: localhost/busybox:latest\n    volumes: ['data:/data']\nvolumes:\n  data: {}\n"
PLACES = backup_policies.Destinations(frozenset({"local"}))
SCHEDULERS = 6


@pytest.fixture
def world(store, clock):
    admin = access.authenticate_key(store.uow(), clock, access.create_api_key(
        store.uow(), clock, name="admin", role="admin", rate_limit_rpm=1000)[1])
    acme = customers.create_customer(store.uow(), clock, name="Acme")
    return admin, acme


def _service(store, clock, customer, name):
    """A service stored as running (its deploy is not this test's business)."""
    with store.uow() as uow:
        service = services.Service(id=services.new_id("svc"), name=name, customer_id=customer.id,
                                   deploy_method="compose", status="running", compose=VOLUME, variables={},
                                   created_at=clock.now(), updated_at=clock.now())
        uow.services.add(service)
        uow.commit()
    return service


def _complete(store, backup_id, clock):
    with store.uow() as uow:
        backup = uow.backups.get(backup_id)
        uow.backups.update(replace(backup, status="completed", progress=100, completed_at=clock.now()))
        uow.commit()


def _scheduled(store, service_id):
    with store.uow(write=False) as uow:
        return [b for b in uow.backups.page(service_id, page=1, per_page=100)[0] if b.scheduled]


def _at_once(stores, fn):
    """``fn(store)`` in one thread per scheduler, released together."""
    barrier = threading.Barrier(len(stores))

    def go(store):
        barrier.wait()
        return fn(store)

    with ThreadPoolExecutor(len(stores)) as pool:
        return list(pool.map(go, stores))


@pytest.fixture
def stores(store):
    opened = [Store(store.url, threads=2) for _ in range(SCHEDULERS)]
    yield opened
    for s in opened:
        s.close()


def test_schedulers_racing_on_one_due_run_make_one_backup(store, stores, clock, world):
    admin, acme = world
    service = _service(store, clock, acme, "site")
    other = _service(store, clock, acme, "other")
    for s in (service, other):
        backup_policies.put_policy(store.uow(), clock, admin, s.id, {"schedule": "0 * * * *", "keep_last": 5}, PLACES)
    schedulers = [BackupScheduler(s, clock, parse_compose) for s in stores]
    for round_ in range(4):
        clock.advance(3600)
        made = _at_once(schedulers, lambda scheduler: scheduler.tick())
        ids = [b.id for tick in made for b in tick]
        assert len(ids) == 2 and len(set(ids)) == 2, made  # one per due policy, whoever made it
        for s in (service, other):
            listed = _scheduled(store, s.id)
            assert len(listed) == round_ + 1
            _complete(store, listed[0].id, clock)
        assert all(scheduler.tick() == [] for scheduler in schedulers)  # nothing due until the next hour


def test_a_stale_read_of_a_run_already_made_makes_nothing(store, stores, clock, world):
    """The run was claimed and its backup even completed before this scheduler acts on
    what it read: the service is idle, so only the guarded claim stops a second backup."""
    admin, acme = world
    service = _service(store, clock, acme, "site")
    backup_policies.put_policy(store.uow(), clock, admin, service.id, {"schedule": "0 * * * *", "keep_last": 5},
                               PLACES)
    clock.advance(3600)
    seen = [backup_policies.due_policies(s.uow(), clock) for s in stores[:2]]
    first = backup_policies.run_policy(stores[0].uow(), clock, seen[0][0], parse_compose)
    _complete(store, first.id, clock)
    assert backup_policies.run_policy(stores[1].uow(), clock, seen[1][0], parse_compose) is None
    assert [b.id for b in _scheduled(store, service.id)] == [first.id]


def test_racing_on_the_claim_itself_makes_one_backup(store, stores, clock, world):
    """Every scheduler holds the same due policy and calls the claim at once (no tick's
    read in between)."""
    admin, acme = world
    service = _service(store, clock, acme, "site")
    backup_policies.put_policy(store.uow(), clock, admin, service.id, {"schedule": "*/5 * * * *", "keep_last": 5},
                               PLACES)
    for round_ in range(3):
        clock.advance(300)
        (due,) = backup_policies.due_policies(store.uow(), clock)
        made = _at_once(stores, lambda s: backup_policies.run_policy(s.uow(), clock, due, parse_compose))
        assert len([m for m in made if m is not None]) == 1
        assert len(_scheduled(store, service.id)) == round_ + 1
        _complete(store, _scheduled(store, service.id)[0].id, clock)


def test_runs_missed_while_stopped_make_one_backup_at_start(store, clock, world):
    admin, acme = world
    service = _service(store, clock, acme, "site")
    backup_policies.put_policy(store.uow(), clock, admin, service.id, {"schedule": "*/10 * * * *", "keep_last": 5},
                               PLACES)
    clock.advance(26 * 3600)  # the panel was down for a day: 156 runs came due
    restarted = Store(store.url, threads=2)  # a new process on the same database
    try:
        scheduler = BackupScheduler(restarted, clock, parse_compose)
        (made,) = scheduler.tick()
        assert scheduler.tick() == []
    finally:
        restarted.close()
    assert [b.id for b in _scheduled(store, service.id)] == [made.id]
    policy = backup_policies.get_policy(store.uow(), admin, service.id)
    assert policy.next_run_at > clock.now() and policy.last_backup_id == made.id


def test_retention_deletes_rows_beyond_keep_last(store, clock, world, tmp_path):
    from app.storage.backup_archives import BackupArchives
    from plugins.backup_local import LocalFactory
    from ports.settings import Settings

    admin, acme = world
    service = _service(store, clock, acme, "site")
    backup_policies.put_policy(store.uow(), clock, admin, service.id, {"schedule": "0 * * * *", "keep_last": 2},
                               PLACES)
    local = LocalFactory().create(Settings({"kind": "local", "path": str(tmp_path / "backups"), "name": "local"}))
    archives = BackupArchives({"local": local})
    by_hand = backups.create_backup(store.uow(), clock, admin, service.id, parse_compose)
    _complete(store, by_hand.id, clock)
    gone = []
    for _ in range(4):
        clock.advance(3600)
        (made,) = BackupScheduler(store, clock, parse_compose).tick()
        _complete(store, made.id, clock)
        with store.uow(write=False) as uow:
            done = uow.backups.get(made.id)
        gone += backup_policies.after_backup(store.uow(), archives, done)
    kept = [b.id for b in _scheduled(store, service.id)]
    assert len(kept) == 2 and not set(kept) & set(gone) and len(gone) == 2
    with store.uow(write=False) as uow:
        assert uow.backups.get(by_hand.id) is not None


def test_busy_services_do_not_hold_up_the_others(store, clock, world):
    """A tick reads every page of due policies: with pages of two, five policies whose
    services are busy do not keep the sixth from running."""
    admin, acme = world
    made = [_service(store, clock, acme, f"s{i}") for i in range(6)]
    for service in made:
        backup_policies.put_policy(store.uow(), clock, admin, service.id, {"schedule": "0 * * * *", "keep_last": 5},
                                   PLACES)
    ordered = sorted(made, key=lambda s: s.id)
    for service in ordered[:5]:  # a backup asked for by hand is queued: busy
        backups.create_backup(store.uow(), clock, admin, service.id, parse_compose)
    clock.advance(3600)
    (queued,) = BackupScheduler(store, clock, parse_compose, page=2).tick()
    assert queued.service_id == ordered[5].id and queued.scheduled


def test_a_deleted_services_policy_goes_with_it(store, clock, world):
    admin, acme = world
    service = _service(store, clock, acme, "site")
    backup_policies.put_policy(store.uow(), clock, admin, service.id, {"schedule": "0 * * * *", "keep_last": 5}, PLACES)
    with store.uow() as uow:
        uow.services.delete(service.id)
        uow.commit()
    with store.uow(write=False) as uow:
        assert uow.backup_policies.get(service.id) is None
    clock.advance(3600)
    assert BackupScheduler(store, clock, parse_compose).tick() == []
