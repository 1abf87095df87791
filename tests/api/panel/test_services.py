"""Panel services without an engine: validation from the deploy plugins' schemas, status
rules, roles, scoping, the event timeline, and deploy jobs surviving a restart."""
from __future__ import annotations

import pytest

from core.panel import deploys, access, customers as panel_customers


@pytest.fixture
def setup(client, store, clock):
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")

    def key(role, **kw):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000, **kw)[1]

    return client, acme, other, key("admin"), key


def _create(client, token, **body):
    return client.post("/api/services", token=token, json_body=body)


def test_create_queues_a_deploy_job(setup, store):
    client, acme, _, admin, _ = setup
    created = _create(client, admin, name="site", customer_id=acme.id, deploy_method="template",
                      template_id="static-site").json
    assert created["status"] == "deploying" and created["url"] == "" and created["id"].startswith("svc_")
    with store.uow() as uow:
        job = uow.deploy_jobs.get(created["deploy_job_id"])
    assert (job.state, job.kind, job.service_id) == ("queued", "deploy", created["id"])
    detail = client.get(f"/api/services/{created['id']}", token=admin, expect=200).json
    assert detail["status"] == "deploying" and "services:" in detail["compose"]
    assert detail["health"] == {"status": "unknown", "last_check": None, "consecutive_failures": 0}
    events = client.get(f"/api/services/{created['id']}/events", token=admin, expect=200).json
    assert [(e["type"], e["status"]) for e in events["data"]] == [("deploy", "started")] and events["total"] == 1


@pytest.mark.parametrize("body, field", [
    ({"deploy_method": "template"}, "template_id"),
    ({"deploy_method": "compose"}, "compose"),
    ({"deploy_method": "git"}, "git_url"),
    ({"deploy_method": "ai"}, "ai_url"),
    ({"deploy_method": "ftp"}, "deploy_method"),
    ({"deploy_method": "template", "template_id": "nope"}, "template_id"),
    ({"deploy_method": "template", "template_id": "postgres", "customer_network": "yes"}, "customer_network"),
    ({"deploy_method": "compose", "compose": "services:\n  a:\n    image: x\n    privileged: true\n"}, "compose"),
    ({"deploy_method": "compose", "compose": "services: {}"}, "compose"),
    ({"deploy_method": "compose", "compose": "services:\n  a: {image: x}\n", "name": "Bad Name"}, "name"),
    # the name becomes a host name: `$` let a trailing newline by (review t14-rreview)
    ({"deploy_method": "compose", "compose": "services:\n  a: {image: x}\n", "name": "web\n"}, "name"),
    ({"deploy_method": "compose", "compose": "services:\n  a: {image: x}\n", "customer_id": "cust_nope"},
     "customer_id"),
])
def test_create_refusals_name_the_field(setup, body, field):
    client, acme, _, admin, _ = setup
    request = {"name": "svc", "customer_id": acme.id, **body}
    result = _create(client, admin, **request)
    assert result.status_code == 422, result.text
    assert result.json["error"]["code"] == "validation_error" and field in result.json["error"]["fields"], \
        result.json
    assert client.get("/api/services", token=admin).json["total"] == 0


def test_unsupported_compose_key_is_named(setup):
    client, acme, _, admin, _ = setup
    result = _create(client, admin, name="x", customer_id=acme.id, deploy_method="compose",
                     compose="services:\n  a:\n    image: x\n    restart: always\n")
    assert "services.a.restart" in result.json["error"]["fields"]["compose"]


def test_names_are_unique_and_deploying_services_refuse_operations(setup):
    client, acme, _, admin, _ = setup
    created = _create(client, admin, name="dup", customer_id=acme.id, deploy_method="compose",
                      compose="services:\n  a: {image: x}\n").json
    taken = _create(client, admin, name="dup", customer_id=acme.id, deploy_method="compose",
                    compose="services:\n  a: {image: x}\n")
    assert taken.status_code == 409
    # the field is named, so a form can say it next to the name
    assert taken.json["error"]["code"] == "conflict"
    assert taken.json["error"]["fields"] == {"name": "a service named 'dup' already exists"}
    for op in ("start", "stop", "restart", "redeploy"):
        result = client.post(f"/api/services/{created['id']}/{op}", token=admin, expect=409)
        assert result.json["error"]["code"] == "conflict"
    # delete is allowed from any state, deploying included: tests/integration/test_services_engine.py


