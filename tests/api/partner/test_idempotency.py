"""Partner API: ``Idempotency-Key`` (app/http/idempotency.py). The same POST twice, one
after the other and at once, makes one resource and gets identical answers (the repeats
marked ``Idempotent-Replayed: true``) for license, customer, transfer and token creation;
another body or path with the key is 422; another credential with the key is a new
request; bad keys are 422; error answers are kept, 429 and 5xx are not; keys expire after
24 h and the clean-up job deletes them. Answers are held to the contract."""
from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import yaml

from app.http.idempotency import fingerprint
from app.storage.idempotency_repos import PeeweeIdempotencyKeys
from tests.support.api import idempotency_rows, send_at_once

KEY = "order-4711"


@pytest.fixture
def app(make_app):
    return make_app(rate_burst=100_000)  # the token's bucket is not what these tests are about


@pytest.fixture
def family(reseller_factory):
    parent = reseller_factory("Parent")
    child = reseller_factory("Child", parent=parent)
    return parent, child


def _license(me):
    return {"customerId": me.customer()["id"], "contractId": me.contract.id, "edition": "web-host"}


def _transfer(me, child):
    lic = me.license(me.customer())["license"]
    return {"licenseId": lic["id"], "toPartnerId": child.id, "toCustomerId": child.customer()["id"],
            "toContractId": child.contract.id, "reason": "merger"}


# operation: (path, the body to send (made through the API), the list that counts what was made)
OPERATIONS = {
    "license": ("/v1/licenses", _license, lambda me: me.call("GET", "/v1/licenses").json["data"]),
    "customer": ("/v1/customers", lambda me: {"name": "Idem GmbH"},
                 lambda me: me.call("GET", "/v1/customers").json["data"]),
    "transfer": ("/v1/transfers", None, lambda me: me.call("GET", "/v1/transfers").json["data"]),
    "token": ("/v1/tokens", lambda me: {"label": "bot", "scope": "read"},
              lambda me: me.call("GET", "/v1/tokens").json),
}


@pytest.fixture(params=sorted(OPERATIONS))
def operation(request, family):
    """``(caller, path, body, count)`` of one create operation; ``count()`` is how many of
    its resources the caller sees now."""
    parent, child = family
    path, body_of, listing = OPERATIONS[request.param]
    body = _transfer(parent, child) if request.param == "transfer" else body_of(parent)
    return parent, path, body, lambda: len(listing(parent))


def _post(me, path, body, key=KEY, **kw):
    return me.call("POST", path, json_body=body, headers={"Idempotency-Key": key}, **kw)


def test_a_repeat_gets_the_first_answer_and_makes_nothing(operation):
    me, path, body, count = operation
    before = count()
    first = _post(me, path, body, expect=201)
    assert "idempotent-replayed" not in first.headers
    again = _post(me, path, body, expect=201)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content and again.headers["content-type"] == first.headers["content-type"]
    assert count() == before + 1


def test_repeats_sent_at_once_make_one_resource(operation, store):
    me, path, body, count = operation
    before = count()
    answers = send_at_once(me.client, "POST", path, 8, token=me.secret, json_body=body,
                           headers={"Idempotency-Key": KEY})
    created = [a for a in answers if a.status_code == 201]
    refused = [a for a in answers if a.status_code != 201]
    assert len([a for a in created if "idempotent-replayed" not in a.headers]) == 1
    assert len({a.content for a in created}) == 1
    for answer in refused:  # still running when it came: 409, and nothing made
        assert answer.status_code == 409 and answer.json["error"]["code"] == "conflict", answer.text
        assert answer.headers["retry-after"] == "1"
    again = _post(me, path, body, expect=201)
    assert again.content == created[0].content and again.headers["idempotent-replayed"] == "true"
    assert count() == before + 1 and idempotency_rows(store) == 1


def test_the_same_json_differently_written_is_the_same_request(acme):
    first = acme.call("POST", "/v1/customers", body='{"name": "A", "externalRef": "x"}',
                      headers={"Idempotency-Key": KEY, "Content-Type": "application/json"}, expect=201)
    again = acme.call("POST", "/v1/customers", body='{"externalRef":"x",\n "name":"A"}',
                      headers={"Idempotency-Key": KEY, "Content-Type": "application/json"}, expect=201)
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"


