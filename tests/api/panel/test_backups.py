"""Service backups without a working engine: every refusal (401, 403, 404, 409, 400)
held to the contract, pagination, progress events, the jobs' bookkeeping (a job a
restart interrupted is never left running), and what a service's deletion takes along.

Jobs run here on a real runtime plugin pointed at a socket where no engine listens, so
backups end ``failed`` through the real code path; successful backups and restores are
exercised against Podman in ``tests/integration/test_backups_engine.py``."""
from __future__ import annotations

import asyncio
import os
from dataclasses import replace

from tests.support.engine import engine_settings
import pytest

from app.panel.event_bus import InProcessBus
from app.pluginmanager import make_plugin_manager, runtimes
from core.panel import backups, deploys, access, customers
from core.errors import NotFound
from core.panel.compose import parse_compose
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeResolver

#: the deploy times core used to default to (it takes them from the caller now)
DEPLOY_TIMES = DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0)

WITH_VOLUME = "services:\n  app:\n    image: localhost/busybox:latest\n    volumes: ['data:/data']\nvolumes:\n  data: {}\n"
WITHOUT_VOLUME = "services:\n  app: {image: localhost/busybox:latest}\n"


@pytest.fixture
def dead_engine():
    """A real runtime plugin whose engine is not there: every engine call fails."""
    return runtimes(make_plugin_manager())["podman"].create(engine_settings("unix:///nonexistent/slipway-test.sock"))


class Setup:
    def __init__(self, client, store, clock, archives, dead_engine):
        self.client, self.store, self.clock, self.archives, self.dead = client, store, clock, archives, dead_engine
        self.acme = customers.create_customer(store.uow(), clock, name="Acme")
        self.other = customers.create_customer(store.uow(), clock, name="Other")
        self.admin = self.key("admin")
        self.customer_of = {}  # service id -> customer id

    def path(self, service_id, backup_id):
        """Where the ``local`` destination keeps a backup's archive."""
        key = backups.archive_key(self.customer_of[service_id], service_id, backup_id)
        return self.archives.destination("local").path(key)

    def key(self, role, **kw):
        return access.create_api_key(self.store.uow(), self.clock, name=role, role=role, rate_limit_rpm=10000,
                                           **kw)[1]

    def service(self, name, compose=WITH_VOLUME, customer=None, settle=True):
        """A service whose deploy job ran (and failed: no engine), so it is not deploying."""
        created = self.client.post("/api/services", token=self.admin, expect=201, json_body={
            "name": name, "customer_id": (customer or self.acme).id, "deploy_method": "compose", "compose": compose}).json
        self.customer_of[created["id"]] = (customer or self.acme).id
        if settle:
            job = deploys.claim_next(self.store.uow(), self.clock)
            run_job(self.store.uow(), Deployer(self.clock, self.dead, DEPLOY_TIMES, resolver=FakeResolver()), job)
        return created["id"]

    def backups(self, service_id):
        return f"/api/services/{service_id}/backups"

    def run_next(self):
        claimed = backups.claim_next(self.store.uow(), self.clock)
        assert claimed is not None
        backups.run(self.store.uow(), self.clock, self.dead, self.archives, claimed)
        return claimed

    def failed_backup(self, service_id):
        created = self.client.post(self.backups(service_id), token=self.admin, expect=202).json
        self.run_next()
        return created["id"]

    def complete(self, backup_id):
        """Mark a backup completed in the database, as a finished job would (no engine here)."""
        with self.store.uow() as uow:
            backup = uow.backups.get(backup_id)
            uow.backups.update(replace(backup, status="completed", progress=100, error=None, sha256="0" * 64,
                                       completed_at=self.clock.now()))
            uow.commit()


@pytest.fixture
def setup(make_app, store, clock, tmp_path, dead_engine):
    from tests.support.contract_client import ContractClient

    app = make_app(backup_dir=str(tmp_path / "backups"))
    return Setup(ContractClient(app), store, clock, app.parts.backup_archives, dead_engine)


