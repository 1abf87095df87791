"""Variables and secret variables of every deploy method, without an engine: a git or ai
service takes ``variables`` (its containers' environment) on create and PATCH, and
``secret_variables`` (names among ``variables``, any method) marks which are secret:
stored encrypted, ``***`` in every answer but ``GET /api/services/{id}/secrets``; the
422s of both fields; making a secret plain needs ``services:secrets``. That the values
reach a git service's containers: tests/integration/test_git_variables.py."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from core.panel import access, customers

SOURCE = {"SLIPWAY_GIT_ALLOWED_SCHEMES": "https,file", "SLIPWAY_GIT_ALLOW_PRIVATE": "1"}
COMPOSE = "services:\n  web:\n    image: localhost/busybox:latest\n    environment:\n      GREETING: ${GREETING}\n"
KEY = "sk_live_0123456789abcdef"
URL = "postgres://app:pa55word@db:5432/app"


@pytest.fixture
def panel(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    acme = customers.create_customer(store.uow(), clock, name="Acme")

    def key(role, **kw):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000, **kw)[1]

    client = ContractClient(make_app(settings=SOURCE))
    return client, acme, key("admin"), key


def _create(client, token, acme, expect=201, **body):
    request = {"name": "app", "customer_id": acme.id, "deploy_method": "git", "git_url": "file:///srv/repo.git",
               **body}
    return client.post("/api/services", token=token, expect=expect, json_body=request).json


def _settled(store, clock, created) -> str:
    """The service as its first deploy leaves it (running; a PATCH is 409 while it deploys),
    with the compose its source gave."""
    with store.uow() as uow:
        service = uow.services.get(created["id"], for_update=True)
        uow.services.update(replace(service, status="running", compose=service.compose or COMPOSE))
        uow.deploy_jobs.finish(created["deploy_job_id"], "succeeded", None, clock.now())
        uow.commit()
    return created["id"]


def _answers(client, token, service_id) -> str:
    """Every answer about the service a key may read, but /secrets, as one text."""
    paths = [f"/api/services/{service_id}", "/api/services", f"/api/services/{service_id}/events",
             f"/api/services/{service_id}/releases", f"/api/services/{service_id}/deploys"]
    return " ".join(json.dumps(client.get(path, token=token, expect=200).json) for path in paths)


@pytest.mark.parametrize("method", ["git", "ai"])
def test_a_git_or_ai_service_takes_variables_and_secret_ones(panel, store, method):
    client, acme, admin, _ = panel
    source = {"git_url": "file:///srv/repo.git"} if method == "git" else {"ai_url": "file:///srv/repo.git"}
    created = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "app", "customer_id": acme.id, "deploy_method": method, **source,
        "variables": {"API_KEY": KEY, "DATABASE_URL": URL, "MODE": "production"},
        "secret_variables": ["API_KEY", "DATABASE_URL"]}).json
    assert KEY not in json.dumps(created)
    created = {**created, **client.get(f"/api/services/{created['id']}", token=admin, expect=200).json}
    assert created["variables"] == {"API_KEY": "***", "DATABASE_URL": "***", "MODE": "production"}
    assert created["secret_variables"] == ["API_KEY", "DATABASE_URL"]
    assert client.get(f"/api/services/{created['id']}/secrets", token=admin, expect=200).json == {
        "secrets": {"API_KEY": KEY, "DATABASE_URL": URL}}
    S = store.models.Service
    row = S.get(S.id == created["id"])
    assert KEY not in row.variables + (row.secret_values or "") and URL not in row.variables + row.secret_values
    assert json.loads(row.variables) == {"API_KEY": "***", "DATABASE_URL": "***", "MODE": "production"}
    text = _answers(client, admin, created["id"])
    assert KEY not in text and "pa55word" not in text


def test_a_patch_changes_a_git_services_variables_and_which_are_secret(panel, store, clock):
    client, acme, admin, key = panel
    service_id = _settled(store, clock, _create(client, admin, acme, variables={"API_KEY": KEY, "MODE": "dev"},
                                                secret_variables=["API_KEY"]))
    path = f"/api/services/{service_id}"
    kept = client.patch(path, token=admin, expect=200, json_body={
        "variables": {"API_KEY": "***", "MODE": "production", "DATABASE_URL": URL}}).json
    assert kept["variables"] == {"API_KEY": "***", "MODE": "production", "DATABASE_URL": URL}
    assert kept["compose"] == COMPOSE  # the compose its source gave stays until the next deploy
    assert client.get(f"{path}/secrets", token=admin).json["secrets"] == {"API_KEY": KEY}
    marked = client.patch(path, token=admin, expect=200, json_body={
        "secret_variables": ["API_KEY", "DATABASE_URL"]}).json
    assert marked["variables"]["DATABASE_URL"] == "***" and marked["secret_variables"] == ["API_KEY", "DATABASE_URL"]
    assert client.get(f"{path}/secrets", token=admin).json["secrets"] == {"API_KEY": KEY, "DATABASE_URL": URL}
    assert "pa55word" not in _answers(client, admin, service_id)
    with store.uow(write=False) as uow:  # in the clear for the next deploy
        assert uow.services.get(service_id).variables == {"API_KEY": KEY, "MODE": "production", "DATABASE_URL": URL}
    # a secret left out of variables keeps its value; one left out of secret_variables too goes
    left = client.patch(path, token=admin, expect=200, json_body={"variables": {"MODE": "production"}}).json
    assert left["variables"] == {"API_KEY": "***", "DATABASE_URL": "***", "MODE": "production"}
    gone = client.patch(path, token=admin, expect=200, json_body={
        "variables": {"MODE": "production"}, "secret_variables": ["API_KEY"]}).json
    assert gone["variables"] == {"API_KEY": "***", "MODE": "production"} and gone["secret_variables"] == ["API_KEY"]
    # making a secret plain shows its value: only a key that may read it does that
    denied = key("admin", denied_permissions=["services:secrets"])
    refused = client.patch(path, token=denied, expect=403, json_body={"secret_variables": []}).json
    assert refused["error"]["code"] == "forbidden" and KEY not in json.dumps(refused)
    assert client.get(path, token=admin).json["secret_variables"] == ["API_KEY"]
    plain = client.patch(path, token=admin, expect=200, json_body={  # sent back masked: its value, now plain
        "variables": {"API_KEY": "***", "MODE": "production"}, "secret_variables": []}).json
    assert plain["variables"] == {"API_KEY": KEY, "MODE": "production"} and plain["secret_variables"] == []
    again = client.patch(path, token=admin, expect=200, json_body={"secret_variables": ["API_KEY"]}).json
    assert again["variables"]["API_KEY"] == "***"
    assert client.patch(path, token=admin, expect=200, json_body={"secret_variables": []}).json["variables"][
        "API_KEY"] == KEY


@pytest.mark.parametrize("body, field", [
    ({"variables": {"MODE": "x"}, "secret_variables": ["API_KEY"]}, "secret_variables"),
    ({"secret_variables": ["API_KEY"]}, "secret_variables"),
    ({"variables": {"API_KEY": "x"}, "secret_variables": "API_KEY"}, "secret_variables"),
    ({"variables": {"API_KEY": "x"}, "secret_variables": [7]}, "secret_variables.0"),
    ({"variables": {"1ST": "x"}}, "variables"),
    ({"variables": {"A-B": "x"}}, "variables"),
    ({"variables": {"A": "x\u0000y"}}, "variables.A"),
])
def test_variables_and_secret_variables_422(panel, store, clock, body, field):
    client, acme, admin, _ = panel
    refused = _create(client, admin, acme, expect=422, **body)
    assert refused["error"]["code"] == "validation_error" and field in refused["error"]["fields"], refused
    service_id = _settled(store, clock, _create(client, admin, acme, name="settled"))
    refused = client.patch(f"/api/services/{service_id}", token=admin, expect=422, json_body=body).json
    assert field in refused["error"]["fields"], refused
    assert client.get(f"/api/services/{service_id}", token=admin).json["variables"] == {}


def test_secret_variables_of_compose_and_template_services(panel, store, clock):
    client, acme, admin, _ = panel
    compose = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "web", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE,
        "variables": {"GREETING": "hush"}, "secret_variables": ["GREETING"]}).json
    compose = client.get(f"/api/services/{compose['id']}", token=admin, expect=200).json
    assert compose["variables"] == {"GREETING": "***"} and compose["compose"] == COMPOSE
    assert client.get(f"/api/services/{compose['id']}/secrets", token=admin).json == {"secrets": {"GREETING": "hush"}}
    db = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "db", "customer_id": acme.id, "deploy_method": "template", "template_id": "postgres",
        "variables": {"POSTGRES_DB": "shop"}, "secret_variables": ["POSTGRES_DB"]}).json
    assert client.get(f"/api/services/{db['id']}", token=admin).json["secret_variables"] == [
        "POSTGRES_DB", "POSTGRES_PASSWORD"]
    # the template's own secret stays secret whatever secret_variables says
    path = f"/api/services/{_settled(store, clock, db)}"
    password = client.get(f"{path}/secrets", token=admin).json["secrets"]["POSTGRES_PASSWORD"]
    after = client.patch(path, token=admin, expect=200, json_body={"secret_variables": []}).json
    assert after["secret_variables"] == ["POSTGRES_PASSWORD"] and after["variables"]["POSTGRES_DB"] == "shop"
    assert client.get(f"{path}/secrets", token=admin).json["secrets"] == {"POSTGRES_PASSWORD": password}
