"""PATCH /api/services/{id}: variables, compose, git branch (stored for the next redeploy)
and custom domains (route records at once), every refusal, and that a refused PATCH
changes nothing. In process, real SQLite, no engine: a service is made ``running`` with a
route record as a deploy leaves it (tests/integration/test_caddy_routes.py deploys for real)."""
from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from core.panel import access, customers as panel_customers, routes

DOMAIN = "apps.example.test"
COMPOSE = "services:\n  web:\n    image: localhost/busybox:latest\n    ports: ['8080']\n"


@pytest.fixture
def setup(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(base_domain=DOMAIN))
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")

    def key(role, **kw):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000, **kw)[1]

    return client, acme, other, key("admin"), key


def _service(client, store, clock, admin, customer, name, target="http://127.0.0.1:41234", **body):
    """A service as its deploy leaves it: running, with its route record."""
    body = body or {"deploy_method": "compose", "compose": COMPOSE}
    created = client.post("/api/services", token=admin, json_body={"name": name, "customer_id": customer.id, **body},
                          expect=201).json
    with store.uow() as uow:
        service = replace(uow.services.get(created["id"]), status="running", url=f"https://{name}.{DOMAIN}")
        uow.services.update(service)
        uow.deploy_jobs.finish(created["deploy_job_id"], "succeeded", None, clock.now())
        routes.follow(uow, service, target, DOMAIN, clock.now())
        uow.commit()
    return created["id"]


def _records(store):
    return [(r.hostname, r.service_id, r.target) for r in routes.list_routes(store.uow(write=False))]


def _patch(client, token, service_id, body, expect=None):
    return client.patch(f"/api/services/{service_id}", token=token, json_body=body, expect=expect)


def test_domains_apply_at_once_and_are_listed(setup, store, clock):
    client, acme, _, admin, _ = setup
    sid = _service(client, store, clock, admin, acme, "site")
    detail = _patch(client, admin, sid, {"custom_domains": ["www.acme.test", "acme.test"]}, expect=200).json
    assert detail["custom_domains"] == ["acme.test", "www.acme.test"] and detail["id"] == sid
    assert client.get(f"/api/services/{sid}", token=admin, expect=200).json["custom_domains"] == [
        "acme.test", "www.acme.test"]
    listed = client.get("/api/services", token=admin, expect=200).json["data"]
    # list items have the spec's list-item fields only (panel-services-api.md: custom_domains is a detail field)
    assert [sorted(s) for s in listed] == [sorted(["id", "name", "status", "url", "customer_id", "template",
                                                   "deploy_method", "created_at", "updated_at", "resources"])]
    target = "http://127.0.0.1:41234"
    assert _records(store) == [("acme.test", sid, target), (f"site.{DOMAIN}", sid, target),
                               ("www.acme.test", sid, target)]
    _patch(client, admin, sid, {"custom_domains": ["acme.test"]}, expect=200)
    assert _records(store) == [("acme.test", sid, target), (f"site.{DOMAIN}", sid, target)]
    # a name let go is free for another service (delete: tests/integration/test_caddy_routes.py)
    other = _service(client, store, clock, admin, acme, "next")
    assert _patch(client, admin, other, {"custom_domains": ["www.acme.test"]}, expect=200).json["custom_domains"] == [
        "www.acme.test"]


@pytest.mark.parametrize("domains, field", [
    (["Acme.test"], "custom_domains[0]"), (["acme.test."], "custom_domains[0]"), (["*.acme.test"], "custom_domains[0]"),
    (["localhost"], "custom_domains[0]"), (["10.1.2.3"], "custom_domains[0]"), (["a_b.acme.test"], "custom_domains[0]"),
    (["-a.acme.test"], "custom_domains[0]"), (["a" * 64 + ".test"], "custom_domains[0]"),
    (["a." * 127 + "test"], "custom_domains[0]"), (["ok.test", "ok.test"], "custom_domains[1]"),
    ([f"s{i}.acme.test" for i in range(11)], "custom_domains"), ([DOMAIN], "custom_domains[0]"),
    (["shop.site." + DOMAIN], "custom_domains[0]"), (["fine.test", ""], "custom_domains[1]"),
])
def test_bad_domains_are_422_and_change_nothing(setup, store, clock, domains, field):
    client, acme, _, admin, _ = setup
    sid = _service(client, store, clock, admin, acme, "site")
    _patch(client, admin, sid, {"custom_domains": ["kept.test"]}, expect=200)
    before, records = client.get(f"/api/services/{sid}", token=admin).json, _records(store)
    refused = _patch(client, admin, sid, {"custom_domains": domains, "variables": {"A": "b"}}, expect=422).json
    assert refused["error"]["code"] == "validation_error" and field in refused["error"]["fields"], refused
    assert client.get(f"/api/services/{sid}", token=admin).json == before and _records(store) == records


