"""A service's scheduled tasks over the panel API (``core.panel.tasks``): create, read,
change, delete, run now, the runs' history; every refusal (422 naming the field, 409, 403,
404) held to the contract; the app's scheduler queuing a due run once as the test's clock
says it is due, and recording a run due while the previous one runs as ``skipped``; the
worker ending a run that cannot run (its component has no running container: nothing
was deployed) ``failed`` with the reason, and a run a stopped process left ``failed``.
Nothing is deployed here: runs on Podman, Docker and Swarm are in
``tests/integration/test_tasks_engine.py``."""
from __future__ import annotations

import pytest

from core.errors import NotFound
from core.panel import access, customers, tasks
from tests.api.panel.test_backups import WITH_VOLUME

TASK = {"name": "nightly migrate", "schedule": "0 3 * * *", "component": "web",
        "command": ["sh", "-c", "echo migrated"], "timeout_s": 60}


class Setup:
    def __init__(self, app, client, store, clock):
        self.app, self.client, self.store, self.clock = app, client, store, clock
        self.acme = customers.create_customer(store.uow(), clock, name="Acme")
        self.other = customers.create_customer(store.uow(), clock, name="Other")
        self.admin = self.key("admin")

    def key(self, role, **kw):
        return access.create_api_key(self.store.uow(), self.clock, name=role, role=role, rate_limit_rpm=10000,
                                     **kw)[1]

    def service(self, name, customer=None):
        return self.client.post("/api/services", token=self.admin, expect=201, json_body={
            "name": name, "customer_id": (customer or self.acme).id, "deploy_method": "compose",
            "compose": WITH_VOLUME}).json["id"]

    def create(self, service_id, body=None, expect=201, token=None):
        return self.client.post(f"/api/services/{service_id}/tasks", token=token or self.admin,
                                json_body=TASK if body is None else body, expect=expect)


@pytest.fixture
def setup(make_app, store, clock, tmp_path):
    from tests.support.contract_client import ContractClient

    app = make_app(backup_dir=str(tmp_path / "backups"))
    return Setup(app, ContractClient(app), store, clock)


def test_create_read_list_change_delete(setup):
    s = setup
    service_id = s.service("site")
    base = f"/api/services/{service_id}/tasks"
    assert s.client.get(base, token=s.admin, expect=200).json == {"data": [], "total": 0, "page": 1, "per_page": 20}
    made = s.create(service_id).json
    assert made["id"].startswith("task_") and made["service_id"] == service_id
    assert {k: made[k] for k in TASK} == TASK and made["enabled"] is True and made["last_run"] is None
    assert s.clock.now().isoformat().startswith("2026-11-02T09:00")  # the tests' clock
    assert made["next_run_at"] == "2026-11-03T03:00:00.000000Z"  # 03:00 UTC, the day after
    assert s.client.get(f"{base}/{made['id']}", token=s.admin, expect=200).json == made
    s.clock.advance(1)
    second = s.create(service_id, {**TASK, "name": "hourly", "schedule": "0 * * * *"}).json
    s.clock.advance(1)
    assert second["timeout_s"] == 60
    default = s.create(service_id, {k: v for k, v in TASK.items() if k != "timeout_s"}).json
    assert default["timeout_s"] == 300
    listed = s.client.get(base, token=s.admin, expect=200).json
    assert listed["total"] == 3 and [t["id"] for t in listed["data"]] == [default["id"], second["id"], made["id"]]

    changed = s.client.patch(f"{base}/{made['id']}", token=s.admin, expect=200,
                             json_body={"schedule": "*/10  * * * *", "enabled": False}).json
    assert changed["schedule"] == "*/10 * * * *" and changed["enabled"] is False and changed["next_run_at"] is None
    again = s.client.patch(f"{base}/{made['id']}", token=s.admin, expect=200, json_body={"enabled": True}).json
    assert again["next_run_at"] == "2026-11-02T09:10:00.000000Z"  # (09:00:02 now)
    assert again["created_at"] == made["created_at"]
    s.client.delete(f"{base}/{made['id']}", token=s.admin, expect=204)
    s.client.get(f"{base}/{made['id']}", token=s.admin, expect=404)
    s.client.delete(f"{base}/{made['id']}", token=s.admin, expect=404)
    assert s.client.get(base, token=s.admin, expect=200).json["total"] == 2