def test_another_body_or_path_with_the_key_is_refused(acme):
    created = _post(acme, "/v1/customers", {"name": "A"}, expect=201).json
    for path, body in (("/v1/customers", {"name": "B"}), ("/v1/tokens", {"label": "bot", "scope": "read"}),
                       (f"/v1/customers/{created['id']}/notes", {"body": "hi"})):
        refused = _post(acme, path, body, expect=422)
        assert refused.json["error"]["code"] == "unprocessable-entity"
        assert "Idempotency-Key" in refused.json["error"]["message"] and "idempotent-replayed" not in refused.headers
    assert [c["name"] for c in acme.call("GET", "/v1/customers").json["data"]] == ["A"]
    assert len(acme.call("GET", "/v1/tokens").json) == 1
    assert acme.call("GET", f"/v1/customers/{created['id']}/notes").json == []


def test_another_credential_with_the_same_key_is_a_new_request(acme, world, reseller_factory):
    _, second_secret = world.token(acme.partner)  # another token of the same partner
    first = _post(acme, "/v1/customers", {"name": "A"}, expect=201)
    other = acme.client.post("/v1/customers", token=second_secret, json_body={"name": "A"},
                             headers={"Idempotency-Key": KEY}, expect=201)
    assert "idempotent-replayed" not in other.headers and other.json["id"] != first.json["id"]
    stranger = _post(reseller_factory("Stranger"), "/v1/customers", {"name": "A"}, expect=201)
    assert "idempotent-replayed" not in stranger.headers
    assert len(acme.call("GET", "/v1/customers").json["data"]) == 2


@pytest.mark.parametrize("key, problem", [("", "must not be empty"), ("k" * 256, "at most 255"),
                                          ("tab\there", "printable ASCII"), ("caf\u00e9", "printable ASCII")])
def test_bad_keys_are_422_and_run_nothing(acme, store, key, problem):
    refused = _post(acme, "/v1/customers", {"name": "A"}, key=key, expect=422)
    assert refused.json["error"]["code"] == "unprocessable-entity"
    assert "Idempotency-Key" in refused.json["error"]["message"] and problem in refused.json["error"]["message"]
    assert acme.call("GET", "/v1/customers").json["data"] == [] and idempotency_rows(store) == 0


def test_keys_of_1_and_255_printable_characters_are_taken(acme):
    for key in ("~", " " + "x" * 253 + "!"):
        _post(acme, "/v1/customers", {"name": key[:10]}, key=key, expect=201)
        assert _post(acme, "/v1/customers", {"name": key[:10]}, key=key).headers["idempotent-replayed"] == "true"


def test_an_error_answer_is_kept_and_replayed(acme):
    body = {"customerId": "0d1f0c2a-0000-4000-8000-0000000000aa", "contractId": acme.contract.id,
            "edition": "web-host"}
    first = _post(acme, "/v1/licenses", body, expect=404)
    again = _post(acme, "/v1/licenses", body, expect=404)
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"


def test_a_request_refused_before_it_ran_claims_nothing(acme, store):
    """Body validation (422) and authentication come before the key is claimed."""
    _post(acme, "/v1/customers", {"name": ""}, expect=422)
    acme.client.post("/v1/customers", token="pcp_nope", json_body={"name": "A"},
                     headers={"Idempotency-Key": KEY}, expect=401)
    assert idempotency_rows(store) == 0
    assert "idempotent-replayed" not in _post(acme, "/v1/customers", {"name": "A"}, expect=201).headers


def test_a_429_is_not_kept(make_app, world, clock):
    from tests.support.contract_client import ContractClient
    from tests.support.partners import Reseller

    client = ContractClient(make_app(rate_burst=1, rate_rps=1))
    partner = world.partner("Slow")
    _, secret = world.token(partner)
    me = Reseller(client, world, partner, secret, None)
    _post(me, "/v1/customers", {"name": "A"}, expect=201)
    _post(me, "/v1/customers", {"name": "B"}, key="second", expect=429)
    clock.advance(1)
    assert "idempotent-replayed" not in _post(me, "/v1/customers", {"name": "B"}, key="second", expect=201).headers


