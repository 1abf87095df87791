"""Service backups and restores as jobs: one at a time per service, never while it
deploys, interrupted ones recovered; the archive store and the engine are fakes."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.panel import backups, deploys, services, leases
from core.errors import Conflict, Forbidden, NotFound
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeArchives, FakeResolver, parse, principal_of

QUOTA = Quota(read_compose=parse)


@pytest.fixture
def archives():
    return FakeArchives()


@pytest.fixture
def running(uow, clock, admin, customer, methods, runtime):
    """A deployed service with two components and a volume ``data``."""
    service, job = services.create_service(
        uow, clock, admin, {"name": "db", "deploy_method": "compose", "customer_id": customer.id,
                            "components": [("db", 64, ("data",)), ("side", 16, ())]}, methods, {}, QUOTA)
    run_job(uow, Deployer(clock, runtime, DeploySettings(health_timeout=90, drain_seconds=2.0, settle_seconds=0), resolver=FakeResolver()), job)
    return services.get_service(uow, admin, service.id)


def _backup(uow, clock, admin, service):
    return backups.create_backup(uow, clock, admin, service.id, parse)


def test_a_backup_is_queued_run_and_completed(uow, clock, admin, running, runtime, archives):
    queued = _backup(uow, clock, admin, running)
    assert (queued.status, queued.volumes) == ("pending", ("data",))
    kind, claimed = backups.claim_next(uow, clock, owner="wkr_1")
    assert (kind, claimed.id, claimed.status) == ("backup", queued.id, "running")
    assert backups.claim_next(uow, clock) is None
    done = backups.run_backup(uow, clock, runtime, archives, claimed)
    assert (done.status, done.progress, done.size_bytes) == ("completed", 100, len(f"slw-{running.id}-data"))
    assert backups.get_backup(uow, admin, running.id, queued.id) == done
    statuses = [e.data["status"] for e in uow.published if e.type == "backup.progress"]
    assert statuses[0] == "pending" and statuses[-1] == "completed"


def test_backup_refusals(uow, clock, admin, customer, running, methods, archives):
    viewer = principal_of(uow, clock, "viewer")
    with pytest.raises(Forbidden):
        _backup(uow, clock, viewer, running)
    volumeless, _ = services.create_service(
        uow, clock, admin, {"name": "web", "deploy_method": "compose", "customer_id": customer.id}, methods, {},
        QUOTA)
    with pytest.raises(Conflict, match="deploying"):
        _backup(uow, clock, admin, volumeless)
    with uow:
        uow.services.update(replace(volumeless, status="running"))
        uow.commit()
    with pytest.raises(Conflict, match="no volumes"):
        _backup(uow, clock, admin, volumeless)
    first = _backup(uow, clock, admin, running)
    with pytest.raises(Conflict, match="still being made"):
        _backup(uow, clock, admin, running)
    with pytest.raises(Conflict, match="wait until it ends"):
        backups.delete_backup(uow, archives, admin, running.id, first.id)
    with pytest.raises(Conflict, match="only a completed backup"):
        backups.restore_backup(uow, clock, admin, running.id, first.id)
    with pytest.raises(NotFound):
        backups.get_backup(uow, admin, volumeless.id, first.id)  # through another service
    assert backups.list_backups(uow, admin, running.id, page=1, per_page=10)[1] == 1


def test_a_failed_backup_leaves_no_archive(uow, clock, admin, running, runtime, archives):
    _backup(uow, clock, admin, running)
    _, claimed = backups.claim_next(uow, clock)
    archives.fail_write = True
    failed = backups.run_backup(uow, clock, runtime, archives, claimed)
    assert (failed.status, failed.error) == ("failed", "disk full")
    assert backups.archive_key(running.customer_id, running.id, claimed.id) in archives.removed
    backups.delete_backup(uow, archives, admin, running.id, failed.id)  # a failed backup may go
    assert backups.list_backups(uow, admin, running.id, page=1, per_page=10) == ([], 0)


def test_a_restore_stops_what_ran_refills_the_volumes_and_starts_it_again(uow, clock, admin, running, runtime,
                                                                          archives):
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    side = next(s for s in runtime.containers(running.id) if s.labels["slipway.component"] == "side")
    db = next(s for s in runtime.containers(running.id) if s.labels["slipway.component"] == "db")
    runtime.stop(side.id)  # not running before the restore: stays stopped
    queued = backups.restore_backup(uow, clock, admin, running.id, done.id)
    assert queued.restore_status == "pending"
    with pytest.raises(Conflict, match="being restored"):
        backups.delete_backup(uow, archives, admin, running.id, done.id)
    kind, claimed = backups.claim_next(uow, clock)
    runtime.calls.clear()
    restored = backups.run(uow, clock, runtime, archives, (kind, claimed))
    stored = backups.get_backup(uow, admin, running.id, done.id)
    assert restored == stored  # ``run`` answers the backup as the job left it
    assert (stored.restore_status, stored.restore_progress) == ("completed", 100)
    ops = [c[0] for c in runtime.calls]
    assert ops == ["stop", "import_volume", "start"]
    assert runtime.calls[1][2] == f"slw-{running.id}-data".encode()
    assert stored.restore_containers == (db.name,) and db.name.startswith("slw-db-db-")  # slw-<name>-<component>-<job>


def test_a_restore_reports_its_steps_in_order_on_the_channel_and_the_timeline(uow, clock, admin, running, runtime,
                                                                              archives):
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    backups.restore_backup(uow, clock, admin, running.id, done.id)
    uow.published.clear()
    backups.run(uow, clock, runtime, archives, backups.claim_next(uow, clock))
    restore = [e.data for e in uow.published if e.type == "backup.progress" and e.data["operation"] == "restore"]
    steps = [(d["step"], d["part"]) for d in restore if d["step"] is not None]
    assert steps == [("fetched", None), ("verified", None), ("loaded", "data"), ("completed", None)]
    assert restore[-1]["status"] == "completed" and restore[-1]["progress"] == 100
    progress = [d["progress"] for d in restore]
    assert progress == sorted(progress)
    events, _ = services.list_events(uow, admin, running.id, page=1, per_page=100)
    mine = sorted(((e.id, e.status, e.message) for e in events if e.type == "restore" and done.id in e.message))
    assert [status for _, status, _ in mine] == ["started", "progress", "progress", "progress", "success"]
    assert [m.split(": ", 1)[1].split(" ", 1)[0] for _, status, m in mine if status == "progress"] == [
        "fetched", "verified", "loaded"]
    assert "loaded volume data (1 of 1)" in mine[3][2]
    assert mine[-1][1] == "success"


def test_a_restore_of_a_damaged_archive_reports_fetched_then_fails(uow, clock, admin, running, runtime, archives):
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    archives.damaged.add((done.destination, backups.archive_key(running.customer_id, running.id, done.id)))
    backups.restore_backup(uow, clock, admin, running.id, done.id)
    uow.published.clear()
    ended = backups.run(uow, clock, runtime, archives, backups.claim_next(uow, clock))
    assert ended.restore_status == "failed"
    restore = [e.data for e in uow.published if e.type == "backup.progress" and e.data["operation"] == "restore"]
    assert [d["step"] for d in restore if d["step"]] == ["fetched"] and restore[-1]["status"] == "failed"


def test_interrupted_backups_fail_and_restores_run_again(uow, clock, admin, running, runtime, archives):
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock, owner="wkr_x")[1])
    backups.restore_backup(uow, clock, admin, running.id, done.id)
    backups.claim_next(uow, clock, owner="wkr_gone")  # the restore
    service = running  # and a second backup, left running by the same stopped worker:
    stuck = replace(done, id="bkp_stuck", status="pending", restore_status=None, created_at=clock.now())
    with uow:
        uow.backups.add(stuck)
        uow.commit()
    leases.beat(uow, clock, "wkr_live")
    backups.claim_next(uow, clock, owner="wkr_gone")
    touched = backups.recover_interrupted(uow, clock, archives)
    assert set(touched) == {done.id, "bkp_stuck"}
    assert backups.archive_key(running.customer_id, running.id, "bkp_stuck") in archives.removed
    assert backups.get_backup(uow, admin, service.id, "bkp_stuck").error == backups.INTERRUPTED
    assert backups.get_backup(uow, admin, service.id, done.id).restore_status == "pending"
    assert backups.recover_interrupted(uow, clock, archives) == []


def test_deleting_a_service_takes_its_backups(uow, clock, admin, running, runtime, archives):
    _backup(uow, clock, admin, running)
    services.delete_service(uow, runtime, admin, running.id)
    backups.forget_service(archives, running)
    with uow:
        assert uow.backups.busy_for_service(running.id) is None
    assert archives.removed == [f"{running.customer_id}/{running.id}/"]


def test_the_health_check_leaves_a_service_being_restored_alone(uow, clock, admin, running, runtime, archives):
    """A restore stops the service's containers while its status stays ``running``: the
    health check must not take that for a sick service (the restore holds an operation
    lease, beaten as it goes, and ends it)."""
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    backups.restore_backup(uow, clock, admin, running.id, done.id)
    checks = []
    import_volume = runtime.import_volume

    part_chunks = archives.part_chunks

    def in_pieces(*member):  # a volume of several chunks
        data = b"".join(part_chunks(*member))
        yield from (data[i:i + 4] for i in range(0, len(data), 4))

    def slow_import(name, chunks):  # the containers are stopped now; the monitor runs meanwhile
        def slowly():  # one volume streaming in for several times as long as a lease counts
            for chunk in chunks:
                yield chunk
                clock.advance(leases.OPERATION_S / 2)
                checks.append(deploys.check_health(uow, clock, runtime))

        import_volume(name, slowly())

    archives.part_chunks = in_pieces

    runtime.import_volume = slow_import
    backups.run(uow, clock, runtime, archives, backups.claim_next(uow, clock))
    assert len(checks) > 4 and set(checks) == {0}
    assert backups.get_backup(uow, admin, running.id, done.id).restore_status == "completed"
    after = services.get_service(uow, admin, running.id)
    assert after.status == "running" and after.health_failures == 0
    with uow.reading():
        assert leases.operating(uow, clock, [running.id]) == set()  # the lease went with the restore


def test_a_backup_goes_to_the_named_or_default_destination(uow, clock, admin, running, runtime, archives):
    from core.errors import Invalid

    default = backups.create_backup(uow, clock, admin, running.id, parse, archives=archives)
    assert default.destination == "local" and default.kind == "volumes"
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    assert ("local", backups.archive_key(running.customer_id, running.id, done.id)) in archives.stored
    with pytest.raises(Invalid) as refused:
        backups.create_backup(uow, clock, admin, running.id, parse, archives=archives, destination="nowhere")
    assert "destination" in refused.value.fields
    offsite = backups.create_backup(uow, clock, admin, running.id, parse, archives=archives, destination="offsite")
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    assert done.destination == "offsite" == offsite.destination
    assert ("offsite", backups.archive_key(running.customer_id, running.id, done.id)) in archives.stored


def test_verification_sets_verified_at_or_fails_the_backup(uow, clock, admin, running, runtime, archives):
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    queued = backups.verify_backup(uow, clock, admin, running.id, done.id)
    assert queued.verify_status == "pending"
    with pytest.raises(Conflict, match="being verified"):
        backups.verify_backup(uow, clock, admin, running.id, done.id)
    kind, claimed = backups.claim_next(uow, clock)
    assert kind == "verify"
    backups.run(uow, clock, runtime, archives, (kind, claimed))
    ok = backups.get_backup(uow, admin, running.id, done.id)
    assert (ok.status, ok.verify_status, ok.verified_at, ok.verify_error) == ("completed", "completed", clock.now(),
                                                                              None)
    verifying = [(e.data["status"], e.data["progress"]) for e in uow.published
                 if e.type == "backup.progress" and e.data["operation"] == "verify"]
    assert verifying == [("pending", 0), ("running", 0), ("completed", 100)]
    checked = []
    backups.verify_backup(uow, clock, admin, running.id, done.id)
    backups.run(uow, clock, runtime, archives, backups.claim_next(uow, clock),
                engine_check=lambda *args: checked.append(args[2]) or (_ for _ in ()).throw(RuntimeError("no rows")))
    failed = backups.get_backup(uow, admin, running.id, done.id)
    assert checked and (failed.status, failed.verify_status) == ("failed", "failed")
    assert failed.verify_error == "no rows" and "verification failed: no rows" in failed.error
    with pytest.raises(Conflict, match="only a completed backup"):
        backups.verify_backup(uow, clock, admin, running.id, done.id)


def test_a_restore_into_a_deleted_service_is_not_queued_again_nor_run(uow, clock, admin, running, runtime, archives):
    """Left running by a stopped process, a restore whose new service was deleted meanwhile
    ends ``failed`` (``service deleted``) at start-up instead of running again; claimed
    anyway (queued before the delete), it ends so too and touches nothing."""
    _backup(uow, clock, admin, running)
    done = backups.run_backup(uow, clock, runtime, archives, backups.claim_next(uow, clock, owner="wkr_x")[1])
    backups.restore_backup(uow, clock, admin, running.id, done.id)
    _, claimed = backups.claim_next(uow, clock, owner="wkr_gone")
    with uow:
        uow.backups.update(replace(claimed, restore_service_id="svc_deleted"))
        uow.commit()
    assert backups.recover_interrupted(uow, clock, archives) == [done.id]
    ended = backups.get_backup(uow, admin, running.id, done.id)
    assert (ended.restore_status, ended.restore_error) == ("failed", "service deleted")
    assert backups.claim_next(uow, clock) is None

    queued = replace(ended, restore_status="pending", restore_error=None)
    with uow:
        uow.backups.update(queued)
        uow.commit()
    calls = len(runtime.calls)
    ran = backups.run_restore(uow, clock, runtime, archives, backups.claim_next(uow, clock)[1])
    assert (ran.restore_status, ran.restore_error) == ("failed", "service deleted")
    assert [c[0] for c in runtime.calls[calls:]] == []  # nothing stopped nor imported
