"""Backup policies in core: the next run from the cron schedule as the (fake) clock tells
the time, which policies are due, a due run claimed once, runs missed while nothing ran
made once, busy services waited for, services without volumes skipped, and retention."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from core.errors import Forbidden, Invalid, NotFound
from core.panel import backup_policies, backups, services
from core.panel.backup_policies import Destinations
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeArchives, FakeResolver, parse, principal_of

QUOTA = Quota(read_compose=parse)
PLACES = Destinations(frozenset({"local", "offsite"}), default="local")
UTC = timezone.utc


@pytest.fixture
def archives():
    return FakeArchives()


def _service(uow, clock, admin, customer, methods, runtime, name="db", volumes=("data",)):
    service, job = services.create_service(
        uow, clock, admin, {"name": name, "deploy_method": "compose", "customer_id": customer.id,
                            "components": [("db", 64, volumes)]}, methods, {}, QUOTA)
    run_job(uow, Deployer(clock, runtime, DeploySettings(health_timeout=90, drain_seconds=2.0, settle_seconds=0), resolver=FakeResolver()), job)
    return services.get_service(uow, admin, service.id)


@pytest.fixture
def running(uow, clock, admin, customer, methods, runtime):
    return _service(uow, clock, admin, customer, methods, runtime)


def _put(uow, clock, admin, service, **body):
    body = {"schedule": "0 * * * *", "keep_last": 3, **body}
    return backup_policies.put_policy(uow, clock, admin, service.id, body, PLACES)


def _tick(uow, clock):
    return [b for p in backup_policies.due_policies(uow, clock)
            if (b := backup_policies.run_policy(uow, clock, p, parse)) is not None]


def _finish(uow, clock, runtime, archives, backup):
    kind, claimed = backups.claim_next(uow, clock)
    assert (kind, claimed.id) == ("backup", backup.id)
    done = backups.run_backup(uow, clock, runtime, archives, claimed)
    assert done.status == "completed"
    return done


# --- the schedule ----------------------------------------------------------------------------


def test_the_next_run_is_the_schedules_first_time_after_the_given_one():
    at = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    assert backup_policies.next_run("*/15 * * * *", at) == datetime(2026, 11, 1, 9, 15, tzinfo=UTC)
    assert backup_policies.next_run("30 3 * * *", at) == datetime(2026, 11, 2, 3, 30, tzinfo=UTC)
    assert backup_policies.next_run("0 0 1 * *", at) == datetime(2026, 12, 1, tzinfo=UTC)
    assert backup_policies.next_run("0 9 * * MON", at) == datetime(2026, 11, 2, 9, 0, tzinfo=UTC)  # a Monday
    # read in UTC whatever zone the time is given in
    berlin = datetime(2026, 11, 1, 10, 0, tzinfo=timezone(timedelta(hours=1)))
    assert backup_policies.next_run("0 * * * *", berlin) == datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("schedule", ["* * * *", "* * * * * *", "61 * * * *", "* 24 * * *", "0 0 30 2 *",
                                      "@daily", "", "x y z w v", "*/0 * * * *", 5, None])
def test_a_schedule_that_is_not_five_usable_cron_fields_is_named(schedule):
    assert backup_policies.schedule_problem(schedule)


@pytest.mark.parametrize("schedule", ["* * * * *", "30 3 * * *", "0 */6 * * 1-5", "15 2 1,15 * *", "0 0 L * *"])
def test_usable_schedules_pass(schedule):
    assert backup_policies.schedule_problem(schedule) is None


# --- requests ---------------------------------------------------------------------------------


def test_put_stores_the_policy_with_its_next_run_and_defaults(uow, clock, admin, running):
    policy = _put(uow, clock, admin, running, schedule="30  3 * * *")
    assert (policy.schedule, policy.destination, policy.keep_last, policy.verify) == ("30 3 * * *", "local", 3, False)
    assert policy.next_run_at == datetime(2026, 11, 2, 3, 30, tzinfo=UTC)
    assert backup_policies.get_policy(uow, admin, running.id) == policy
    clock.advance(60)
    again = _put(uow, clock, admin, running, schedule="*/5 * * * *", destination="offsite", verify=True)
    assert (again.destination, again.verify, again.created_at, again.updated_at) == (
        "offsite", True, policy.created_at, clock.now())
    assert again.next_run_at == datetime(2026, 11, 1, 9, 5, tzinfo=UTC)
    backup_policies.delete_policy(uow, admin, running.id)
    with pytest.raises(NotFound, match="no backup policy"):
        backup_policies.get_policy(uow, admin, running.id)
    with pytest.raises(NotFound, match="no backup policy"):
        backup_policies.delete_policy(uow, admin, running.id)


@pytest.mark.parametrize("body, field", [
    ({"schedule": "61 * * * *"}, "schedule"),
    ({"schedule": "* * * *"}, "schedule"),
    ({"destination": "mars"}, "destination"),
    ({"keep_last": 0}, "keep_last"),
    ({"keep_last": 366}, "keep_last"),
    ({"keep_last": True}, "keep_last"),
    ({"keep_last": "3"}, "keep_last"),
    ({"verify": "yes"}, "verify"),
])
def test_put_refuses_a_bad_field_naming_it(uow, clock, admin, running, body, field):
    with pytest.raises(Invalid) as refused:
        _put(uow, clock, admin, running, **body)
    assert list(refused.value.fields) == [field]
    with pytest.raises(NotFound):
        backup_policies.get_policy(uow, admin, running.id)


def test_permissions_and_other_customers(uow, clock, admin, customer, running):
    viewer = principal_of(uow, clock, "viewer")
    for call in (lambda p: _put(uow, clock, p, running), lambda p: backup_policies.get_policy(uow, p, running.id),
                 lambda p: backup_policies.delete_policy(uow, p, running.id)):
        with pytest.raises(Forbidden):
            call(viewer)
    from core.panel import access, customers
    other = customers.create_customer(uow, clock, name="Other")
    key = access.ApiKey(id="0" * 16, name="c", role="customer", secret_hash="", rate_limit_rpm=1,
                        created_at=clock.now(), customer_id=other.id)
    stranger = access.Principal(key=key, permissions=frozenset({"backups:read", "backups:write"}))
    _put(uow, clock, admin, running)
    for call in (lambda p: _put(uow, clock, p, running), lambda p: backup_policies.get_policy(uow, p, running.id),
                 lambda p: backup_policies.delete_policy(uow, p, running.id)):
        with pytest.raises(NotFound):
            call(stranger)
    assert backup_policies.get_policy(uow, admin, running.id).keep_last == 3


# --- the scheduler ---------------------------------------------------------------------------


def test_due_policies_are_chosen_by_the_clock(uow, clock, admin, customer, methods, runtime, running):
    second = _service(uow, clock, admin, customer, methods, runtime, name="second")
    _put(uow, clock, admin, running, schedule="0 * * * *")  # 10:00
    _put(uow, clock, admin, second, schedule="30 9 * * *")  # 09:30
    assert backup_policies.due_policies(uow, clock) == []
    clock.advance(30 * 60)
    assert [p.service_id for p in backup_policies.due_policies(uow, clock)] == [second.id]
    clock.advance(30 * 60)
    both = sorted([second.id, running.id])
    assert [p.service_id for p in backup_policies.due_policies(uow, clock)] == both  # by service id
    assert [p.service_id for p in backup_policies.due_policies(uow, clock, limit=1)] == both[:1]
    assert [p.service_id for p in backup_policies.due_policies(uow, clock, limit=1, after=both[0])] == both[1:]
    assert backup_policies.due_policies(uow, clock, after=both[1]) == []


def test_a_due_run_makes_one_scheduled_backup_and_moves_the_next_run_on(uow, clock, admin, running):
    _put(uow, clock, admin, running, schedule="0 * * * *")
    clock.advance(3600)
    due = backup_policies.due_policies(uow, clock)
    made = backup_policies.run_policy(uow, clock, due[0], parse)
    assert (made.status, made.scheduled, made.volumes) == ("pending", True, ("data",))
    # a second scheduler holding the same due run finds it claimed
    assert backup_policies.run_policy(uow, clock, due[0], parse) is None
    policy = backup_policies.get_policy(uow, admin, running.id)
    assert (policy.next_run_at, policy.last_run_at, policy.last_backup_id) == (
        datetime(2026, 11, 1, 11, 0, tzinfo=UTC), clock.now(), made.id)
    assert backups.list_backups(uow, admin, running.id, page=1, per_page=20)[1] == 1
    events = services.list_events(uow, admin, running.id, page=1, per_page=5)[0]
    assert any("scheduled" in e.message and e.status == "started" for e in events)


def test_runs_missed_while_nothing_ran_make_one_backup(uow, clock, admin, running, runtime, archives):
    _put(uow, clock, admin, running, schedule="*/10 * * * *")
    clock.advance(5 * 3600 + 120)  # thirty runs came due meanwhile
    made = _tick(uow, clock)
    assert len(made) == 1
    assert _tick(uow, clock) == []
    assert backup_policies.get_policy(uow, admin, running.id).next_run_at == datetime(2026, 11, 1, 14, 10, tzinfo=UTC)


def test_a_busy_service_keeps_its_run_due_until_it_is_idle(uow, clock, admin, running, runtime, archives):
    by_hand = backups.create_backup(uow, clock, admin, running.id, parse)
    _put(uow, clock, admin, running, schedule="0 * * * *")
    clock.advance(3600)
    assert _tick(uow, clock) == []  # the backup asked for is still queued
    assert backup_policies.get_policy(uow, admin, running.id).next_run_at == datetime(2026, 11, 1, 10, tzinfo=UTC)
    _finish(uow, clock, runtime, archives, by_hand)
    clock.advance(5)
    made = _tick(uow, clock)
    assert len(made) == 1 and made[0].scheduled
    with uow:
        uow.services.update(replace(uow.services.get(running.id), status="deploying"))
        uow.commit()
    clock.advance(3600)
    assert _tick(uow, clock) == []  # deploying: still due


def test_a_service_without_volumes_skips_its_run_and_the_timeline_says_why(uow, clock, admin, customer, methods,
                                                                           runtime):
    bare = _service(uow, clock, admin, customer, methods, runtime, name="bare", volumes=())
    _put(uow, clock, admin, bare, schedule="0 * * * *")
    clock.advance(3600)
    assert _tick(uow, clock) == []
    policy = backup_policies.get_policy(uow, admin, bare.id)
    assert (policy.next_run_at, policy.last_run_at) == (datetime(2026, 11, 1, 11, tzinfo=UTC), None)
    event = services.list_events(uow, admin, bare.id, page=1, per_page=1)[0][0]
    assert (event.type, event.status) == ("backup", "failed") and "skipped" in event.message
    assert "no volumes" in event.message


def test_a_run_of_a_policy_changed_meanwhile_is_not_made(uow, clock, admin, running):
    _put(uow, clock, admin, running, schedule="0 * * * *")
    clock.advance(3600)
    due = backup_policies.due_policies(uow, clock)
    _put(uow, clock, admin, running, schedule="30 * * * *")
    assert backup_policies.run_policy(uow, clock, due[0], parse) is None
    assert backups.list_backups(uow, admin, running.id, page=1, per_page=20)[1] == 0


# --- retention and verification -----------------------------------------------------------


def test_retention_keeps_the_newest_completed_scheduled_backups(uow, clock, admin, running, runtime, archives):
    by_hand = _finish(uow, clock, runtime, archives, backups.create_backup(uow, clock, admin, running.id, parse))
    verified = []
    _put(uow, clock, admin, running, schedule="0 * * * *", keep_last=2, verify=True)
    made = []
    for _ in range(4):
        clock.advance(3600)
        (queued,) = _tick(uow, clock)
        done = _finish(uow, clock, runtime, archives, queued)
        gone = backup_policies.after_backup(uow, archives, done, verify=verified.append)
        made.append((done, gone))
    assert [gone for _, gone in made] == [[], [], [made[0][0].id], [made[1][0].id]]
    listed = [b.id for b in backups.list_backups(uow, admin, running.id, page=1, per_page=20)[0]]
    assert listed == [made[3][0].id, made[2][0].id, by_hand.id]  # the backup asked for stays
    assert archives.removed == [backups.archive_key(running.customer_id, running.id, made[i][0].id) for i in (0, 1)]
    assert [b.id for b in verified] == [d.id for d, _ in made]


def test_retention_leaves_failed_and_unscheduled_backups_and_needs_a_policy(uow, clock, admin, running, runtime,
                                                                            archives):
    _put(uow, clock, admin, running, schedule="0 * * * *", keep_last=1)
    clock.advance(3600)
    (queued,) = _tick(uow, clock)
    kind, claimed = backups.claim_next(uow, clock)
    archives.fail_write = True
    failed = backups.run_backup(uow, clock, runtime, archives, claimed)
    assert failed.status == "failed"
    assert backup_policies.after_backup(uow, archives, failed) == []
    backup_policies.delete_policy(uow, admin, running.id)
    archives.fail_write = False
    clock.advance(1)
    done = _finish(uow, clock, runtime, archives, backups.create_backup(uow, clock, admin, running.id, parse))
    assert backup_policies.after_backup(uow, archives, replace(done, scheduled=True)) == []  # no policy now