def test_create_queues_a_pending_backup_and_a_failed_job_says_why(setup, store):
    s = setup
    service_id = s.service("site")
    created = s.client.post(s.backups(service_id), token=s.admin, expect=202).json
    assert created["id"].startswith("bkp_") and created["service_id"] == service_id
    assert (created["status"], created["progress"], created["size_bytes"], created["sha256"]) == ("pending", 0, 0, None)
    assert created["volumes"] == ["data"] and created["completed_at"] is None and created["restore"] is None
    assert s.client.get(f"{s.backups(service_id)}/{created['id']}", token=s.admin, expect=200).json == created
    assert s.run_next()[0] == "backup"
    failed = s.client.get(f"{s.backups(service_id)}/{created['id']}", token=s.admin, expect=200).json
    assert failed["status"] == "failed" and "exporting volume slw-" in failed["error"] and failed["completed_at"] is None
    assert not os.path.exists(s.path(service_id, created["id"]))
    assert not os.path.exists(s.path(service_id, created["id"]) + ".part")
    assert backups.claim_next(store.uow(), s.clock) is None  # nothing else queued


def test_list_paginates_newest_first_and_filters(setup):
    s = setup
    service_id = s.service("site")
    ids = []
    for _ in range(3):
        s.clock.advance(1)
        ids.append(s.failed_backup(service_id))
    s.clock.advance(1)
    pending = s.client.post(s.backups(service_id), token=s.admin, expect=202).json["id"]
    listed = s.client.get(s.backups(service_id), token=s.admin, expect=200).json
    assert [b["id"] for b in listed["data"]] == [pending] + ids[::-1]
    assert (listed["total"], listed["page"], listed["per_page"]) == (4, 1, 20)
    second = s.client.get(s.backups(service_id), token=s.admin, params={"page": "2", "per_page": "3"}, expect=200).json
    assert [b["id"] for b in second["data"]] == [ids[0]] and second["total"] == 4
    past = s.client.get(s.backups(service_id), token=s.admin, params={"page": "9"}, expect=200).json
    assert past["data"] == [] and past["total"] == 4
    failed = s.client.get(s.backups(service_id), token=s.admin, params={"status": "failed"}, expect=200).json
    assert [b["id"] for b in failed["data"]] == ids[::-1] and failed["total"] == 3
    other = s.service("other")
    assert s.client.get(s.backups(other), token=s.admin, expect=200).json["total"] == 0


@pytest.mark.parametrize("params", [{"page": "0"}, {"page": "x"}, {"per_page": "101"}, {"per_page": "0"},
                                    {"status": "done"}])
def test_bad_query_parameters_are_400(setup, params):
    s = setup
    service_id = s.service("site")
    result = s.client.get(s.backups(service_id), token=s.admin, params=params, expect=400)
    assert result.json["error"]["code"] == "bad_request"


def test_unauthenticated_requests_are_401(setup):
    s = setup
    service_id = s.service("site")
    backup_id = s.failed_backup(service_id)
    base = s.backups(service_id)
    for method, path in (("GET", base), ("POST", base), ("GET", f"{base}/{backup_id}"),
                         ("DELETE", f"{base}/{backup_id}"), ("POST", f"{base}/{backup_id}/restore"),
                         ("POST", f"{base}/{backup_id}/verify")):
        for token in (None, "slw_0000000000000000_" + "x" * 43):
            result = s.client.request(method, path, token=token, expect=401)
            assert result.json["error"]["code"] == "unauthorized"
    assert s.client.get(f"{base}/{backup_id}", token=s.admin, expect=200).json["status"] == "failed"  # untouched


def test_roles_and_denied_permissions_are_403(setup):
    """Only ``admin`` has backups:read and backups:write (docs/decisions.md's roles); a key
    that denies one of them is refused the operations that need it."""
    s = setup
    service_id = s.service("site")
    backup_id = s.failed_backup(service_id)
    base = s.backups(service_id)
    reads = (("GET", base), ("GET", f"{base}/{backup_id}"))
    writes = (("POST", base), ("DELETE", f"{base}/{backup_id}"), ("POST", f"{base}/{backup_id}/restore"),
              ("POST", f"{base}/{backup_id}/verify"))
    for token in (s.key("customer", customer_id=s.acme.id), s.key("viewer")):
        for method, path in reads + writes:
            result = s.client.request(method, path, token=token, expect=403)
            assert result.json["error"]["code"] == "forbidden"
    no_write = s.key("admin", denied_permissions=["backups:write"])
    for method, path in writes:
        assert "backups:write" in s.client.request(method, path, token=no_write, expect=403).json["error"]["message"]
    for method, path in reads:
        s.client.request(method, path, token=no_write, expect=200)
    no_read = s.key("admin", denied_permissions=["backups:read"])
    for method, path in reads:
        assert "backups:read" in s.client.request(method, path, token=no_read, expect=403).json["error"]["message"]
    assert s.client.get(base, token=s.admin, expect=200).json["total"] == 1  # nothing was created or deleted