@pytest.mark.parametrize("change, field", [
    ({"schedule": "61 * * * *"}, "schedule"),
    ({"schedule": "* * * *"}, "schedule"),
    ({"schedule": "@daily"}, "schedule"),
    ({"name": ""}, "name"),
    ({"name": "   "}, "name"),
    ({"name": "x" * 101}, "name"),
    ({"name": "bad\nname"}, "name"),
    ({"component": ""}, "component"),
    ({"component": "../etc"}, "component"),
    ({"component": "-web"}, "component"),
    ({"command": []}, "command"),
    ({"command": "echo hi"}, "command"),
    ({"command": [1, 2]}, "command"),
    ({"command": [""]}, "command"),
    ({"command": ["echo", "a\u0000b"]}, "command"),
    ({"command": ["x"] * 65}, "command"),
    ({"command": ["echo", "y" * 16000, "z" * 1000]}, "command"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"timeout_s": 3601}, "timeout_s"),
    ({"timeout_s": "60"}, "timeout_s"),
    ({"timeout_s": True}, "timeout_s"),
    ({"enabled": "yes"}, "enabled"),
    ({"every": "day"}, "every"),
])
def test_a_bad_field_is_422_naming_it_and_stores_nothing(setup, change, field):
    s = setup
    service_id = s.service("site")
    refused = s.create(service_id, {**TASK, **change}, expect=422).json["error"]
    assert refused["code"] == "validation_error"
    assert any(field in name or field in problem for name, problem in refused["fields"].items()), refused
    made = s.create(service_id).json
    patched = s.client.patch(f"/api/services/{service_id}/tasks/{made['id']}", token=s.admin, json_body=change,
                             expect=422).json["error"]
    assert any(field in name or field in problem for name, problem in patched["fields"].items()), patched
    listed = s.client.get(f"/api/services/{service_id}/tasks", token=s.admin, expect=200).json
    assert listed["total"] == 1 and {k: listed["data"][0][k] for k in TASK} == TASK  # unchanged


def test_missing_fields_and_a_body_that_is_not_an_object_are_422(setup):
    s = setup
    service_id = s.service("site")
    for name in ("name", "schedule", "component", "command"):
        body = {k: v for k, v in TASK.items() if k != name}
        assert name in s.create(service_id, body, expect=422).json["error"]["fields"]
    for body in ([], "x", 3):
        assert s.create(service_id, body, expect=422).json["error"]["code"] == "validation_error"
    assert s.client.get(f"/api/services/{service_id}/tasks", token=s.admin, expect=200).json["total"] == 0


def test_a_service_has_at_most_twenty_tasks(setup):
    s = setup
    service_id = s.service("site")
    for n in range(tasks.MAX_TASKS):
        s.create(service_id, {**TASK, "name": f"t{n}"})
    refused = s.create(service_id, {**TASK, "name": "one more"}, expect=409).json["error"]
    assert refused["code"] == "conflict" and "20" in refused["message"]
    assert s.client.get(f"/api/services/{service_id}/tasks", token=s.admin, expect=200).json["total"] == 20
    other = s.service("other-site")
    s.create(other)  # another service's count is its own


def test_roles_without_the_permissions_are_403(setup):
    s = setup
    service_id = s.service("site")
    made = s.create(service_id).json
    base = f"/api/services/{service_id}/tasks"
    viewer = s.key("viewer")
    assert s.client.get(base, token=viewer, expect=200).json["total"] == 1  # reading needs services:read
    s.client.get(f"{base}/{made['id']}/runs", token=viewer, expect=200)
    for token in (viewer, s.key("admin", denied_permissions=["services:operate"])):
        assert "services:operate" in s.create(service_id, token=token, expect=403).json["error"]["message"]
        s.client.patch(f"{base}/{made['id']}", token=token, json_body={"enabled": False}, expect=403)
        s.client.post(f"{base}/{made['id']}/run", token=token, expect=403)
        s.client.delete(f"{base}/{made['id']}", token=token, expect=403)
    no_read = s.key("admin", denied_permissions=["services:read"])
    s.client.get(base, token=no_read, expect=403)
    s.client.get(f"{base}/{made['id']}", token=no_read, expect=403)
    task = s.client.get(f"{base}/{made['id']}", token=s.admin, expect=200).json
    assert task["enabled"] is True and task["last_run"] is None  # untouched


def test_unknown_services_tasks_and_other_customers_services_are_404(setup, store):
    s = setup
    mine = s.service("mine")
    theirs = s.service("theirs", customer=s.other)
    their_task = s.create(theirs).json["id"]
    acme_key = s.key("customer", customer_id=s.acme.id)
    for service_id, task_id, token in (("svc_nope", "task_nope", s.admin), (theirs, their_task, acme_key),
                                       (mine, their_task, s.admin), (mine, "task_nope", s.admin)):
        base = f"/api/services/{service_id}/tasks"
        s.client.get(f"{base}/{task_id}", token=token, expect=404)
        s.client.patch(f"{base}/{task_id}", token=token, json_body={"enabled": False}, expect=404)
        s.client.get(f"{base}/{task_id}/runs", token=token, expect=404)
        s.client.post(f"{base}/{task_id}/run", token=token, expect=404)
        s.client.delete(f"{base}/{task_id}", token=token, expect=404)
    s.client.get(f"/api/services/{theirs}/tasks", token=acme_key, expect=404)
    s.create(theirs, token=acme_key, expect=404)
    assert s.client.get(f"/api/services/{theirs}/tasks/{their_task}", token=s.admin, expect=200).json["enabled"]
    key = access.ApiKey(id="0" * 16, name="c", role="customer", secret_hash="", rate_limit_rpm=1,
                        created_at=s.clock.now(), customer_id=s.acme.id)
    principal = access.Principal(key=key, permissions=frozenset({"services:read", "services:operate"}))
    for call in (lambda: tasks.get_task(store.uow(), principal, theirs, their_task),
                 lambda: tasks.list_runs(store.uow(), principal, theirs, their_task, page=1, per_page=20),
                 lambda: tasks.run_now(store.uow(), s.clock, principal, theirs, their_task),
                 lambda: tasks.delete_task(store.uow(), principal, theirs, their_task)):
        with pytest.raises(NotFound):
            call()


