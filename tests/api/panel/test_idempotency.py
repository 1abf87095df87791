"""Panel API: ``Idempotency-Key`` (app/http/idempotency.py). The same POST twice, one
after the other and at once, makes one customer or service and gets identical answers
(the repeats marked ``Idempotent-Replayed: true``); another body or path with the key is
409 ``conflict``; another API key, or a browser session, with the key is a new request;
bad keys are 400; error answers are kept; the sign-in (no credentials) ignores the header.
Services are created without an engine (the deploy worker is off: the job stays queued).
Answers are held to the contract."""
from __future__ import annotations

import pytest
import yaml
from cryptography.exceptions import InvalidTag

from app.http.idempotency import Seal
from core.panel import access, customers as panel_customers
from ports import hookimpl
from ports.extensions import AuthSource, Identity
from tests.support.api import idempotency_rows, send_at_once
from tests.support.contract_client import ContractClient

KEY = "deploy-2026-11-02"
XRW = {"X-Requested-With": "slipway"}


@pytest.fixture
def setup(make_app, store, clock):
    """``(client, acme, key)``: ``key()`` mints an admin key and returns its secret."""
    client = ContractClient(make_app(rate_deploy_rpm=100_000))  # the deploy tier is not under test
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")

    def key():
        return access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)[1]

    return client, acme, key


def _service(acme, name="app"):
    return {"name": name, "customer_id": acme.id, "deploy_method": "compose", "compose": "services:\n  a: {image: x}\n"}


OPERATIONS = {  # operation: (path, body, the list's path)
    "customer": ("/api/customers", lambda acme: {"name": "Idem GmbH"}, "/api/customers"),
    "service": ("/api/services", _service, "/api/services"),
}


@pytest.fixture(params=sorted(OPERATIONS))
def operation(request, setup):
    client, acme, key = setup
    secret = key()
    path, body_of, listing = OPERATIONS[request.param]
    return client, secret, path, body_of(acme), lambda: client.get(listing, token=secret, expect=200).json["total"]


def _post(client, secret, path, body, key=KEY, headers=None, **kw):
    return client.post(path, token=secret, json_body=body, headers={"Idempotency-Key": key, **(headers or {})}, **kw)


def test_a_repeat_gets_the_first_answer_and_makes_nothing(operation):
    client, secret, path, body, count = operation
    before = count()
    first = _post(client, secret, path, body, expect=201)
    assert "idempotent-replayed" not in first.headers
    again = _post(client, secret, path, body, expect=201)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content and again.headers["content-type"] == first.headers["content-type"]
    assert count() == before + 1


def test_repeats_sent_at_once_make_one_resource(operation, store):
    client, secret, path, body, count = operation
    before = count()
    answers = send_at_once(client, "POST", path, 8, token=secret, json_body=body, headers={"Idempotency-Key": KEY})
    created = [a for a in answers if a.status_code == 201]
    assert len([a for a in created if "idempotent-replayed" not in a.headers]) == 1
    assert len({a.content for a in created}) == 1
    for answer in answers:
        if answer.status_code != 201:  # still running when it came
            assert answer.status_code == 409 and answer.json["error"]["code"] == "conflict", answer.text
    again = _post(client, secret, path, body, expect=201)
    assert again.content == created[0].content and again.headers["idempotent-replayed"] == "true"
    assert count() == before + 1 and idempotency_rows(store) == 1


def test_another_body_or_path_with_the_key_is_409(setup):
    client, acme, key = setup
    secret = key()
    _post(client, secret, "/api/customers", {"name": "A"}, expect=201)
    for path, body in (("/api/customers", {"name": "B"}), ("/api/services", _service(acme))):
        refused = _post(client, secret, path, body, expect=409)
        assert refused.json["error"]["code"] == "conflict" and "Idempotency-Key" in refused.json["error"]["message"]
    assert client.get("/api/services", token=secret).json["total"] == 0
    assert sorted(c["name"] for c in client.get("/api/customers", token=secret).json["data"]) == ["A", "Acme"]


