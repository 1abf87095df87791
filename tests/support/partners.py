"""Partner-side helpers of the API tests: partners and tokens made straight through the
use cases, and a reseller as the API tests drive it."""
from __future__ import annotations

import re

from core.partner import partners, tokens


class World:
    """Partners and tokens made straight through the use cases, for API tests."""

    def __init__(self, store, clock):
        self.store, self.clock = store, clock

    def partner(self, name="Acme Hosting", type="reseller", parent=None):
        return partners.create_partner(self.store.uow(), self.clock, name=name, type=type,
                                       parent_id=parent.id if parent else None)

    def token(self, partner, scope="write", label="test"):
        token, secret = tokens.create_token(self.store.uow(), self.clock, partner_id=partner.id, label=label,
                                            scope=scope, created_by=None)
        return token, secret


    def contract(self, partner, currency="EUR", unit_price_cents=1000):
        from core.partner import contracts

        return contracts.create_contract(self.store.uow(), self.clock, partner_id=partner.id,
                                         model="per_instance_metered", currency=currency,
                                         unit_price_cents=unit_price_cents, known_models={"per_instance_metered"})


class Reseller:
    """A partner seen through the API: its token, a contract, and helpers to make things."""

    def __init__(self, client, world, partner, secret, contract):
        self.client, self.world = client, world
        self.partner, self.secret, self.contract = partner, secret, contract
        self.id = partner.id

    def call(self, method, path, **kw):
        return self.client.request(method, path, token=self.secret, **kw)

    def customer(self, name="Customer", **fields):
        return self.call("POST", "/v1/customers", json_body={"name": name, **fields}, expect=201).json

    def license(self, customer, contract=None, edition="web-host", **fields):
        body = {"customerId": customer["id"], "contractId": (contract or self.contract).id, "edition": edition,
                **fields}
        return self.call("POST", "/v1/licenses", json_body=body, expect=201).json


UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