def test_run_now_is_202_then_409_while_it_runs_and_the_worker_ends_it_with_the_engines_reason(setup):
    s = setup
    service_id = s.service("site")
    made = s.create(service_id).json
    base = f"/api/services/{service_id}/tasks/{made['id']}"
    run = s.client.post(f"{base}/run", token=s.admin, expect=202).json
    assert run["status"] == "running" and run["started_at"] is None and run["trigger"] == "manual"
    assert "running" in s.client.post(f"{base}/run", token=s.admin, expect=409).json["error"]["message"]
    worker = s.app.parts.task_worker
    claimed = worker.claim("worker-1")
    assert claimed is not None and claimed[0].id == run["id"] and worker.claim("worker-2") is None
    worker.work(claimed)  # nothing was deployed: the run fails with the reason
    (ended,) = s.client.get(f"{base}/runs", token=s.admin, expect=200).json["data"]
    assert ended["status"] == "failed" and ended["exit_code"] is None and ended["finished_at"]
    assert "web" in ended["output"] and ("no running container" in ended["output"] or "engine" in ended["output"])
    assert s.client.get(base, token=s.admin, expect=200).json["last_run"]["id"] == run["id"]
    s.client.post(f"{base}/run", token=s.admin, expect=202)  # it ended: it may run again


def test_the_apps_scheduler_queues_a_due_run_once_and_skips_one_due_while_it_runs(setup):
    s = setup
    service_id = s.service("site")
    made = s.create(service_id, {**TASK, "schedule": "0 * * * *"}).json
    scheduler, worker = s.app.parts.task_scheduler, s.app.parts.task_worker
    assert scheduler.tick() == []
    s.clock.advance(3600)
    (queued,) = scheduler.tick()
    assert queued.status == "running" and scheduler.tick() == []
    claimed = worker.claim("worker-1")
    assert claimed[0].id == queued.id
    s.clock.advance(3600)
    (skipped,) = scheduler.tick()  # the previous run still runs
    assert skipped.status == "skipped"
    s.clock.advance(3 * 3600)  # three missed hours make one run
    assert [r.status for r in scheduler.tick()] == ["skipped"]
    runs = s.client.get(f"/api/services/{service_id}/tasks/{made['id']}/runs", token=s.admin, expect=200).json
    assert [r["status"] for r in runs["data"]] == ["skipped", "skipped", "running"]
    assert "previous run" in runs["data"][0]["output"]
    worker.work(claimed)
    s.clock.advance(3600)
    assert [r.status for r in scheduler.tick()] == ["running"]
    disabled = s.client.patch(f"/api/services/{service_id}/tasks/{made['id']}", token=s.admin,
                              json_body={"enabled": False}, expect=200).json
    assert disabled["enabled"] is False
    s.clock.advance(3600)
    assert scheduler.tick() == []  # a disabled task is not run on its schedule


def test_a_run_a_stopped_process_left_started_ends_failed(setup, store):
    s = setup
    service_id = s.service("site")
    made = s.create(service_id).json
    s.client.post(f"/api/services/{service_id}/tasks/{made['id']}/run", token=s.admin, expect=202)
    run, _ = s.app.parts.task_worker.claim("gone-worker")  # a lease nobody holds
    assert tasks.recover_interrupted(store.uow(), s.clock) == [run.id]
    (ended,) = s.client.get(f"/api/services/{service_id}/tasks/{made['id']}/runs", token=s.admin,
                            expect=200).json["data"]
    assert ended["status"] == "failed" and tasks.STOPPED in ended["output"]


def test_one_customers_started_run_holds_up_only_that_customers_queued_runs(setup):
    s = setup
    acme_a, acme_b, other = s.service("a"), s.service("b"), s.service("o", customer=s.other)
    ids = {sid: s.create(sid).json["id"] for sid in (acme_a, acme_b, other)}
    for sid in (acme_a, acme_b, other):
        s.client.post(f"/api/services/{sid}/tasks/{ids[sid]}/run", token=s.admin, expect=202)
        s.clock.advance(1)
    worker = s.app.parts.task_worker
    first = worker.claim("w")
    second = worker.claim("w")
    assert (first[1].service_id, second[1].service_id) == (acme_a, other)  # acme's second waits
    assert worker.claim("w") is None
    worker.work(first)
    assert worker.claim("w")[1].service_id == acme_b