def test_unknown_services_and_backups_are_404(setup):
    s = setup
    service_id = s.service("site")
    other_id = s.service("other")
    backup_id = s.failed_backup(service_id)
    for method, path in (("GET", s.backups("svc_nope")), ("POST", s.backups("svc_nope")),
                         ("GET", f"{s.backups('svc_nope')}/{backup_id}"),
                         ("DELETE", f"{s.backups('svc_nope')}/{backup_id}"),
                         ("POST", f"{s.backups('svc_nope')}/{backup_id}/restore"),
                         ("POST", f"{s.backups('svc_nope')}/{backup_id}/verify")):
        assert "svc_nope" in s.client.request(method, path, token=s.admin, expect=404).json["error"]["message"]
    for service, backup in ((service_id, "bkp_nope"), (other_id, backup_id)):  # the backup of another service too
        base = f"{s.backups(service)}/{backup}"
        for method, path in (("GET", base), ("DELETE", base), ("POST", f"{base}/restore"), ("POST", f"{base}/verify")):
            result = s.client.request(method, path, token=s.admin, expect=404)
            assert result.json["error"]["code"] == "not_found" and backup in result.json["error"]["message"]
    s.client.get(f"{s.backups(service_id)}/{backup_id}", token=s.admin, expect=200)


def test_conflicts_are_409(setup, store):
    s = setup
    bare = s.service("bare", compose=WITHOUT_VOLUME)
    assert "no volumes" in s.client.post(s.backups(bare), token=s.admin, expect=409).json["error"]["message"]
    service_id = s.service("site")
    deploying = s.service("deploying", settle=False)  # its deploy job stays queued
    assert "deploying" in s.client.post(s.backups(deploying), token=s.admin, expect=409).json["error"]["message"]

    base = s.backups(service_id)
    failed = s.failed_backup(service_id)
    pending = s.client.post(base, token=s.admin, expect=202).json["id"]
    # another backup while one is queued, then while it runs
    assert s.client.post(base, token=s.admin, expect=409).json["error"]["code"] == "conflict"
    for backup_id in (pending, failed):  # only a completed backup can be restored or verified
        for action in ("restore", "verify"):
            message = s.client.post(f"{base}/{backup_id}/{action}", token=s.admin, expect=409).json["error"]["message"]
            assert "only a completed backup" in message
    s.client.delete(f"{base}/{pending}", token=s.admin, expect=409)  # pending
    claimed = backups.claim_next(store.uow(), s.clock)
    assert claimed[1].id == pending and claimed[1].status == "running"
    s.client.post(base, token=s.admin, expect=409)
    s.client.delete(f"{base}/{pending}", token=s.admin, expect=409)  # running
    backups.run(store.uow(), s.clock, s.dead, s.archives, claimed)

    s.complete(pending)
    restore = s.client.post(f"{base}/{pending}/restore", token=s.admin, expect=202).json
    assert restore["status"] == "completed" and restore["restore"]["status"] == "pending"
    assert restore["restore"]["requested_at"] and restore["restore"]["completed_at"] is None
    # while a restore is queued: no backup, no other restore, no delete of that backup
    s.client.post(base, token=s.admin, expect=409)
    s.client.post(f"{base}/{pending}/restore", token=s.admin, expect=409)
    assert "being restored" in s.client.post(f"{base}/{pending}/verify", token=s.admin, expect=409).json["error"]["message"]
    assert "being restored" in s.client.delete(f"{base}/{pending}", token=s.admin, expect=409).json["error"]["message"]
    s.client.delete(f"{base}/{failed}", token=s.admin, expect=204)  # another, finished backup may go


