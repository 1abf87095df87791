"""Deploy keys without an engine: made (Ed25519, the fingerprint ``ssh-keygen -l``
prints), listed, read and deleted; every refusal (401, 403, 404, 422, 409 while a
service names the key); ``deploy_key_id`` on service create and PATCH (a key of the
service's customer only); the private half in no answer and not in the clear in its
row. Real SQLite or PostgreSQL, in process."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives import serialization

from core.panel import access
from core.panel import customers as panel_customers

REPO = "ssh://git@127.0.0.1:2222/srv/site.git"


@pytest.fixture
def setup(panel, store, clock):
    """(client, acme, other, admin secret, key(role, **kw) -> secret)."""
    make, acme, admin = panel
    client, _ = make(SLIPWAY_GIT_ALLOW_PRIVATE="1")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")

    def key(role, **kw):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000, **kw)[1]

    return client, acme, other, admin, key


def _make(client, token, customer=None, name="deploy", expect=201):
    body = {"name": name, **({"customer_id": customer.id} if customer is not None else {})}
    return client.post("/api/deploy-keys", token=token, json_body=body, expect=expect).json


def _git(client, token, customer, name="site", expect=201, **body):
    return client.post("/api/services", token=token, expect=expect, json_body={
        "name": name, "customer_id": customer.id, "deploy_method": "git", "git_url": REPO, **body})


def _settled(store, clock, created) -> str:
    """The service as its deploy leaves it (running; a PATCH is 409 while it deploys)."""
    with store.uow() as uow:
        uow.services.update(replace(uow.services.get(created["id"]), status="running"))
        uow.deploy_jobs.finish(created["deploy_job_id"], "succeeded", None, clock.now())
        uow.commit()
    return created["id"]


def _field_error(answer, field: str) -> str:
    assert answer.status_code == 422, answer.text
    error = answer.json["error"]
    assert error["code"] == "validation_error" and field in error["fields"], error
    return error["fields"][field]


def _private_body(text: str) -> str:
    """The base64 body of an OpenSSH private key, on one line."""
    return "".join(line for line in text.splitlines() if line and not line.startswith("-----"))


def test_a_key_is_made_listed_read_and_deleted(setup, store, clock, tmp_path):
    client, acme, other, admin, key = setup
    made = _make(client, admin, acme, name="GitHub deploy key")
    assert made["id"].startswith("dk_") and made["name"] == "GitHub deploy key"
    assert made["customer_id"] == acme.id and made["created_at"].endswith("Z")
    assert made["public_key"].startswith("ssh-ed25519 ") and made["public_key"].endswith(f" slipway-{made['id']}")
    assert set(made) == {"id", "name", "customer_id", "public_key", "fingerprint", "created_at"}
    if shutil.which("ssh-keygen"):  # the fingerprint ssh-keygen prints for the public key
        (tmp_path / "key.pub").write_text(made["public_key"] + "\n")
        printed = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "key.pub")], check=True, capture_output=True,
                                 text=True).stdout.split()
        assert printed[0] == "256" and printed[1] == made["fingerprint"] and printed[-1] == "(ED25519)"
    assert made["fingerprint"].startswith("SHA256:") and len(made["fingerprint"]) == 7 + 43
    # the private half stored is the pair of the public half answered
    with store.uow(write=False) as uow:
        private = uow.deploy_keys.private_key(made["id"])
    loaded = serialization.load_ssh_private_key(private.text.encode(), password=None)
    public = loaded.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert made["public_key"].startswith(public.decode() + " ")
    assert made["id"] in repr(private) and _private_body(private.text) not in repr(private)

    clock.advance(1)
    second = _make(client, admin, acme, name="second")
    clock.advance(1)
    theirs = _make(client, admin, other, name="theirs")
    assert second["public_key"] != made["public_key"]
    listed = client.get("/api/deploy-keys", token=admin, expect=200).json
    assert [k["id"] for k in listed["data"]] == [made["id"], second["id"], theirs["id"]] and listed["total"] == 3
    only = client.get("/api/deploy-keys", token=admin, params={"customer_id": other.id}, expect=200).json
    assert [k["id"] for k in only["data"]] == [theirs["id"]]
    paged = client.get("/api/deploy-keys", token=admin, params={"per_page": 1, "page": 2}, expect=200).json
    assert [k["id"] for k in paged["data"]] == [second["id"]] and paged["total"] == 3
    assert client.get(f"/api/deploy-keys/{made['id']}", token=admin, expect=200).json == made

    # a customer's key sees and makes its own customer's keys
    acme_key = key("customer", customer_id=acme.id)
    mine = client.get("/api/deploy-keys", token=acme_key, expect=200).json
    assert [k["id"] for k in mine["data"]] == [made["id"], second["id"]]
    assert client.get("/api/deploy-keys", token=acme_key, params={"customer_id": other.id}).json["total"] == 0
    own = _make(client, acme_key, name="own")  # customer_id left out: its own
    assert own["customer_id"] == acme.id
    client.delete(f"/api/deploy-keys/{own['id']}", token=acme_key, expect=204)

    client.delete(f"/api/deploy-keys/{made['id']}", token=admin, expect=204)
    client.get(f"/api/deploy-keys/{made['id']}", token=admin, expect=404)
    with store.uow(write=False) as uow:
        assert uow.deploy_keys.private_key(made["id"]) is None  # the private half went with it


def test_the_private_half_is_in_no_answer_and_not_in_the_clear_in_its_row(setup, store, clock):
    client, acme, _, admin, _ = setup
    answers = []
    made = _make(client, admin, acme)
    answers.append(json.dumps(made))
    created = _git(client, admin, acme, deploy_key_id=made["id"]).json
    service_id = _settled(store, clock, created)
    answers.append(json.dumps(created))
    for path in ("/api/deploy-keys", f"/api/deploy-keys/{made['id']}", f"/api/services/{service_id}",
                 "/api/services", f"/api/services/{service_id}/events", f"/api/services/{service_id}/deploys"):
        answers.append(client.get(path, token=admin, expect=200).text)
    answers.append(client.patch(f"/api/services/{service_id}", token=admin, json_body={"deploy_key_id": None},
                                expect=200).text)
    answers.append(client.delete(f"/api/deploy-keys/{made['id']}", token=admin, expect=204).text)
    # a second key, to read its row (the first is gone)
    kept = _make(client, admin, acme, name="kept")
    with store.uow(write=False) as uow:
        text = uow.deploy_keys.private_key(kept["id"]).text
    body = _private_body(text)
    assert text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and len(body) > 200
    everything = " ".join(answers) + json.dumps(kept)
    assert body not in everything
    assert not any(line in everything for line in text.splitlines()[1:-1])
    K = store.models.DeployKey
    row = K.get(K.id == kept["id"])
    assert row.private_key.startswith("v1:") and body not in row.private_key
    assert not any(line in row.private_key for line in text.splitlines()[1:-1])


def test_refusals(setup):
    client, acme, other, admin, key = setup
    made = _make(client, admin, acme)
    theirs = _make(client, admin, other, name="theirs")
    path = f"/api/deploy-keys/{made['id']}"
    # 401: no key, a wrong key
    for method, url in (("GET", "/api/deploy-keys"), ("POST", "/api/deploy-keys"), ("GET", path),
                        ("DELETE", path)):
        client.request(method, url, json_body={"name": "x"} if method == "POST" else None, expect=401)
        client.request(method, url, token="slw_nope_nope", json_body={"name": "x"} if method == "POST" else None,
                       expect=401)
    # 403: without services:deploy (a viewer; a customer key denied it)
    for token in (key("viewer"), key("customer", customer_id=acme.id, denied_permissions=["services:deploy"])):
        client.get("/api/deploy-keys", token=token, expect=403)
        client.post("/api/deploy-keys", token=token, json_body={"name": "x", "customer_id": acme.id}, expect=403)
        client.get(path, token=token, expect=403)
        client.delete(path, token=token, expect=403)
    acme_key = key("customer", customer_id=acme.id)
    # 403: a customer's key making a key for another customer
    refused = client.post("/api/deploy-keys", token=acme_key, json_body={"name": "x", "customer_id": other.id},
                          expect=403)
    assert refused.json["error"]["code"] == "forbidden"
    # 404: unknown; another customer's key as a customer's key sees it (as its services)
    client.get("/api/deploy-keys/dk_0000000000000000", token=admin, expect=404)
    client.delete("/api/deploy-keys/dk_0000000000000000", token=admin, expect=404)
    client.get(f"/api/deploy-keys/{theirs['id']}", token=acme_key, expect=404)
    client.delete(f"/api/deploy-keys/{theirs['id']}", token=acme_key, expect=404)
    client.get(f"/api/deploy-keys/{theirs['id']}", token=admin, expect=200)  # still there
    # 400: a page out of range
    client.get("/api/deploy-keys", token=admin, params={"page": 0}, expect=400)
    # 422: the name, the customer, unknown fields
    for name in ("", "   ", "x" * 101, "tab\there", 7, None):
        answer = client.post("/api/deploy-keys", token=admin, json_body={"name": name, "customer_id": acme.id})
        _field_error(answer, "name")
    assert "no such customer" in _field_error(client.post("/api/deploy-keys", token=admin, json_body={
        "name": "x", "customer_id": "cus_nope"}), "customer_id")
    _field_error(client.post("/api/deploy-keys", token=admin, json_body={"name": "x"}), "customer_id")
    assert client.post("/api/deploy-keys", token=admin, json_body={"name": "x", "customer_id": acme.id,
                                                                   "private_key": "mine"}).status_code == 422
    assert client.get("/api/deploy-keys", token=admin).json["total"] == 2  # nothing made by a refusal


def test_a_service_names_a_key_of_its_own_customer_only(setup, store, clock):
    client, acme, other, admin, key = setup
    mine = _make(client, admin, acme)
    theirs = _make(client, admin, other, name="theirs")
    # create: another customer's key, an unknown one, a method without a repository
    for bad in (theirs["id"], "dk_0000000000000000"):
        answer = _git(client, admin, acme, deploy_key_id=bad, expect=None)
        assert "no deploy key of the service's customer" in _field_error(answer, "deploy_key_id")
    acme_key = key("customer", customer_id=acme.id)
    _field_error(_git(client, acme_key, acme, deploy_key_id=theirs["id"], expect=None), "deploy_key_id")
    compose = client.post("/api/services", token=admin, json_body={
        "name": "plain", "customer_id": acme.id, "deploy_method": "compose", "deploy_key_id": mine["id"],
        "compose": "services:\n  web:\n    image: localhost/busybox:latest\n"})
    assert "no deploy key" in _field_error(compose, "deploy_key_id")
    assert client.get("/api/services", token=admin).json["total"] == 0  # nothing made by a refusal
    # a service of its own customer's key; the detail shows it
    created = _git(client, acme_key, acme, deploy_key_id=mine["id"]).json
    service_id = _settled(store, clock, created)
    assert client.get(f"/api/services/{service_id}", token=admin).json["deploy_key_id"] == mine["id"]
    plain = _settled(store, clock, _git(client, admin, acme, name="plain-git").json)
    assert client.get(f"/api/services/{plain}", token=admin).json["deploy_key_id"] is None
    # PATCH: another customer's key is 422 and changes nothing; null clears; its own sets
    for bad in (theirs["id"], "dk_0000000000000000", 5):
        answer = client.patch(f"/api/services/{service_id}", token=admin, json_body={"deploy_key_id": bad})
        _field_error(answer, "deploy_key_id")
    assert client.get(f"/api/services/{service_id}", token=admin).json["deploy_key_id"] == mine["id"]
    cleared = client.patch(f"/api/services/{service_id}", token=acme_key, json_body={"deploy_key_id": None},
                           expect=200).json
    assert cleared["deploy_key_id"] is None
    again = client.patch(f"/api/services/{plain}", token=acme_key, json_body={"deploy_key_id": mine["id"]},
                         expect=200).json
    assert again["deploy_key_id"] == mine["id"]
    with store.uow(write=False) as uow:
        assert uow.services.get(plain).deploy_key_id == mine["id"]


def test_deleting_a_key_a_service_names_is_409_naming_it(setup, store, clock):
    client, acme, _, admin, _ = setup
    made = _make(client, admin, acme)
    created = _git(client, admin, acme, deploy_key_id=made["id"]).json
    service_id = _settled(store, clock, created)
    refused = client.delete(f"/api/deploy-keys/{made['id']}", token=admin, expect=409)
    assert refused.json["error"]["code"] == "conflict" and f"{service_id} (site)" in refused.json["error"]["message"]
    client.get(f"/api/deploy-keys/{made['id']}", token=admin, expect=200)
    client.patch(f"/api/services/{service_id}", token=admin, json_body={"deploy_key_id": None}, expect=200)
    client.delete(f"/api/deploy-keys/{made['id']}", token=admin, expect=204)


def test_a_customers_keys_go_with_the_customer(setup, store):
    client, _, other, admin, _ = setup
    theirs = _make(client, admin, other, name="theirs")
    client.delete(f"/api/customers/{other.id}", token=admin, expect=204)
    with store.uow(write=False) as uow:
        assert uow.deploy_keys.get(theirs["id"]) is None