def test_roles_and_customer_scoping(setup, store, clock):
    client, acme, other, admin, key = setup
    mine = _create(client, admin, name="mine", customer_id=acme.id, deploy_method="compose",
                   compose="services:\n  a: {image: x}\n").json
    theirs = _create(client, admin, name="theirs", customer_id=other.id, deploy_method="compose",
                     compose="services:\n  a: {image: x}\n").json
    customer_key = key("customer", customer_id=acme.id)
    listed = client.get("/api/services", token=customer_key, expect=200).json
    assert [s["id"] for s in listed["data"]] == [mine["id"]] and listed["total"] == 1
    assert client.get("/api/services", token=customer_key, params={"customer_id": other.id}).json["data"] == []
    for path in (f"/api/services/{theirs['id']}", f"/api/services/{theirs['id']}/events",
                 f"/api/services/{theirs['id']}/logs"):
        client.get(path, token=customer_key, expect=404)
    client.post(f"/api/services/{theirs['id']}/stop", token=customer_key, expect=404)
    result = _create(client, customer_key, name="sneaky", customer_id=other.id, deploy_method="compose",
                     compose="services:\n  a: {image: x}\n")
    assert result.status_code == 403
    viewer = key("viewer")
    assert client.get("/api/services", token=viewer, expect=200).json["total"] == 2
    client.get(f"/api/services/{theirs['id']}/logs", token=viewer, params={"tail": "x"}, expect=400)
    _create(client, viewer, name="v", customer_id=acme.id, deploy_method="compose", compose="x")
    for method, path in (("POST", "/api/services"), ("POST", f"/api/services/{mine['id']}/stop"),
                         ("POST", f"/api/services/{mine['id']}/redeploy"), ("DELETE", f"/api/services/{mine['id']}")):
        client.request(method, path, token=viewer, json_body={} if method == "POST" else None, expect=403)
    no_deploy = key("admin", denied_permissions=["services:deploy"])
    assert _create(client, no_deploy, name="nd", customer_id=acme.id, deploy_method="compose",
                   compose="services:\n  a: {image: x}\n").status_code == 403
    # permission comes before validation: an invalid body from a key without it is 403
    for denied in ("services:deploy", "services:create"):
        lacking = key("admin", denied_permissions=[denied])
        refused = client.post("/api/services", token=lacking, json_body={"name": "NOT A NAME"}, expect=403).json
        assert denied in refused["error"]["message"]
    no_logs = key("admin", denied_permissions=["services:logs"])
    client.get(f"/api/services/{mine['id']}/logs", token=no_logs, expect=403)
    client.delete(f"/api/customers/{acme.id}", token=admin, expect=409)  # it has services


def test_list_query_parameters(setup, clock):
    client, acme, other, admin, _ = setup
    for name, customer in (("bravo", acme), ("alpha", other), ("charlie", acme)):
        clock.advance(1)
        _create(client, admin, name=name, customer_id=customer.id, deploy_method="compose",
                compose="services:\n  a: {image: x}\n")

    def names(**p):
        return [s["name"] for s in client.get("/api/services", token=admin, params=p, expect=200).json["data"]]

    assert names() == ["bravo", "alpha", "charlie"]
    assert names(sort="name") == ["alpha", "bravo", "charlie"]
    assert names(sort="name", order="desc") == ["charlie", "bravo", "alpha"]
    assert names(customer_id=acme.id) == ["bravo", "charlie"]
    assert names(search="ar") == ["charlie"] and names(status="running") == []
    assert names(status="deploying", per_page="2", page="2") == ["charlie"]
    listed = client.get("/api/services", token=admin, params={"page": "5"}).json
    assert listed["data"] == [] and listed["total"] == 3
    for bad in ({"status": "sleeping"}, {"sort": "cost"}, {"order": "sideways"}, {"per_page": "500"},
                {"page": "-1"}):
        client.get("/api/services", token=admin, params=bad, expect=400)
    client.get("/api/services/svc_nope", token=admin, expect=404)


