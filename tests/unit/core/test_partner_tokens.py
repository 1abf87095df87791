"""Partner tokens and the partner tree with the full in-memory unit of work (the token
rules in detail are in tests/unit/core/test_tokens.py)."""
from __future__ import annotations

import pytest

from core.partner import partners, tokens
from core.errors import Forbidden, Invalid, NotFound, Unauthorized
from tests.support.fakes import caller_of


def test_scopes_and_own_tokens_only(uow, clock):
    root = caller_of(uow, clock, "Root")
    sub = caller_of(uow, clock, "Sub", parent=root)
    read = caller_of(uow, clock, "Reader", parent=root, scope="read")
    tokens.require_scope(read, "read")
    with pytest.raises(Forbidden, match="write scope"):
        tokens.require_scope(read, "write")
    clock.advance(1)
    other_token, _ = tokens.create_token(uow, clock, partner_id=sub.partner.id, label="x", scope="read",
                                         created_by=None)
    with pytest.raises(NotFound):  # a partner revokes its own tokens only, not even its children's
        tokens.revoke_token(uow, clock, root, other_token.id)
    assert [t.label for t in tokens.list_tokens(uow, sub)] == ["x", "test"]  # newest first


def test_a_revoked_token_fails_on_its_next_request(uow, clock):
    partner = partners.create_partner(uow, clock, name="Acme")
    token, secret = tokens.create_token(uow, clock, partner_id=partner.id, label="ci", scope="write",
                                        created_by=None)
    caller = tokens.authenticate(uow, clock, secret)
    other = uow.fork()  # another request, its own unit of work on the same store
    tokens.revoke_token(other, clock, caller, token.id)
    with pytest.raises(Unauthorized):
        tokens.authenticate(uow, clock, secret)


def test_partner_tree_rules(uow, clock):
    root = partners.create_partner(uow, clock, name="Root", type="root")
    with pytest.raises(Invalid):
        partners.create_partner(uow, clock, name="X", type="root", parent_id=root.id)
    with pytest.raises(Invalid):
        partners.create_partner(uow, clock, name="X", parent_id="not-a-uuid")
    with pytest.raises(NotFound):
        partners.create_partner(uow, clock, name="X", parent_id="00000000-0000-0000-0000-000000000000")
    with pytest.raises(NotFound):
        tokens.create_token(uow, clock, partner_id="00000000-0000-0000-0000-000000000000", label="x",
                            scope="read", created_by=None)
    with uow:
        assert uow.partners.all_ids() == [root.id]