def test_another_key_or_a_session_with_the_same_key_is_a_new_request(setup):
    client, acme, key = setup
    first_key, second_key = key(), key()
    first = _post(client, first_key, "/api/services", _service(acme, "one"), expect=201)
    other = _post(client, second_key, "/api/services", _service(acme, "two"), expect=201)
    assert "idempotent-replayed" not in other.headers and other.json["id"] != first.json["id"]
    # a browser session opened with the first key is a credential of its own
    signed_in = client.post("/api/auth/key", json_body={"key": first_key}, headers=XRW, expect=204)
    cookie = {"Cookie": f"slipway_session={signed_in.cookies['slipway_session'].value}", **XRW}
    by_session = client.post("/api/services", json_body=_service(acme, "three"),
                             headers={"Idempotency-Key": KEY, **cookie}, expect=201)
    assert "idempotent-replayed" not in by_session.headers
    again = client.post("/api/services", json_body=_service(acme, "three"), headers={"Idempotency-Key": KEY, **cookie},
                        expect=201)
    assert again.headers["idempotent-replayed"] == "true" and again.content == by_session.content
    assert client.get("/api/services", token=first_key).json["total"] == 3


@pytest.mark.parametrize("key, problem", [("", "must not be empty"), ("k" * 256, "at most 255"),
                                          ("new\x7fline", "printable ASCII"), ("caf\u00e9", "printable ASCII")])
def test_bad_keys_are_400_and_run_nothing(setup, store, key, problem):
    client, acme, make_key = setup
    secret = make_key()
    refused = _post(client, secret, "/api/services", _service(acme), key=key, expect=400)
    assert refused.json["error"]["code"] == "bad_request"
    assert problem in refused.json["error"]["fields"]["Idempotency-Key"]
    assert client.get("/api/services", token=secret).json["total"] == 0 and idempotency_rows(store) == 0


def test_an_error_answer_is_kept_and_replayed(setup):
    client, acme, key = setup
    secret = key()
    body = {**_service(acme), "customer_id": "cust_nope"}
    first = _post(client, secret, "/api/services", body, expect=422)
    again = _post(client, secret, "/api/services", body, expect=422)
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert again.json["error"]["code"] == "validation_error"


def test_an_action_without_a_body_is_idempotent_too(setup):
    """``POST /api/services/{id}/redeploy`` of a deploying service is 409 (kept), and the
    key then belongs to that path: a create with it is refused."""
    client, acme, key = setup
    secret = key()
    created = _post(client, secret, "/api/services", _service(acme), key="create", expect=201).json
    first = _post(client, secret, f"/api/services/{created['id']}/redeploy", None, expect=409)
    again = _post(client, secret, f"/api/services/{created['id']}/redeploy", None, expect=409)
    assert again.headers["idempotent-replayed"] == "true" and again.content == first.content


def test_the_sign_in_ignores_the_header(setup):
    client, _, key = setup
    secret = key()
    for value in ("", KEY, KEY):
        signed_in = client.post("/api/auth/key", json_body={"key": secret}, headers={"Idempotency-Key": value, **XRW},
                                expect=204)
        assert "idempotent-replayed" not in signed_in.headers


def test_a_get_ignores_the_header(setup):
    client, _, key = setup
    secret = key()
    for value in (KEY, ""):
        listed = client.get("/api/customers", token=secret, headers={"Idempotency-Key": value}, expect=200)
        assert "idempotent-replayed" not in listed.headers


def test_the_served_contract_gives_every_post_the_header(setup):
    client, _, key = setup
    served = yaml.safe_load(client.get("/api/openapi.yaml", token=key()).text)
    for path, item in served["paths"].items():
        for method, op in ((m, op) for m, op in item.items() if m in ("get", "post", "patch", "delete")):
            names = [p.get("$ref") for p in op.get("parameters", [])]
            keyed = method == "post" and op.get("security") != []  # the sign-in and logout ignore it
            assert ("#/components/parameters/IdempotencyKey" in names) == keyed, (method, path)
            if keyed:
                assert {"400", "409"} <= set(op["responses"]), path
    assert "IdempotencyKey" not in str(served["paths"]["/api/auth/key"]["post"])