def test_delete_removes_the_row_and_the_archive(setup):
    s = setup
    service_id = s.service("site")
    backup_id = s.failed_backup(service_id)
    path = s.path(service_id, backup_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:  # as if an archive had been written
        f.write(b"archive")
    s.client.delete(f"{s.backups(service_id)}/{backup_id}", token=s.admin, expect=204)
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    s.client.get(f"{s.backups(service_id)}/{backup_id}", token=s.admin, expect=404)
    s.client.delete(f"{s.backups(service_id)}/{backup_id}", token=s.admin, expect=404)
    assert s.client.get(s.backups(service_id), token=s.admin, expect=200).json["total"] == 0


def test_a_restore_that_cannot_reach_its_archive_fails_and_touches_nothing(setup, store):
    s = setup
    service_id = s.service("site")
    backup_id = s.failed_backup(service_id)
    s.complete(backup_id)  # completed, but no archive on disk
    s.client.post(f"{s.backups(service_id)}/{backup_id}/restore", token=s.admin, expect=202)
    assert s.run_next()[0] == "restore"
    got = s.client.get(f"{s.backups(service_id)}/{backup_id}", token=s.admin, expect=200).json
    assert got["status"] == "completed" and got["restore"]["status"] == "failed"
    assert "missing" in got["restore"]["error"] and got["restore"]["completed_at"]
    s.client.post(f"{s.backups(service_id)}/{backup_id}/restore", token=s.admin, expect=202)  # may be tried again


def test_jobs_interrupted_by_a_restart_are_not_left_running(setup, store):
    """The process dies while a backup and a restore run; the next one's start-up fails
    the backup (its partial archive removed) and runs the restore again."""
    s = setup
    first, second = s.service("first"), s.service("second")
    done = s.failed_backup(second)
    s.complete(done)
    interrupted = s.client.post(s.backups(first), token=s.admin, expect=202).json["id"]
    s.clock.advance(1)
    s.client.post(f"{s.backups(second)}/{done}/restore", token=s.admin, expect=202)
    assert backups.claim_next(store.uow(), s.clock)[1].id == interrupted  # oldest first
    kind, restoring = backups.claim_next(store.uow(), s.clock)
    assert (kind, restoring.id, restoring.restore_status) == ("restore", done, "running")
    with store.uow() as uow:  # the restore had recorded which containers to start again
        uow.backups.update(replace(restoring, restore_containers=("slw-second-app",), restore_progress=40))
        uow.commit()
    part = s.path(first, interrupted) + ".part"
    os.makedirs(os.path.dirname(part), exist_ok=True)
    with open(part, "wb") as f:
        f.write(b"half an archive")

    # the process dies here; the next one starts:
    assert sorted(backups.recover_interrupted(store.uow(), s.clock, s.archives)) == sorted([interrupted, done])
    got = s.client.get(f"{s.backups(first)}/{interrupted}", token=s.admin, expect=200).json
    assert got["status"] == "failed" and got["error"] == backups.INTERRUPTED
    assert not os.path.exists(part)
    got = s.client.get(f"{s.backups(second)}/{done}", token=s.admin, expect=200).json
    assert got["status"] == "completed" and got["restore"]["status"] == "pending"
    with store.uow() as uow:
        assert uow.backups.in_state("running") == [] and uow.backups.in_restore_state("running") == []
        assert uow.backups.get(done).restore_containers == ("slw-second-app",)  # kept for the re-run
    kind, again = backups.claim_next(store.uow(), s.clock)
    assert (kind, again.id) == ("restore", done)
    assert backups.recover_interrupted(store.uow(), s.clock, s.archives) == [done]  # idempotent bookkeeping
    s.client.post(s.backups(first), token=s.admin, expect=202)  # the failed one no longer blocks the service


def test_progress_events_follow_the_job(setup, store):
    s = setup
    service_id = s.service("site")

    async def scenario():
        bus = InProcessBus()
        store.bus = bus
        seen = []
        bus.subscribe(seen.append)
        created = await asyncio.to_thread(
            lambda: s.client.post(s.backups(service_id), token=s.admin, expect=202).json)
        await asyncio.to_thread(s.run_next)
        await asyncio.sleep(0)
        return created, seen

    try:
        created, seen = asyncio.run(scenario())
    finally:
        store.bus = None
    events = [e for e in seen if e.type == "backup.progress"]
    assert [e.data for e in events] == [
        {"service_id": service_id, "backup_id": created["id"], "progress": 0, "status": status, "operation": "backup",
         "step": None, "part": None}
        for status in ("pending", "running", "failed")]
    assert {(e.service_id, e.customer_id) for e in events} == {(service_id, s.acme.id)}


def test_deleting_a_service_takes_its_backups_along(setup, store):
    s = setup
    service_id, kept = s.service("site"), s.service("kept")
    gone, stays = s.failed_backup(service_id), s.failed_backup(kept)
    for sid, bid in ((service_id, gone), (kept, stays)):
        path = s.path(sid, bid)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"archive")
    with store.uow() as uow:  # the row goes as core.panel.services.delete_service removes it
        gone_service = uow.services.get(service_id)
        uow.services.delete(service_id)
        uow.commit()
    backups.forget_service(s.archives, gone_service)  # what the delete handler calls afterwards
    with store.uow() as uow:
        assert uow.backups.get(gone) is None and uow.backups.get(stays) is not None
    assert not os.path.exists(os.path.dirname(s.path(service_id, gone)))
    assert os.path.exists(s.path(kept, stays))


