"""Secret template variables without an engine: generated, stored encrypted (the row holds
ciphertext, not the value), masked in every answer, read through
``GET /api/services/{id}/secrets`` with ``services:secrets`` only (admin and customer
roles, a customer's own services only), kept by a PATCH that sends ``***`` back or leaves
them out, replaced by one that sends a value; and ``customer_network`` with its refusals
and ``connections``. Real SQLite or PostgreSQL, in process."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.storage.secrets import SecretBox, UnreadableSecrets
from core.panel import access, customers as panel_customers

COMPOSE = "services:\n  web:\n    image: localhost/busybox:latest\n    ports: ['8080']\n"


@pytest.fixture
def setup(client, store, clock):
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")

    def key(role, **kw):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000, **kw)[1]

    return client, acme, other, key("admin"), key


def _postgres(client, token, customer, name="db", **body):
    return client.post("/api/services", token=token, expect=201, json_body={
        "name": name, "customer_id": customer.id, "deploy_method": "template", "template_id": "postgres", **body}).json


def _settled(store, clock, created) -> str:
    """The service as its deploy leaves it (running; a PATCH is 409 while it deploys)."""
    with store.uow() as uow:
        uow.services.update(replace(uow.services.get(created["id"]), status="running"))
        uow.deploy_jobs.finish(created["deploy_job_id"], "succeeded", None, clock.now())
        uow.commit()
    return created["id"]


def _answers(client, token, service_id) -> str:
    """Every answer about the service a key may read, but /secrets, as one text."""
    paths = [f"/api/services/{service_id}", "/api/services", f"/api/services/{service_id}/events",
             f"/api/services/{service_id}/releases", f"/api/services/{service_id}/deploys"]
    return " ".join(json.dumps(client.get(path, token=token, expect=200).json) for path in paths)


def test_a_generated_password_is_stored_encrypted_and_shown_only_by_secrets(setup, store):
    client, acme, _, admin, key = setup
    created = _postgres(client, admin, acme)
    detail = client.get(f"/api/services/{created['id']}", token=admin, expect=200).json
    assert detail["variables"]["POSTGRES_PASSWORD"] == "***" and detail["variables"]["POSTGRES_DB"] == "app"
    secrets = client.get(f"/api/services/{created['id']}/secrets", token=admin, expect=200).json["secrets"]
    password = secrets["POSTGRES_PASSWORD"]
    assert list(secrets) == ["POSTGRES_PASSWORD"] and len(password) == 32 and password != "***"
    with store.uow(write=False) as uow:  # in the clear for a deploy
        assert uow.services.get(created["id"]).variables["POSTGRES_PASSWORD"] == password
    S = store.models.Service
    row = S.get(S.id == created["id"])
    assert password not in row.variables and password not in (row.secret_values or "")
    assert row.secret_values.startswith("v1:") and json.loads(row.variables)["POSTGRES_PASSWORD"] == "***"
    assert password not in _answers(client, admin, created["id"])
    customer = key("customer", customer_id=acme.id)
    assert client.get(f"/api/services/{created['id']}/secrets", token=customer, expect=200).json["secrets"] == secrets
    another = _postgres(client, admin, acme, name="db2")  # each service its own password
    assert client.get(f"/api/services/{another['id']}/secrets", token=admin).json["secrets"]["POSTGRES_PASSWORD"] \
        != password


def test_a_given_password_is_kept_and_a_service_without_secrets_answers_none(setup):
    client, acme, _, admin, _ = setup
    created = _postgres(client, admin, acme, variables={"POSTGRES_PASSWORD": "chosen 'one'"})
    assert client.get(f"/api/services/{created['id']}/secrets", token=admin).json == {
        "secrets": {"POSTGRES_PASSWORD": "chosen 'one'"}}
    plain = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "plain", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}).json
    assert client.get(f"/api/services/{plain['id']}/secrets", token=admin, expect=200).json == {"secrets": {}}


def test_who_reads_secrets(setup):
    client, acme, other, admin, key = setup
    created = _postgres(client, admin, acme)
    path = f"/api/services/{created['id']}/secrets"
    viewer = key("viewer")
    assert client.get(path, token=viewer, expect=403).json["error"]["code"] == "forbidden"
    assert client.get(f"/api/services/{created['id']}", token=viewer, expect=200).json["variables"][
        "POSTGRES_PASSWORD"] == "***"
    stranger = key("customer", customer_id=other.id)
    assert client.get(path, token=stranger, expect=404).json["error"]["code"] == "not_found"
    assert client.get(f"/api/services/{created['id']}", token=stranger, expect=404)
    denied = key("admin", denied_permissions=["services:secrets"])
    client.get(path, token=denied, expect=403)
    client.get("/api/services/svc_0000000000000000/secrets", token=admin, expect=404)
    client.get(path, expect=401)


def test_a_patch_keeps_a_masked_or_missing_secret_and_replaces_a_given_one(setup, store, clock):
    client, acme, _, admin, _ = setup
    path = f"/api/services/{_settled(store, clock, _postgres(client, admin, acme))}"
    first = client.get(f"{path}/secrets", token=admin).json["secrets"]["POSTGRES_PASSWORD"]
    detail = client.patch(path, token=admin, expect=200, json_body={
        "variables": {"POSTGRES_PASSWORD": "***", "POSTGRES_DB": "shop"}}).json
    assert detail["variables"] == {"IMAGE": "docker.io/library/postgres:16", "POSTGRES_DB": "shop",
                                   "POSTGRES_PASSWORD": "***"}
    assert client.get(f"{path}/secrets", token=admin).json["secrets"]["POSTGRES_PASSWORD"] == first
    client.patch(path, token=admin, expect=200, json_body={"variables": {"POSTGRES_DB": "shop2"}})
    assert client.get(f"{path}/secrets", token=admin).json["secrets"]["POSTGRES_PASSWORD"] == first
    changed = client.patch(path, token=admin, expect=200, json_body={"variables": {"POSTGRES_PASSWORD": "n3w"}}).json
    assert changed["variables"]["POSTGRES_PASSWORD"] == "***" and "n3w" not in json.dumps(changed)
    assert client.get(f"{path}/secrets", token=admin).json["secrets"] == {"POSTGRES_PASSWORD": "n3w"}


def test_another_key_does_not_decrypt(store, clock):
    """A value sealed for one row does not open with another key, nor for another row."""
    box = SecretBox(b"k" * 32)
    sealed = box.seal({"P": "v"}, "svc_a")
    assert box.open(sealed, "svc_a") == {"P": "v"} and box.seal({}, "svc_a") is None
    with pytest.raises(UnreadableSecrets):
        SecretBox(b"x" * 32).open(sealed, "svc_a")
    with pytest.raises(UnreadableSecrets):
        box.open(sealed, "svc_b")


def test_releases_keep_secrets_encrypted_and_masked(setup, store, clock):
    from core.panel.releases import new_release

    client, acme, _, admin, _ = setup
    created = _postgres(client, admin, acme)
    with store.uow() as uow:
        service = uow.services.get(created["id"])
        job = uow.deploy_jobs.get(created["deploy_job_id"])
        release = new_release(uow, clock, service, job, [])
        uow.commit()
    password = service.variables["POSTGRES_PASSWORD"]
    with store.uow(write=False) as uow:
        kept = uow.releases.get(release.id)
    assert kept.variables == service.variables and kept.secrets == ("POSTGRES_PASSWORD",)
    R = store.models.Release
    assert password not in R.get(R.id == release.id).variables
    listed = client.get(f"/api/services/{created['id']}/releases", token=admin, expect=200).json
    assert listed["data"][0]["variables"]["POSTGRES_PASSWORD"] == "***" and password not in json.dumps(listed)


@pytest.mark.parametrize("value", ["yes", 1, None, [], {}])
def test_customer_network_must_be_a_boolean(setup, store, clock, value):
    client, acme, _, admin, _ = setup
    refused = client.post("/api/services", token=admin, json_body={
        "name": "db", "customer_id": acme.id, "deploy_method": "template", "template_id": "redis",
        "customer_network": value})
    assert refused.status_code == 422, refused.text
    created = _postgres(client, admin, acme)
    _settled(store, clock, created)
    patched = client.patch(f"/api/services/{created['id']}", token=admin, json_body={"customer_network": value})
    assert patched.status_code == 422, patched.text
    assert client.get(f"/api/services/{created['id']}", token=admin).json["customer_network"] is False


def test_customer_network_and_connections(setup, store, clock):
    client, acme, other, admin, key = setup
    created = _postgres(client, admin, acme, customer_network=True)
    _settled(store, clock, created)
    detail = client.get(f"/api/services/{created['id']}", token=admin, expect=200).json
    assert detail["customer_network"] is True
    assert detail["connections"] == [{"component": "db", "host": "db", "port": 5432}]
    with store.uow(write=False) as uow:
        assert uow.services.on_customer_network(acme.id) == 1 and uow.services.on_customer_network(other.id) == 0
    wordpress = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "blog", "customer_id": acme.id, "deploy_method": "template", "template_id": "wordpress",
        "customer_network": True}).json
    connections = client.get(f"/api/services/{wordpress['id']}", token=admin).json["connections"]
    # the component that publishes a port answers as the service's name (its db publishes none)
    assert connections == [{"component": "web", "host": "blog", "port": 80}]
    off = client.patch(f"/api/services/{created['id']}", token=admin, expect=200,
                       json_body={"customer_network": False}).json
    assert off["customer_network"] is False and off["connections"] == []
    customer = key("customer", customer_id=acme.id)
    on = client.patch(f"/api/services/{created['id']}", token=customer, expect=200,
                      json_body={"customer_network": True}).json
    assert on["connections"] == [{"component": "db", "host": "db", "port": 5432}]
    plain = _postgres(client, admin, acme, name="quiet")
    assert client.get(f"/api/services/{plain['id']}", token=admin).json["connections"] == []


def test_the_key_setting(tmp_path, monkeypatch):
    """SLIPWAY_SECRET_KEY or the key file init writes; missing or invalid: a clear ConfigError."""
    from app.cli.main import run
    from app.config import Config, ConfigError
    from app.storage.secrets import KEY_FILE, new_key, parse_key

    work = tmp_path / "work"
    bare = {"SLIPWAY_WORK_DIR": str(work), "SLIPWAY_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    missing = Config.from_env(bare)
    assert missing.secret_key is None
    with pytest.raises(ConfigError, match="SLIPWAY_SECRET_KEY"):
        missing.require_secret_key()
    with pytest.raises(ConfigError, match="SLIPWAY_SECRET_KEY must be 32 random bytes"):
        Config.from_env({**bare, "SLIPWAY_SECRET_KEY": "short"})
    status, document = run(["init"], environ=bare)
    assert status == 0 and document["secretKeyFile"] == str(work / KEY_FILE)
    assert (work / KEY_FILE).stat().st_mode & 0o777 == 0o600
    key = Config.from_env(bare).secret_key
    assert len(key) == 32 and key == parse_key((work / KEY_FILE).read_text(), "file")
    assert "secretKeyFile" not in run(["init"], environ=bare)[1]  # kept, never replaced
    assert Config.from_env(bare).secret_key == key
    given = new_key()
    assert Config.from_env({**bare, "SLIPWAY_SECRET_KEY": given}).secret_key == parse_key(given, "x")
    (work / KEY_FILE).write_text("not a key\n")
    with pytest.raises(ConfigError, match="secret key file"):
        Config.from_env(bare)


def test_rows_sealed_with_another_key_are_refused_not_shown(setup, store):
    """A store opened with another key cannot read the secrets: an error, never ciphertext as a value."""
    client, acme, _, admin, _ = setup
    created = _postgres(client, admin, acme)
    store.use_secret_key(b"o" * 32)
    with pytest.raises(UnreadableSecrets):
        with store.uow(write=False) as uow:
            uow.services.get(created["id"])