def test_a_kept_answer_is_sealed_with_the_credentials_secret(setup, store):
    """A new API key's secret, kept for the repeat, is not in the database in the clear
    (sealed with the caller's key, or its session's cookie)."""
    client, _, key = setup
    secret = key()
    body = {"name": "ci", "role": "viewer", "rateLimitRpm": 60}
    created = _post(client, secret, "/api/v1/api-keys", body, expect=201)
    with store.db.connection_context():
        kept = [bytes(row.body) for row in store.models.IdempotencyKey.select()]
    assert len(kept) == 1 and created.json["key"].encode() not in kept[0]
    again = _post(client, secret, "/api/v1/api-keys", body, expect=201)
    assert again.headers["idempotent-replayed"] == "true" and again.content == created.content
    signed_in = client.post("/api/auth/key", json_body={"key": secret}, headers=XRW, expect=204)
    cookie = {"Cookie": f"slipway_session={signed_in.cookies['slipway_session'].value}", **XRW}
    by_session = client.post("/api/v1/api-keys", json_body=body, headers={"Idempotency-Key": KEY, **cookie},
                             expect=201)
    replayed = client.post("/api/v1/api-keys", json_body=body, headers={"Idempotency-Key": KEY, **cookie},
                           expect=201)
    assert replayed.headers["idempotent-replayed"] == "true" and replayed.content == by_session.content


class _Proxy:
    """A plugin whose auth source signs in whoever a trusted proxy's ``X-User`` header
    names, as an admin: nothing the caller presents is a secret."""

    @hookimpl
    def register_auth_sources(self):
        def authenticate(request, context):
            user = request.headers.get("x-user")
            return Identity(subject=user, role="admin") if user else None

        return [AuthSource(name="proxy", authenticate=authenticate)]


def test_a_source_callers_kept_answer_is_sealed_with_the_servers_key(make_app, store):
    """An auth source's caller presents no secret of its own: the new key kept for its
    repeat opens with a key derived from the server's key, not with one anybody can
    derive from the (public) header or from nothing."""
    server_key = b"k" * 32
    client = ContractClient(make_app(plugins=(_Proxy(),), secret_key=server_key))
    body = {"name": "ci", "role": "viewer", "rateLimitRpm": 60}
    headers = {"Idempotency-Key": KEY, "X-User": "alice"}
    created = client.post("/api/v1/api-keys", json_body=body, headers=headers, expect=201)
    again = client.post("/api/v1/api-keys", json_body=body, headers=headers, expect=201)
    assert again.headers["idempotent-replayed"] == "true" and again.content == created.content
    with store.db.connection_context():
        kept = bytes(store.models.IdempotencyKey.get().body)
    assert created.json["key"].encode() not in kept
    for guess in ("", "alice", "Bearer alice"):
        with pytest.raises(InvalidTag):
            Seal(guess, "source:proxy:alice", KEY).open(kept)
    # another subject is another credential: its key is a new request
    other = client.post("/api/v1/api-keys", json_body=body, headers={**headers, "X-User": "bob"}, expect=201)
    assert "idempotent-replayed" not in other.headers and other.json["key"] != created.json["key"]


def test_without_a_server_key_a_source_callers_answers_are_not_kept(make_app, store):
    client = ContractClient(make_app(plugins=(_Proxy(),)))
    body = {"name": "ci", "role": "viewer", "rateLimitRpm": 60}
    headers = {"Idempotency-Key": KEY, "X-User": "alice"}
    first = client.post("/api/v1/api-keys", json_body=body, headers=headers, expect=201)
    second = client.post("/api/v1/api-keys", json_body=body, headers=headers, expect=201)
    assert first.json["key"] != second.json["key"] and "idempotent-replayed" not in second.headers
    assert idempotency_rows(store) == 0
