"""GET /v1/contracts: the caller's own billing contracts (the `contractId` a license
needs), newest first, paged as the other partner lists; never a parent's nor a
sub-reseller's; every refusal."""
from __future__ import annotations



def test_a_partner_lists_its_own_contracts_newest_first(acme, world, clock, reseller_factory):
    clock.advance(60)
    later = world.contract(acme.partner, currency="USD", unit_price_cents=250)
    sub = reseller_factory("Sub Hosting", parent=acme)
    page = acme.call("GET", "/v1/contracts", expect=200).json
    assert page["limit"] == 50 and page["offset"] == 0
    assert [c["id"] for c in page["data"]] == [later.id, acme.contract.id]  # not the sub-reseller's
    first = page["data"][0]
    assert first == {"id": later.id, "partnerId": acme.id, "model": "per_instance_metered", "currency": "USD",
                     "unitPriceCents": 250, "createdAt": first["createdAt"]}
    assert [c["id"] for c in sub.call("GET", "/v1/contracts", expect=200).json["data"]] == [sub.contract.id]
    second = acme.call("GET", "/v1/contracts", params={"limit": 1, "offset": 1}, expect=200).json
    assert [c["id"] for c in second["data"]] == [acme.contract.id] and second["limit"] == 1
    assert acme.call("GET", "/v1/contracts", params={"offset": 5}, expect=200).json["data"] == []


def test_a_read_token_lists_them_and_no_token_is_401(reseller_factory, client):
    reader = reseller_factory("Reader Hosting", scope="read")
    assert [c["id"] for c in reader.call("GET", "/v1/contracts", expect=200).json["data"]] == [reader.contract.id]
    client.request("GET", "/v1/contracts", token="pcp_" + "x" * 43, expect=401)  # (one: the brake allows one)


def test_a_bad_offset_is_422_and_a_bad_limit_falls_back_as_on_every_list(acme):
    for bad in ("-1", "abc", "1.5"):
        acme.call("GET", "/v1/contracts", params={"offset": bad}, expect=422)
    for bad in ("0", "201", "abc"):
        assert acme.call("GET", "/v1/contracts", params={"limit": bad}, expect=200).json["limit"] == 50