def test_use_cases_scope_a_customer_to_its_own_services(setup, store):
    """No role but admin holds backups:* today; a key that did would see its own
    customer's services only (others are 404), as with every services operation."""
    s = setup
    mine, theirs = s.service("mine"), s.service("theirs", customer=s.other)
    backup_id = s.failed_backup(theirs)
    key = access.ApiKey(id="0" * 16, name="c", role="customer", secret_hash="", rate_limit_rpm=1,
                              created_at=s.clock.now(), customer_id=s.acme.id)
    principal = access.Principal(key=key, permissions=frozenset({"backups:read", "backups:write"}))
    assert backups.list_backups(store.uow(), principal, mine, page=1, per_page=20) == ([], 0)
    with pytest.raises(NotFound):
        backups.list_backups(store.uow(), principal, theirs, page=1, per_page=20)
    with pytest.raises(NotFound):
        backups.get_backup(store.uow(), principal, theirs, backup_id)
    with pytest.raises(NotFound):
        backups.create_backup(store.uow(), s.clock, principal, theirs, parse_compose)
    with pytest.raises(NotFound):
        backups.delete_backup(store.uow(), s.archives, principal, theirs, backup_id)
    with pytest.raises(NotFound):
        backups.verify_backup(store.uow(), s.clock, principal, theirs, backup_id)
    with pytest.raises(NotFound):
        backups.restore_backup(store.uow(), s.clock, principal, theirs, backup_id)
    assert backups.create_backup(store.uow(), s.clock, principal, mine, parse_compose).status == "pending"


def test_a_live_workers_backup_is_not_taken_from_it(setup, store):
    """With several processes, recovery leaves alone the jobs of a worker whose lease is
    fresh, and settles them once it has gone stale."""
    from core.panel import leases

    s = setup
    service_id = s.service("busy")
    backup_id = s.client.post(s.backups(service_id), token=s.admin, expect=202).json["id"]
    owner = leases.new_worker_id()
    leases.beat(store.uow(), s.clock, owner)
    assert backups.claim_next(store.uow(), s.clock, owner)[1].id == backup_id
    assert backups.recover_interrupted(store.uow(), s.clock, s.archives) == []
    s.clock.advance(leases.STALE_S + 1)
    assert backups.recover_interrupted(store.uow(), s.clock, s.archives) == [backup_id]


def test_backups_and_restores_are_on_the_timeline_and_the_detail_names_the_volumes(setup):
    """The service's events say when a backup or restore was asked for and how it ended
    (with the reason); the detail's ``volumes`` says whether there is anything to back up."""
    s = setup
    service_id = s.service("site")
    bare = s.service("bare", compose=WITHOUT_VOLUME)
    assert s.client.get(f"/api/services/{service_id}", token=s.admin, expect=200).json["volumes"] == ["data"]
    assert s.client.get(f"/api/services/{bare}", token=s.admin, expect=200).json["volumes"] == []

    def timeline():
        events = s.client.get(f"/api/services/{service_id}/events", token=s.admin, expect=200).json["data"]
        return [(e["type"], e["status"], e["message"]) for e in events if e["type"] in ("backup", "restore")]

    backup_id = s.failed_backup(service_id)
    (failed, started) = timeline()
    assert started[:2] == ("backup", "started") and backup_id in started[2] and "data" in started[2]
    assert failed[:2] == ("backup", "failed") and f"backup {backup_id} failed: exporting volume slw-" in failed[2]
    s.complete(backup_id)
    s.client.post(f"{s.backups(service_id)}/{backup_id}/restore", token=s.admin, expect=202)
    assert timeline()[0][:2] == ("restore", "started")
    s.run_next()
    ended = timeline()[0]
    assert ended[:2] == ("restore", "failed") and "missing" in ended[2] and backup_id in ended[2]