@pytest.mark.parametrize("body", [{"custom_domains": "acme.test"}, {"custom_domains": [1]}, {"variables": {"A": 1}},
                                  {"compose": ""}, {"git_branch": ""}, {}, {"name": "other"}, {"status": "stopped"}])
def test_malformed_bodies_are_422(setup, store, clock, body):
    client, acme, _, admin, _ = setup
    sid = _service(client, store, clock, admin, acme, "site")
    before = client.get(f"/api/services/{sid}", token=admin).json
    assert _patch(client, admin, sid, body, expect=422).json["error"]["code"] == "validation_error"
    assert client.get(f"/api/services/{sid}", token=admin).json == before


def test_a_domain_of_another_service_is_409_and_changes_nothing(setup, store, clock):
    client, acme, other, admin, _ = setup
    mine = _service(client, store, clock, admin, acme, "mine", target="http://127.0.0.1:41001")
    theirs = _service(client, store, clock, admin, other, "theirs", target="http://127.0.0.1:41002")
    _patch(client, admin, theirs, {"custom_domains": ["shop.test"]}, expect=200)
    _patch(client, admin, mine, {"custom_domains": ["mine.test"]}, expect=200)
    records = _records(store)
    refused = _patch(client, admin, mine, {"custom_domains": ["new.test", "shop.test"], "compose": COMPOSE},
                     expect=409).json
    assert refused["error"]["code"] == "conflict" and "shop.test" in refused["error"]["message"]
    assert client.get(f"/api/services/{mine}", token=admin).json["custom_domains"] == ["mine.test"]
    assert _records(store) == records