def test_a_5xx_is_not_kept(make_app, world, store):
    from tests.fixtures.fake_keygen import FakeKeygen
    from tests.support.contract_client import ContractClient
    from tests.support.partners import Reseller

    with FakeKeygen(account="slipway", token="kg-secret") as keygen:
        app = make_app(license_service="keygen", settings={
            "SLIPWAY_KEYGEN_URL": keygen.url, "SLIPWAY_KEYGEN_ACCOUNT": "slipway",
            "SLIPWAY_KEYGEN_TOKEN": "kg-secret", "SLIPWAY_KEYGEN_TIMEOUT": "2"})
        partner = world.partner("Acme")
        _, secret = world.token(partner)
        me = Reseller(ContractClient(app), world, partner, secret, world.contract(partner))
        body = _license(me)
        keygen.fail_next(1, "500")
        _post(me, "/v1/licenses", body, expect=503)
        assert idempotency_rows(store) == 0  # the claim was dropped: a retry runs again
        created = _post(me, "/v1/licenses", body, expect=201)
        assert "idempotent-replayed" not in created.headers
        assert _post(me, "/v1/licenses", body, expect=201).content == created.content
        assert len(me.call("GET", "/v1/licenses").json["data"]) == 1


def test_a_repeat_while_the_first_runs_is_409_until_its_claim_goes_stale(acme, world, store, clock):
    """A claim nobody finishes (its process died) holds the key for five minutes; then the
    next repeat of the same request takes it over and runs."""
    token, acme.secret = world.token(acme.partner)
    body = {"name": "A"}
    with store.uow() as uow:  # the claim of a request still running (or whose process died)
        PeeweeIdempotencyKeys(store.models).insert(
            "token:" + token.id, KEY, method="POST", path="/v1/customers", attempt="dead-process",
            fingerprint=fingerprint("POST", "/v1/customers", body), now=clock.now())
        uow.commit()
    running = _post(acme, "/v1/customers", body, expect=409)
    assert running.json["error"]["code"] == "conflict" and running.headers["retry-after"] == "1"
    assert _post(acme, "/v1/customers", {"name": "B"}, expect=422).json["error"]["code"] == "unprocessable-entity"
    clock.advance(299)
    _post(acme, "/v1/customers", body, expect=409)
    clock.advance(1)
    first = _post(acme, "/v1/customers", body, expect=201)
    assert "idempotent-replayed" not in first.headers
    assert _post(acme, "/v1/customers", body, expect=201).content == first.content
    assert len(acme.call("GET", "/v1/customers").json["data"]) == 1


def test_after_24_hours_the_key_is_a_new_request(acme, clock):
    first = _post(acme, "/v1/customers", {"name": "A"}, expect=201)
    clock.advance(24 * 3600 - 1)
    assert _post(acme, "/v1/customers", {"name": "A"}, expect=201).content == first.content
    clock.advance(1)
    second = _post(acme, "/v1/customers", {"name": "B"}, expect=201)  # another body: the key is free again
    assert "idempotent-replayed" not in second.headers and second.json["id"] != first.json["id"]
    assert _post(acme, "/v1/customers", {"name": "B"}, expect=201).headers["idempotent-replayed"] == "true"


def test_the_clean_up_deletes_keys_past_24_hours(acme, app, clock, store):
    _post(acme, "/v1/customers", {"name": "A"}, key="old", expect=201)
    clock.advance(timedelta(hours=23).total_seconds())
    _post(acme, "/v1/customers", {"name": "B"}, key="new", expect=201)
    cleanup = app.parts.idempotency_cleanup
    assert asyncio.run(cleanup.once()) == 0 and idempotency_rows(store) == 2
    clock.advance(timedelta(hours=1, seconds=1).total_seconds())
    assert asyncio.run(cleanup.once()) == 1 and idempotency_rows(store) == 1
    assert _post(acme, "/v1/customers", {"name": "B"}, key="new", expect=201).headers["idempotent-replayed"] == "true"