def test_a_restore_into_a_new_service_creates_it_with_the_restore_queued(setup, store):
    """``{"target": "new", "name"}``: a new service of the same customer with the same
    compose and variables, deploying, and the restore queued into it (202 with its id in
    ``restored_service_id``); bad targets and names are 422, a taken name 409, and no
    service is made by a refused request. The restore waits for the new service's deploy;
    a deploy that fails fails the restore, with the reason."""
    s = setup
    service_id = s.service("site")
    base = s.backups(service_id)
    failed = s.failed_backup(service_id)
    s.clock.advance(1)
    done = s.failed_backup(service_id)
    s.complete(done)
    key = backups.archive_key(s.customer_of[service_id], service_id, done)
    _, sha = s.archives.write("local", key, {}, [("data", "volumes", iter([b"not a tar"]))])
    with store.uow() as uow:  # an archive there, so the restore gets as far as the new service
        uow.backups.update(replace(uow.backups.get(done), sha256=sha))
        uow.commit()
    restore = f"{base}/{done}/restore"
    for body, field in (({"target": "elsewhere"}, "target"), ({"target": "new"}, "name"),
                        ({"target": "new", "name": "Not A Name"}, "name"), ({"target": "new", "name": 7}, "name")):
        result = s.client.post(restore, token=s.admin, json_body=body, expect=422).json
        assert result["error"]["code"] == "validation_error" and field in result["error"]["fields"], result
    assert "already exists" in s.client.post(restore, token=s.admin, json_body={"target": "new", "name": "site"},
                                             expect=409).json["error"]["message"]
    assert "only a completed backup" in s.client.post(f"{base}/{failed}/restore", token=s.admin, expect=409,
                                                      json_body={"target": "new", "name": "copy"}).json["error"]["message"]
    no_deploy = s.key("admin", denied_permissions=["services:deploy"])
    s.client.post(restore, token=no_deploy, json_body={"target": "new", "name": "copy"}, expect=403)
    assert s.client.get("/api/services", token=s.admin, expect=200).json["total"] == 1  # nothing made

    accepted = s.client.post(restore, token=s.admin, json_body={"target": "new", "name": "copy"}, expect=202).json
    new_id = accepted["restored_service_id"]
    assert new_id.startswith("svc_") and new_id != service_id and accepted["restore"]["status"] == "pending"
    new = s.client.get(f"/api/services/{new_id}", token=s.admin, expect=200).json
    source = s.client.get(f"/api/services/{service_id}", token=s.admin, expect=200).json
    assert (new["name"], new["customer_id"], new["compose"], new["status"]) == (
        "copy", source["customer_id"], source["compose"], "deploying")
    assert s.client.get(f"{base}/{done}", token=s.admin, expect=200).json["restored_service_id"] == new_id
    s.client.post(restore, token=s.admin, json_body={"target": "new", "name": "copy2"}, expect=409)  # one at a time
    events = s.client.get(f"/api/services/{new_id}/events", token=s.admin, expect=200).json["data"]
    assert any(e["type"] == "restore" and done in e["message"] for e in events)

    job = deploys.claim_next(store.uow(), s.clock)  # the new service's deploy fails: no engine
    run_job(store.uow(), Deployer(s.clock, s.dead, DEPLOY_TIMES, resolver=FakeResolver()), job)
    s.run_next()
    ended = s.client.get(f"{base}/{done}", token=s.admin, expect=200).json
    assert ended["restore"]["status"] == "failed" and "failed to deploy" in ended["restore"]["error"]
    # into the service again: restored_service_id goes back to null
    again = s.client.post(restore, token=s.admin, json_body={"target": "service"}, expect=202).json
    assert again["restored_service_id"] is None