@pytest.mark.storage
def test_two_patches_racing_for_one_name_one_wins(setup, store, clock):
    """Two requests at once, each in its own transaction and connection (the server's
    threads): the database's primary key lets one have the name; the other is 409. (The
    in-process test client runs one request at a time, so the use case is called from
    two threads, as the server's request threads call it.)"""
    from core.errors import Conflict
    from core.panel import services
    from app.pluginmanager import deploy_methods, make_plugin_manager

    client, acme, _, admin, _ = setup
    ids = [_service(client, store, clock, admin, acme, f"race{i}", target=f"http://127.0.0.1:4100{i}")
           for i in range(2)]
    principal = access.authenticate_key(store.uow(), clock, admin)
    methods = deploy_methods(make_plugin_manager())
    for round in range(3):
        name = f"race{round}.test"
        outcomes, start = {}, threading.Barrier(2)

        def patch(sid):
            start.wait()
            try:
                services.patch_service(store.uow(), clock, principal, sid, {"custom_domains": [name]}, methods, {},
                                       base_domain=DOMAIN)
                outcomes[sid] = 200
            except Conflict:
                outcomes[sid] = 409
            except BaseException as exc:  # noqa: BLE001 (shown by the assertion below)
                outcomes[sid] = repr(exc)

        threads = [threading.Thread(target=patch, args=(sid,)) for sid in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(map(str, outcomes.values())) == ["200", "409"], outcomes
        [winner] = [sid for sid, status in outcomes.items() if status == 200]
        assert [(h, s) for h, s, _ in _records(store) if h == name] == [(name, winner)]
        loser = next(sid for sid in ids if sid != winner)
        assert client.get(f"/api/services/{loser}", token=admin).json["custom_domains"] == []
        for sid in ids:  # both let go for the next round
            _patch(client, admin, sid, {"custom_domains": []}, expect=200)


def test_fields_of_another_method_are_422_naming_the_field(setup, store, clock):
    client, acme, _, admin, _ = setup
    compose = _service(client, store, clock, admin, acme, "comp")
    template = _service(client, store, clock, admin, acme, "tmpl", deploy_method="template",
                        template_id="static-site")
    git = _service(client, store, clock, admin, acme, "gitsvc", deploy_method="git",
                   git_url="https://example.com/acme/site.git")
    for sid, field, value in [(compose, "git_branch", "main"), (template, "compose", COMPOSE),
                              (template, "git_branch", "main"), (git, "compose", COMPOSE)]:
        before = client.get(f"/api/services/{sid}", token=admin).json
        refused = _patch(client, admin, sid, {field: value, "custom_domains": ["x.test"]}, expect=422).json
        assert field in refused["error"]["fields"], refused
        assert client.get(f"/api/services/{sid}", token=admin).json == before
    # every method takes variables (a git service's: its containers' environment)
    assert _patch(client, admin, git, {"variables": {"MODE": "x"}}, expect=200).json["variables"] == {"MODE": "x"}


def test_variables_compose_and_branch_are_stored_for_the_next_redeploy(setup, store, clock):
    client, acme, _, admin, _ = setup
    compose = _service(client, store, clock, admin, acme, "comp")
    new = COMPOSE.replace("8080", "9090") + "    environment: {GREETING: '${GREETING}'}\n"
    detail = _patch(client, admin, compose, {"compose": new, "variables": {"GREETING": "hi"}}, expect=200).json
    assert "9090" in detail["compose"] and detail["variables"] == {"GREETING": "hi"}
    assert detail["status"] == "running"  # applies at the next redeploy
    again = client.get(f"/api/services/{compose}", token=admin).json
    assert "9090" in again["compose"] and again["variables"] == {"GREETING": "hi"}

    template = _service(client, store, clock, admin, acme, "tmpl", deploy_method="template",
                        template_id="static-site")
    detail = _patch(client, admin, template, {"variables": {"TITLE": "Changed"}}, expect=200).json
    assert detail["variables"]["TITLE"] == "Changed"
    refused = _patch(client, admin, template, {"variables": {}}, expect=None)
    assert refused.status_code in (200, 422)  # the template's required variables decide

    git = _service(client, store, clock, admin, acme, "gitsvc", deploy_method="git",
                   git_url="https://example.com/acme/site.git")
    assert _patch(client, admin, git, {"git_branch": "release/2"}, expect=200).json["git_branch"] == "release/2"
    assert client.get(f"/api/services/{git}", token=admin).json["git_branch"] == "release/2"
    refused = _patch(client, admin, git, {"git_branch": "bad..name"}, expect=422).json
    assert "git_branch" in refused["error"]["fields"]
    refused = _patch(client, admin, git, {"git_branch": "main\n"}, expect=422).json  # `$` let a newline by
    assert "git_branch" in refused["error"]["fields"]
    assert client.get(f"/api/services/{git}", token=admin).json["git_branch"] == "release/2"


def test_a_bad_compose_is_422_and_a_compose_past_the_limits_409(setup, store, clock):
    client, acme, _, admin, _ = setup
    sid = _service(client, store, clock, admin, acme, "comp")
    before = client.get(f"/api/services/{sid}", token=admin).json
    bad = _patch(client, admin, sid, {"compose": COMPOSE + "    privileged: true\n"}, expect=422).json
    assert "compose" in bad["error"]["fields"]
    huge = COMPOSE + "    mem_limit: 900g\n"
    refused = _patch(client, admin, sid, {"compose": huge}, expect=None)
    assert refused.status_code in (409, 422), refused.text
    assert client.get(f"/api/services/{sid}", token=admin).json == before


def test_permissions_scoping_and_state(setup, store, clock):
    client, acme, other, admin, key = setup
    mine = _service(client, store, clock, admin, acme, "mine")
    theirs = _service(client, store, clock, admin, other, "theirs")
    body = {"custom_domains": ["x.test"]}
    _patch(client, key("viewer"), mine, body, expect=403)
    _patch(client, key("admin", denied_permissions=["services:deploy"]), mine, body, expect=403)
    customer_key = key("customer", customer_id=acme.id)
    _patch(client, customer_key, theirs, body, expect=404)
    _patch(client, admin, "svc_0000000000000000", body, expect=404)
    assert _patch(client, customer_key, mine, body, expect=200).json["custom_domains"] == ["x.test"]
    assert client.get(f"/api/services/{theirs}", token=admin).json["custom_domains"] == []
    deploying = client.post("/api/services", token=admin, json_body={
        "name": "busy", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}, expect=201).json
    assert _patch(client, admin, deploying["id"], body, expect=409).json["error"]["code"] == "conflict"


# --- review fixes (t14-rreview) ---

@pytest.mark.parametrize("name", [
    "panel.example.com", "api.panel.example.com", "caddy-admin.example.net", "a.localhost", "db.internal",
    "printer.local", "1.2.3.4", "example.0x7f", "example.com\n", "xn--abc.com", "\u0430pple.com",
    "web.apps.example.test\u3002", "ｗｅｂ.apps.example.test",
])
def test_names_that_route_someone_elses_traffic_are_422_and_change_nothing(make_app, store, clock, name):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(base_domain=DOMAIN, public_url="https://Panel.Example.com:8443",
                                     caddy_admin="http://caddy-admin.example.net:2019"))
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    admin = access.create_api_key(store.uow(), clock, name="a", role="admin", rate_limit_rpm=10000)[1]
    sid = _service(client, store, clock, admin, acme, "site")
    _patch(client, admin, sid, {"custom_domains": ["kept.test"]}, expect=200)
    before, records = client.get(f"/api/services/{sid}", token=admin).json, _records(store)
    refused = _patch(client, admin, sid, {"custom_domains": ["fine.test", name]}, expect=422).json
    assert list(refused["error"]["fields"]) == ["custom_domains[1]"], refused
    assert client.get(f"/api/services/{sid}", token=admin).json == before and _records(store) == records