def test_the_clean_up_runs_with_the_deploy_worker(make_app):
    for worker, app in ((True, make_app(deploy_worker=True)), (False, make_app())):
        assert (app.parts.idempotency_cleanup in _jobs(app)) == worker


def _jobs(app):
    lifespan = next(m for m in app._unprepared_middleware if hasattr(m, "jobs"))  # the factory's Lifespan
    return lifespan.jobs


def test_a_get_ignores_the_header(acme):
    _post(acme, "/v1/customers", {"name": "A"}, expect=201)
    for key in (KEY, ""):
        listed = acme.call("GET", "/v1/customers", headers={"Idempotency-Key": key}, expect=200)
        assert "idempotent-replayed" not in listed.headers and len(listed.json["data"]) == 1


def test_the_served_contract_gives_every_post_the_header(acme):
    served = yaml.safe_load(acme.client.get("/v1/openapi.yaml").text)
    for path, item in served["paths"].items():
        for method, op in ((m, op) for m, op in item.items() if m in ("get", "post", "patch", "delete")):
            names = [p.get("$ref") for p in op.get("parameters", [])]
            assert ("#/components/parameters/IdempotencyKey" in names) == (method == "post"), (method, path)
            if method == "post":
                assert {"409", "422"} <= set(op["responses"])
                success = next(r for s, r in op["responses"].items() if s.startswith("2"))
                assert "Idempotent-Replayed" in success["headers"]
    assert served["components"]["parameters"]["IdempotencyKey"]["in"] == "header"


@pytest.mark.parametrize("key", [None, KEY])
def test_a_body_nested_too_deep_is_400_with_or_without_a_key(acme, store, key):
    """Nesting beyond 200 levels is refused before anything runs: deep enough, it would
    exhaust the recursion of the JSON parser or of the key's body hash (a 500)."""
    def nested(depth):
        return '{"name": "A", "extra": %s}' % ("[" * (depth - 1) + "]" * (depth - 1))

    headers = {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})}
    for depth in (201, 5000):
        refused = acme.call("POST", "/v1/customers", body=nested(depth), headers=headers, expect=400)
        assert refused.json["error"] == {"code": "bad-request",
                                         "message": "malformed JSON: nested deeper than 200 levels"}
    assert acme.call("GET", "/v1/customers").json["data"] == [] and idempotency_rows(store) == 0
    acme.call("POST", "/v1/customers", body=nested(200), headers=headers, expect=201)


def test_a_claim_whose_row_vanishes_before_it_is_read_claims_again(acme, monkeypatch):
    """On PostgreSQL the row a claim's insert ran into may be deleted (the first request's
    claim released after a 5xx, or the clean-up) before the claim reads it: the insert is
    tried again, rather than reading nothing and failing with a 500."""
    real, reads = PeeweeIdempotencyKeys.get, []

    def get(self, credential, key):  # the first read comes after that delete
        reads.append(key)
        return None if len(reads) == 1 else real(self, credential, key)

    monkeypatch.setattr(PeeweeIdempotencyKeys, "get", get)
    first = _post(acme, "/v1/customers", {"name": "A"}, expect=201)
    assert "idempotent-replayed" not in first.headers and len(reads) == 2
    assert _post(acme, "/v1/customers", {"name": "A"}, expect=201).content == first.content
    assert len(acme.call("GET", "/v1/customers").json["data"]) == 1


def test_a_kept_answer_is_sealed_with_the_credentials_secret(acme, store):
    """The answer of a token's creation holds its secret, which the database otherwise keeps
    only as a hash: the kept copy is sealed with the caller's own token, so a copy of the
    database gives it to nobody, while the caller's repeat still gets it back."""
    created = _post(acme, "/v1/tokens", {"label": "bot", "scope": "read"}, expect=201)
    secret = created.json["token"]
    with store.db.connection_context():
        kept = [bytes(row.body) for row in store.models.IdempotencyKey.select()]
    assert len(kept) == 1 and secret.encode() not in kept[0] and b"bot" not in kept[0]
    again = _post(acme, "/v1/tokens", {"label": "bot", "scope": "read"}, expect=201)
    assert again.headers["idempotent-replayed"] == "true" and again.content == created.content