def test_a_backup_names_a_configured_destination_or_is_422(make_app, store, clock, tmp_path, dead_engine):
    """``{"destination": name}`` picks one of the operator's destinations; another name is
    422 on ``destination``, as is a body that is not the contract's; without a body the
    default (``SLIPWAY_BACKUP_DEFAULT``) is used."""
    from tests.support.contract_client import ContractClient

    app = make_app(backup_dir=str(tmp_path / "backups"), backup_default="spare",
                   backup_destinations={"spare": {"kind": "local", "path": str(tmp_path / "spare")}})
    s = Setup(ContractClient(app), store, clock, app.parts.backup_archives, dead_engine)
    service_id = s.service("site")
    base = s.backups(service_id)
    refused = s.client.post(base, token=s.admin, json_body={"destination": "nowhere"}, expect=422).json
    assert "destination" in refused["error"]["fields"] and "nowhere" in refused["error"]["fields"]["destination"]
    for body in ({"destination": ""}, {"destination": 3}, {"where": "local"}):
        refused = s.client.post(base, token=s.admin, json_body=body, expect=422).json
        assert refused["error"]["code"] == "validation_error"
    assert s.client.get(base, token=s.admin, expect=200).json["total"] == 0  # nothing was queued
    default = s.client.post(base, token=s.admin, expect=202).json
    assert (default["destination"], default["kind"], default["checksum_sha256"]) == ("spare", "volumes", None)
    assert (default["verify_status"], default["verified_at"], default["verify_error"]) == (None, None, None)
    s.run_next()
    named = s.client.post(base, token=s.admin, json_body={"destination": "local"}, expect=202).json
    assert named["destination"] == "local"
    events = s.client.get(f"/api/services/{service_id}/events", token=s.admin, expect=200).json["data"]
    assert any("to spare asked for" in e["message"] for e in events)
    s.client.post(s.backups("svc_nope"), token=s.admin, json_body={"destination": "nowhere"}, expect=404)


def test_a_verification_of_a_missing_archive_fails_the_backup(setup, store):
    """Verifying a completed backup whose archive is not at its destination: 202, then
    the backup is ``failed`` with the reason, and the timeline says so."""
    s = setup
    service_id = s.service("site")
    backup_id = s.failed_backup(service_id)
    s.complete(backup_id)
    base = f"{s.backups(service_id)}/{backup_id}"
    queued = s.client.post(f"{base}/verify", token=s.admin, expect=202).json
    assert queued["verify_status"] == "pending" and queued["status"] == "completed"
    assert "being verified" in s.client.post(f"{base}/verify", token=s.admin, expect=409).json["error"]["message"]
    assert "being verified" in s.client.delete(base, token=s.admin, expect=409).json["error"]["message"]
    assert "being verified" in s.client.post(f"{base}/restore", token=s.admin, expect=409).json["error"]["message"]
    assert "being verified" in s.client.post(f"{base}/restore", token=s.admin, expect=409,
                                             json_body={"target": "new", "name": "copy"}).json["error"]["message"]
    assert s.client.get("/api/services", token=s.admin, expect=200).json["total"] == 1  # no new service either
    assert s.run_next()[0] == "verify"
    got = s.client.get(base, token=s.admin, expect=200).json
    assert (got["status"], got["verify_status"], got["verified_at"]) == ("failed", "failed", None)
    assert "missing" in got["verify_error"] and got["error"].startswith("verification failed")
    events = s.client.get(f"/api/services/{service_id}/events", token=s.admin, expect=200).json["data"]
    assert (events[0]["type"], events[0]["status"]) == ("backup", "failed") and "verification" in events[0]["message"]


def test_a_destination_that_fails_keeps_the_backup_on_delete(make_app, store, clock, tmp_path, dead_engine):
    """Deleting a backup removes its archive first: at a destination that cannot be
    reached the answer is 503 and the backup stays, to be deleted later."""
    from tests.support.contract_client import ContractClient
    from tests.support.processes import free_port

    nowhere = {"kind": "s3", "endpoint": f"http://127.0.0.1:{free_port()}", "bucket": "b", "access_key_id": "k",
               "secret_access_key": "s"}
    app = make_app(backup_dir=str(tmp_path / "backups"), backup_destinations={"nowhere": nowhere})
    s = Setup(ContractClient(app), store, clock, app.parts.backup_archives, dead_engine)
    service_id = s.service("site")
    backup_id = s.client.post(s.backups(service_id), token=s.admin, json_body={"destination": "nowhere"},
                              expect=202).json["id"]
    s.run_next()
    s.complete(backup_id)
    path = f"{s.backups(service_id)}/{backup_id}"
    failed = s.client.delete(path, token=s.admin, expect=503).json
    assert "backup destination failed" in failed["error"]["message"] and "nowhere" in failed["error"]["message"]
    assert s.client.get(path, token=s.admin, expect=200).json["status"] == "completed"