def test_deploy_rate_tier_is_ten_per_minute(setup):
    client, acme, _, admin, _ = setup
    client.patch(f"/api/customers/{acme.id}", token=admin, json_body={"limits": {"cpus": 100, "memory_mb": 100000}},
                 expect=200)
    for i in range(10):
        result = _create(client, admin, name=f"s{i}", customer_id=acme.id, deploy_method="compose",
                         compose="services:\n  a: {image: x}\n")
        assert result.status_code == 201
    assert result.headers["x-ratelimit-limit"] == "10" and result.headers["x-ratelimit-remaining"] == "0"
    refused = _create(client, admin, name="s10", customer_id=acme.id, deploy_method="compose",
                      compose="services:\n  a: {image: x}\n")
    assert refused.status_code == 429 and refused.json["error"]["code"] == "rate_limited"
    assert client.get("/api/services", token=admin, expect=200).headers["x-ratelimit-limit"] == "10000"
    # redeploy draws on the same 10/min bucket (the check comes before the 409 for a deploying service)
    service_id = client.get("/api/services", token=admin).json["data"][0]["id"]
    refused = client.post(f"/api/services/{service_id}/redeploy", token=admin, expect=429)
    assert refused.headers["x-ratelimit-limit"] == "10"


def test_jobs_left_running_by_a_stopped_process_are_resumed(setup, store, clock):
    client, acme, _, admin, _ = setup
    created = _create(client, admin, name="interrupted", customer_id=acme.id, deploy_method="compose",
                      compose="services:\n  a: {image: x}\n").json
    job = deploys.claim_next(store.uow(), clock)
    assert job.id == created["deploy_job_id"]
    # the process dies here; the next one starts:
    assert deploys.recover_interrupted(store.uow(), clock) == [job.id]
    with store.uow() as uow:
        assert uow.deploy_jobs.get(job.id).state == "queued"
    assert deploys.claim_next(store.uow(), clock).id == job.id
    events = client.get(f"/api/services/{created['id']}/events", token=admin).json["data"]
    assert events[0]["message"].endswith("resumed after a restart")


def test_a_job_that_takes_its_worker_down_every_time_is_given_up(setup, store, clock):
    """A job whose run kills its process (the issue's build client reading /dev/zero did)
    must not be run again after every restart: the third interrupted run is its last."""
    client, acme, _, admin, _ = setup
    created = _create(client, admin, name="poison", customer_id=acme.id, deploy_method="compose",
                      compose="services:\n  a: {image: x}\n").json
    for attempt in (1, 2):
        job = deploys.claim_next(store.uow(), clock)
        assert (job.id, job.attempts) == (created["deploy_job_id"], attempt)
        assert deploys.recover_interrupted(store.uow(), clock) == [job.id]  # the process died: run it again
    job = deploys.claim_next(store.uow(), clock)
    assert job.attempts == deploys.MAX_ATTEMPTS
    assert deploys.recover_interrupted(store.uow(), clock) == [job.id]  # died a third time: given up
    with store.uow() as uow:
        assert uow.deploy_jobs.get(job.id).state == "failed"
        assert "interrupted 3 times" in uow.deploy_jobs.get(job.id).error
    assert deploys.claim_next(store.uow(), clock) is None
    detail = client.get(f"/api/services/{created['id']}", token=admin).json
    assert detail["status"] == "failed"
    events = client.get(f"/api/services/{created['id']}/events", token=admin).json["data"]
    assert events[0]["status"] == "failed" and "interrupted 3 times" in events[0]["message"]


def test_a_work_directory_that_cannot_be_made_fails_the_job(setup, store, clock, tmp_path):
    """The service ends ``failed`` with the reason, never stuck ``deploying``."""
    from app.workers.deploys import DeployWorker

    client, acme, _, admin, _ = setup
    created = _create(client, admin, name="nowhere", customer_id=acme.id, deploy_method="compose",
                      compose="services:\n  web:\n    image: localhost/busybox:latest\n").json
    job = deploys.claim_next(store.uow(), clock)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    worker = DeployWorker(store, clock, runtime=None, calls=None, work_dir=str(blocker / "work"))
    worker.work(job)
    assert client.get(f"/api/services/{created['id']}", token=admin, expect=200).json["status"] == "failed"
    events = client.get(f"/api/services/{created['id']}/events", token=admin, expect=200).json["data"]
    assert any(e["status"] == "failed" and "SLIPWAY_WORK_DIR" in e["message"] for e in events)
    with store.uow() as uow:
        assert uow.deploy_jobs.get(job.id).state == "failed"