def test_a_huge_or_non_json_patch_is_refused_and_changes_nothing(setup, store, clock):
    client, acme, _, admin, _ = setup
    sid = _service(client, store, clock, admin, acme, "site")
    before = client.get(f"/api/services/{sid}", token=admin).json
    huge = {"variables": {"A": "x" * (1024 * 1024)}}
    assert _patch(client, admin, sid, huge, expect=413).json["error"]["code"]
    client.patch(f"/api/services/{sid}", token=admin, body="variables=1",
                 headers={"Content-Type": "application/x-www-form-urlencoded"}, expect=415)
    client.patch(f"/api/services/{sid}", token=admin, body="{not json",
                 headers={"Content-Type": "application/json"}, expect=400)
    assert client.get(f"/api/services/{sid}", token=admin).json == before


@pytest.mark.storage
def test_a_delete_racing_a_patch_leaves_no_domain_nor_route_record(setup, store, clock):
    """A PATCH's transaction holds the service's row while it claims a name and writes
    records; a delete meanwhile waits for it (it locks the row first), then removes them
    all. (On PostgreSQL a delete that did not would remove nothing it could see yet and
    leave the PATCH's rows behind, routing a host port the service gave up.)"""
    from core.panel import services

    class NoEngine:
        def remove_service(self, service_id):
            pass

    client, acme, _, admin, _ = setup
    sid = _service(client, store, clock, admin, acme, "site")
    principal = access.authenticate_key(store.uow(), clock, admin)
    holding, outcome = threading.Event(), {}

    def delete():
        holding.wait(10)
        try:
            services.delete_service(store.uow(), NoEngine(), principal, sid)
            outcome["delete"] = "ok"
        except BaseException as exc:  # noqa: BLE001 (shown by the assertion below)
            outcome["delete"] = repr(exc)

    deleter = threading.Thread(target=delete)
    deleter.start()
    with store.uow() as uow:  # what patch_service does in its transaction, held a while
        service = uow.services.get(sid, for_update=True)
        uow.custom_domains.claim("late.test", sid, clock.now())
        holding.set()
        deleter.join(0.5)  # the delete is under way (and must wait for this row)
        routes.follow(uow, replace(service, custom_domains=("late.test",)), "http://127.0.0.1:41234", DOMAIN,
                      clock.now())
        uow.commit()
    deleter.join(30)
    assert outcome == {"delete": "ok"}
    assert _records(store) == []
    with store.uow(write=False) as uow:
        assert uow.custom_domains.for_service(sid) == [] and uow.services.get(sid) is None


GITHUB_ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def test_a_pinned_host_key_is_shown_and_patch_only_forgets_it(setup, store, clock):
    """``ssh_host_key`` (core.panel.host_keys): the detail shows the pin's fingerprint; a
    PATCH may forget it (null) and nothing else: a key is learned from the server, never
    given, so no value a customer sends becomes the key its clones trust."""
    client, acme, _, admin, _ = setup
    git = _service(client, store, clock, admin, acme, "pinned", deploy_method="git",
                   git_url="ssh://git@example.com/acme/site.git")
    assert client.get(f"/api/services/{git}", token=admin).json["ssh_host_key"] is None  # before any clone
    with store.uow() as uow:  # as the first clone's deploy job leaves it
        uow.services.update(replace(uow.services.get(git), ssh_host_key=GITHUB_ED25519))
        uow.commit()
    fingerprint = "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"  # as ssh-keygen -l prints it
    assert client.get(f"/api/services/{git}", token=admin).json["ssh_host_key"] == fingerprint
    for value in ("SHA256:" + "A" * 43, GITHUB_ED25519, "", 5, True, {"key": GITHUB_ED25519}):
        refused = _patch(client, admin, git, {"ssh_host_key": value}, expect=422).json
        assert "ssh_host_key" in refused["error"]["fields"], refused
        assert client.get(f"/api/services/{git}", token=admin).json["ssh_host_key"] == fingerprint
    refused = _patch(client, admin, git, {"ssh_host_key": "SHA256:x"}, expect=422).json
    assert "only null" in refused["error"]["fields"]["ssh_host_key"], refused
    with store.uow(write=False) as uow:
        assert uow.services.get(git).ssh_host_key == GITHUB_ED25519  # the stored key, untouched
    assert _patch(client, admin, git, {"ssh_host_key": None}, expect=200).json["ssh_host_key"] is None
    with store.uow(write=False) as uow:
        assert uow.services.get(git).ssh_host_key is None  # the next clone pins what it is shown

    compose = _service(client, store, clock, admin, acme, "comp")
    assert client.get(f"/api/services/{compose}", token=admin).json["ssh_host_key"] is None
    refused = _patch(client, admin, compose, {"ssh_host_key": None}, expect=422).json
    assert "ssh_host_key" in refused["error"]["fields"], refused
