"""A service's backup policy over the panel API: read, create or replace, delete, every
refusal (422 naming the field, 403, 404) held to the contract, and the scheduler of the
app queuing a due run's backup (``scheduled: true``) as the test's clock says it is due.
No engine here: the backups themselves are made on Podman in
``tests/integration/test_backup_policies_engine.py``."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from core.errors import NotFound
from core.panel import access, backup_policies, customers, deploys
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from tests.support.fakes import FakeResolver
from tests.api.panel.test_backups import WITH_VOLUME, dead_engine  # noqa: F401 (a fixture)

#: the deploy times core used to default to (it takes them from the caller now)
DEPLOY_TIMES = DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0)

POLICY = {"schedule": "30 3 * * *", "destination": "local", "keep_last": 7, "verify": True}


class Setup:
    def __init__(self, app, client, store, clock, dead):
        self.app, self.client, self.store, self.clock, self.dead = app, client, store, clock, dead
        self.acme = customers.create_customer(store.uow(), clock, name="Acme")
        self.other = customers.create_customer(store.uow(), clock, name="Other")
        self.admin = self.key("admin")

    def key(self, role, **kw):
        return access.create_api_key(self.store.uow(), self.clock, name=role, role=role, rate_limit_rpm=10000,
                                     **kw)[1]

    def service(self, name, customer=None):
        created = self.client.post("/api/services", token=self.admin, expect=201, json_body={
            "name": name, "customer_id": (customer or self.acme).id, "deploy_method": "compose",
            "compose": WITH_VOLUME}).json
        job = deploys.claim_next(self.store.uow(), self.clock)
        # fails (no engine): not deploying
        run_job(self.store.uow(), Deployer(self.clock, self.dead, DEPLOY_TIMES, resolver=FakeResolver()), job)
        return created["id"]

    def put(self, service_id, body, expect=200, token=None):
        return self.client.request("PUT", f"/api/services/{service_id}/backup-policy", token=token or self.admin,
                                   json_body=body, expect=expect)


@pytest.fixture
def setup(make_app, store, clock, tmp_path, dead_engine):
    from tests.support.contract_client import ContractClient

    app = make_app(backup_dir=str(tmp_path / "backups"))
    return Setup(app, ContractClient(app), store, clock, dead_engine)


def test_put_get_replace_delete(setup):
    s = setup
    service_id = s.service("site")
    path = f"/api/services/{service_id}/backup-policy"
    assert s.client.get(path, token=s.admin, expect=404).json["error"]["code"] == "not_found"
    stored = s.put(service_id, POLICY).json
    assert {k: stored[k] for k in POLICY} == POLICY
    assert stored["service_id"] == service_id and stored["last_run_at"] is None and stored["last_backup_id"] is None
    assert s.clock.now() == datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)  # the tests' clock
    assert stored["next_run_at"] == "2026-11-03T03:30:00.000000Z"  # 03:30 UTC, the day after
    assert s.client.get(path, token=s.admin, expect=200).json == stored
    replaced = s.put(service_id, {"schedule": "*/5 * * * *", "keep_last": 1}).json
    assert (replaced["destination"], replaced["verify"], replaced["keep_last"]) == ("local", False, 1)
    assert replaced["created_at"] == stored["created_at"]
    s.client.delete(path, token=s.admin, expect=204)
    s.client.get(path, token=s.admin, expect=404)
    s.client.delete(path, token=s.admin, expect=404)


def test_the_backups_list_says_whether_there_is_a_policy(setup):
    """The list carries the policy (null: none), so a client learns there is none without a
    404 (the web page's Backups tab asks nothing else)."""
    s = setup
    service_id = s.service("site")
    backups = f"/api/services/{service_id}/backups"
    assert s.client.get(backups, token=s.admin, expect=200).json["policy"] is None
    stored = s.put(service_id, POLICY).json
    assert s.client.get(backups, token=s.admin, expect=200).json["policy"] == stored
    s.client.delete(f"/api/services/{service_id}/backup-policy", token=s.admin, expect=204)
    assert s.client.get(backups, token=s.admin, params={"status": "completed"}, expect=200).json["policy"] is None


@pytest.mark.parametrize("change, field", [
    ({"schedule": "61 * * * *"}, "schedule"),
    ({"schedule": "* * * *"}, "schedule"),
    ({"schedule": "@daily"}, "schedule"),
    ({"schedule": 5}, "schedule"),
    ({"schedule": None}, "schedule"),
    ({"destination": "mars"}, "destination"),
    ({"destination": 3}, "destination"),
    ({"keep_last": 0}, "keep_last"),
    ({"keep_last": 366}, "keep_last"),
    ({"keep_last": "7"}, "keep_last"),
    ({"keep_last": 2.5}, "keep_last"),
    ({"verify": "yes"}, "verify"),
    ({"every": "day"}, "every"),  # "is not a known field"
])
def test_a_bad_field_is_422_naming_it(setup, change, field):
    s = setup
    service_id = s.service("site")
    refused = s.put(service_id, {**POLICY, **change}, expect=422).json["error"]
    assert refused["code"] == "validation_error"
    assert any(field in name or field in problem for name, problem in refused["fields"].items()), refused
    s.client.get(f"/api/services/{service_id}/backup-policy", token=s.admin, expect=404)  # nothing stored


def test_missing_fields_and_a_body_that_is_not_an_object_are_422(setup):
    s = setup
    service_id = s.service("site")
    for body in ({"keep_last": 3}, {"schedule": "* * * * *"}, [], "x"):
        assert s.put(service_id, body, expect=422).json["error"]["code"] == "validation_error"


def test_roles_without_the_permissions_are_403(setup):
    s = setup
    service_id = s.service("site")
    path = f"/api/services/{service_id}/backup-policy"
    s.put(service_id, POLICY)
    for token in (s.key("viewer"), s.key("customer", customer_id=s.acme.id)):
        s.put(service_id, {**POLICY, "keep_last": 1}, expect=403, token=token)
        s.client.get(path, token=token, expect=403)
        s.client.delete(path, token=token, expect=403)
    no_write = s.key("admin", denied_permissions=["backups:write"])
    assert "backups:write" in s.put(service_id, POLICY, expect=403, token=no_write).json["error"]["message"]
    s.client.delete(path, token=no_write, expect=403)
    assert s.client.get(path, token=no_write, expect=200).json["keep_last"] == 7
    no_read = s.key("admin", denied_permissions=["backups:read"])
    assert "backups:read" in s.client.get(path, token=no_read, expect=403).json["error"]["message"]
    assert s.client.get(path, token=s.admin, expect=200).json["keep_last"] == 7  # untouched


def test_unknown_services_and_other_customers_services_are_404(setup, store):
    s = setup
    for method, body in (("GET", None), ("PUT", POLICY), ("DELETE", None)):
        result = s.client.request(method, "/api/services/svc_nope/backup-policy", token=s.admin, json_body=body,
                                  expect=404)
        assert "svc_nope" in result.json["error"]["message"]
    theirs = s.service("theirs", customer=s.other)
    s.put(theirs, POLICY)
    key = access.ApiKey(id="0" * 16, name="c", role="customer", secret_hash="", rate_limit_rpm=1,
                        created_at=s.clock.now(), customer_id=s.acme.id)
    principal = access.Principal(key=key, permissions=frozenset({"backups:read", "backups:write"}))
    places = s.app.parts.backup_destinations
    for call in (lambda: backup_policies.get_policy(store.uow(), principal, theirs),
                 lambda: backup_policies.put_policy(store.uow(), s.clock, principal, theirs, POLICY, places),
                 lambda: backup_policies.delete_policy(store.uow(), principal, theirs)):
        with pytest.raises(NotFound):
            call()
    assert s.client.get(f"/api/services/{theirs}/backup-policy", token=s.admin, expect=200).json["keep_last"] == 7


def test_the_apps_scheduler_queues_a_due_run_once(setup):
    s = setup
    service_id = s.service("site")
    s.put(service_id, {"schedule": "0 * * * *", "keep_last": 2})
    scheduler = s.app.parts.backup_scheduler
    assert scheduler.tick() == []
    s.clock.advance(3600)
    (made,) = scheduler.tick()
    assert scheduler.tick() == []
    listed = s.client.get(f"/api/services/{service_id}/backups", token=s.admin, expect=200).json["data"]
    assert [(b["id"], b["scheduled"], b["status"]) for b in listed] == [(made.id, True, "pending")]
    policy = s.client.get(f"/api/services/{service_id}/backup-policy", token=s.admin, expect=200).json
    assert policy["last_backup_id"] == made.id
    by_hand = s.client.post(f"/api/services/{service_id}/backups", token=s.admin, expect=409).json
    assert "still being made" in by_hand["error"]["message"]  # the scheduled one holds the service