def test_recovery_takes_back_only_the_jobs_of_workers_that_stopped(setup, store, clock):
    """Several processes share the queue: a running job whose owner's lease is fresh is
    left alone; once the lease goes stale (a crash) or is dropped (a clean stop), the job
    goes back to the queue."""
    from core.panel import leases

    client, acme, _, admin, _ = setup
    for name in ("alive", "crashed", "stopped"):
        _create(client, admin, name=name, customer_id=acme.id, deploy_method="compose",
                compose="services:\n  a: {image: x}\n")
    owners = {name: leases.new_worker_id() for name in ("alive", "crashed", "stopped")}
    for name in ("alive", "crashed", "stopped"):
        leases.beat(store.uow(), clock, owners[name])
    jobs = {name: deploys.claim_next(store.uow(), clock, owners[name]) for name in ("alive", "crashed", "stopped")}
    leases.retire(store.uow(), owners["stopped"])
    assert deploys.recover_interrupted(store.uow(), clock) == [jobs["stopped"].id]
    clock.advance(leases.STALE_S - 5)
    leases.beat(store.uow(), clock, owners["alive"])  # the live process keeps beating
    assert deploys.recover_interrupted(store.uow(), clock) == []
    clock.advance(10)  # the crashed one has not beaten for STALE_S + 5 seconds
    assert deploys.recover_interrupted(store.uow(), clock) == [jobs["crashed"].id]
    with store.uow() as uow:
        states = {name: uow.deploy_jobs.get(job.id).state for name, job in jobs.items()}
    assert states == {"alive": "running", "crashed": "queued", "stopped": "queued"}


# --- a service name that would take Slipway's own host (tenant safety, second round) ---

RESERVED = {"base_domain": "example.com", "public_url": "https://a.Panel.Example.com:8443",
            "caddy_admin": "http://caddy-admin.example.com:2019"}
METHOD_BODIES = {
    "template": {"template_id": "static-site"},
    "compose": {"compose": "services:\n  a: {image: localhost/busybox:latest}\n"},
    "git": {"git_url": "https://git.example.org/shop.git"},
    "ai": {"ai_url": "https://git.example.org/shop.git"},
}


def _rows(store) -> dict:
    models = store.models
    with store.db.connection_context():
        return {name: getattr(models, name).select().count()
                for name in ("Service", "DeployJob", "ServiceEvent", "ServiceRoute", "CustomDomain")}


@pytest.mark.parametrize("method", sorted(METHOD_BODIES))
@pytest.mark.parametrize("name, why", [
    ("caddy-admin", "caddy-admin.example.com, which is Slipway's own"),  # the host of SLIPWAY_CADDY_ADMIN
    ("panel", "panel.example.com, a name above a.panel.example.com"),  # above the host of SLIPWAY_PUBLIC_URL
])
def test_a_name_whose_host_is_or_is_above_slipways_own_is_422_and_creates_nothing(make_app, store, clock, method,
                                                                                 name, why):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(**RESERVED))
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    before = _rows(store)
    refused = _create(client, admin, name=name, customer_id=acme.id, deploy_method=method, **METHOD_BODIES[method])
    assert refused.status_code == 422, refused.text
    error = refused.json["error"]
    assert error["code"] == "validation_error" and list(error["fields"]) == ["name"], error
    assert why in error["fields"]["name"], error
    assert _rows(store) == before and client.get("/api/services", token=admin).json["total"] == 0


def test_names_beside_or_below_slipways_own_hosts_are_fine(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(**RESERVED))
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    for name in ("a", "mypanel", "caddy"):  # beside panel and caddy-admin; a.example.com is above no reserved host
        created = _create(client, admin, name=name, customer_id=acme.id, deploy_method="template",
                          template_id="static-site")
        assert created.status_code == 201, created.text
    # without a base domain a service has no host name there: `panel` is a name like any other
    plain = ContractClient(make_app(public_url="https://panel.example.com"))
    assert _create(plain, admin, name="panel", customer_id=acme.id, deploy_method="template",
                   template_id="static-site").status_code == 201
