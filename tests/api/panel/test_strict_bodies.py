"""Every panel request body refuses the fields it does not know: 422 `validation_error`
with each unknown field in `error.fields` ("is not a known field"), on create as on
PATCH, and nothing is stored. In process, real SQLite; no engine is reached (a refused
create queues nothing)."""
from __future__ import annotations

import pytest

from core.panel import access, customers as panel_customers

COMPOSE = "services:\n  web:\n    image: localhost/busybox:latest\n    ports: ['8080']\n"
UNKNOWN = "is not a known field"


@pytest.fixture
def setup(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app())
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)[1]
    return client, acme, admin


def _unknown(answer, *names):
    error = answer.json["error"]
    assert answer.status_code == 422 and error["code"] == "validation_error", answer.json
    for name in names:
        assert error["fields"].get(name) == UNKNOWN, error
    return error


def _services(client, admin):
    return client.get("/api/services", token=admin, expect=200).json["total"]


@pytest.mark.parametrize("body, names", [
    ({"deploy_method": "template", "template_id": "static-site", "variabels": {"IMAGE": "x"}}, ["variabels"]),
    ({"deploy_method": "compose", "compose": COMPOSE, "composee": COMPOSE, "status": "running"},
     ["composee", "status"]),
    ({"deploy_method": "git", "git_url": "https://git.example.test/acme/site.git", "branch": "main"}, ["branch"]),
])
def test_an_unknown_field_on_create_is_422_naming_it_and_creates_nothing(setup, body, names):
    client, acme, admin = setup
    answer = client.post("/api/services", token=admin, json_body={"name": "site", "customer_id": acme.id, **body})
    _unknown(answer, *names)
    assert _services(client, admin) == 0


def test_a_deploy_methods_own_fields_are_known_fields_of_the_create(setup):
    client, acme, admin = setup
    created = client.post("/api/services", token=admin, json_body={
        "name": "site", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}, expect=201)
    assert created.json["id"].startswith("svc_")


def test_an_unknown_field_on_patch_is_422_naming_it_and_changes_nothing(setup):
    client, acme, admin = setup
    created = client.post("/api/services", token=admin, json_body={
        "name": "site", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}, expect=201).json
    before = client.get(f"/api/services/{created['id']}", token=admin).json
    answer = client.patch(f"/api/services/{created['id']}", token=admin,
                          json_body={"compose": COMPOSE, "variabels": {"A": "b"}})
    _unknown(answer, "variabels")
    assert client.get(f"/api/services/{created['id']}", token=admin).json == before


def test_customers_and_keys_refuse_unknown_fields_too(setup):
    client, acme, admin = setup
    _unknown(client.post("/api/customers", token=admin, json_body={"name": "Beta", "plan": "gold"}), "plan")
    _unknown(client.post("/api/customers", token=admin, json_body={"name": "Beta", "limits": {"servces": 3}}),
             "limits.servces")
    assert client.get("/api/customers", token=admin).json["total"] == 1  # only Acme
    _unknown(client.patch(f"/api/customers/{acme.id}", token=admin, json_body={"name": "Acme 2", "mail": "a@b"}),
             "mail")
    assert client.get(f"/api/customers/{acme.id}", token=admin).json["name"] == "Acme"
    keys = client.get("/api/v1/api-keys", token=admin).json["total"]
    _unknown(client.post("/api/v1/api-keys", token=admin, json_body={"name": "ci", "role": "viewer",
                                                                     "customer_id": acme.id}), "customer_id")
    assert client.get("/api/v1/api-keys", token=admin).json["total"] == keys


def test_the_partner_api_keeps_its_own_rule(acme):
    """`/v1` keeps its documented rule: a field the partner API does not know is ignored."""
    created = acme.customer("Initech", plan="gold")
    assert created["name"] == "Initech" and "plan" not in created
