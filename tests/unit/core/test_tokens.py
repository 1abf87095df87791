"""Core token and partner rules against in-memory fakes."""
import hashlib

import pytest

from core.partner import contracts, partners, tokens
from core.errors import Forbidden, Invalid, NotFound, Unauthorized
from core.partner.identity import looks_like_token
from tests.support.fakes import FakeClock, FakeUnitOfWork


@pytest.fixture
def uow():
    return FakeUnitOfWork()


@pytest.fixture
def clock():
    return FakeClock()


def test_secret_shape_and_hash(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    token, secret = tokens.create_token(uow, clock, partner_id=partner.id, label="ci", scope="write", created_by=None)
    assert secret.startswith("pcp_") and len(secret) - 4 >= 32 and looks_like_token(secret)
    assert token.token_prefix == secret[4:12]
    assert token.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in repr(token)


def test_authenticate_resolves_and_touches_once_a_minute(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    token, secret = tokens.create_token(uow, clock, partner_id=partner.id, label="ci", scope="read", created_by=None)
    caller = tokens.authenticate(uow, clock, secret)
    assert caller.partner == partner and caller.token.last_used_at == clock.now()
    commits = uow.commits
    clock.advance(59)
    tokens.authenticate(uow, clock, secret)
    assert uow.commits == commits  # no write within the minute
    clock.advance(1)
    assert tokens.authenticate(uow, clock, secret).token.last_used_at == clock.now()


@pytest.mark.parametrize("secret", [None, "", "pcp_", "pcp_" + "a" * 31, "xyz_" + "a" * 40, "pcp_" + "a" * 39 + "%"])
def test_malformed_secrets_are_unauthorized(uow, clock, secret):
    with pytest.raises(Unauthorized):
        tokens.authenticate(uow, clock, secret)


def test_revoked_tokens_are_unauthorized(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    token, secret = tokens.create_token(uow, clock, partner_id=partner.id, label="ci", scope="write", created_by=None)
    caller = tokens.authenticate(uow, clock, secret)
    tokens.revoke_token(uow, clock, caller, token.id)
    with pytest.raises(Unauthorized):
        tokens.authenticate(uow, clock, secret)


def test_scope_rules(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    _, secret = tokens.create_token(uow, clock, partner_id=partner.id, label="r", scope="read", created_by=None)
    reader = tokens.authenticate(uow, clock, secret)
    tokens.require_scope(reader, "read")
    with pytest.raises(Forbidden):
        tokens.require_scope(reader, "write")


def test_create_token_rejects_bad_values(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    with pytest.raises(Invalid):
        tokens.create_token(uow, clock, partner_id=partner.id, label=" ", scope="read", created_by=None)
    with pytest.raises(Invalid):
        tokens.create_token(uow, clock, partner_id=partner.id, label="x", scope="admin", created_by=None)
    with pytest.raises(NotFound):
        tokens.create_token(uow, clock, partner_id="8d6a3c1e-0000-4000-8000-000000000000", label="x",
                            scope="read", created_by=None)


def test_partner_tree(uow, clock):
    root = partners.create_partner(uow, clock, name="Op", type="root")
    child = partners.create_partner(uow, clock, name="Child", parent_id=root.id)
    grandchild = partners.create_partner(uow, clock, name="Grandchild", parent_id=child.id)
    partners.create_partner(uow, clock, name="Stranger")
    assert uow.partners.subtree_ids(child.id) == {child.id, grandchild.id}
    with pytest.raises(Invalid):
        partners.create_partner(uow, clock, name="Root2", type="root", parent_id=root.id)
    with pytest.raises(Invalid):
        partners.create_partner(uow, clock, name="x", type="vendor")
    with pytest.raises(Invalid):
        partners.create_partner(uow, clock, name="  ")
    with pytest.raises(Invalid):
        partners.create_partner(uow, clock, name="x", parent_id="nope")
    with pytest.raises(NotFound):
        partners.create_partner(uow, clock, name="x", parent_id="8d6a3c1e-0000-4000-8000-000000000000")


def test_contract_rules(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    known = {"per_instance_metered"}
    contract = contracts.create_contract(uow, clock, partner_id=partner.id, model="per_instance_metered",
                                         currency="EUR", unit_price_cents=1250, known_models=known)
    assert uow.contracts.get(contract.id) == contract
    bad = [dict(model="flat"), dict(currency="eur"), dict(currency="EURO"), dict(unit_price_cents=-1),
           dict(unit_price_cents=True), dict(partner_id="x")]
    for change in bad:
        args = dict(partner_id=partner.id, model="per_instance_metered", currency="EUR", unit_price_cents=1)
        args.update(change)
        with pytest.raises(Invalid):
            contracts.create_contract(uow, clock, known_models=known, **args)
