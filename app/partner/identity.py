"""Handlers of the partner API's identity and token operations, and their JSON shapes."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from core.partner import tokens


def me_json(caller) -> dict:
    p = caller.partner
    return {"partnerId": p.id, "name": p.name, "type": p.type, "scope": caller.token.scope}


def token_json(token, secret: str | None = None) -> dict:
    out = {
        "id": token.id,
        "partnerId": token.partner_id,
        "label": token.label,
        "tokenPrefix": token.token_prefix,
        "scope": token.scope,
        "createdBy": token.created_by,
        "createdAt": rfc3339(token.created_at),
        "lastUsedAt": rfc3339(token.last_used_at),
        "revokedAt": rfc3339(token.revoked_at),
    }
    if secret is not None:
        out["token"] = secret
    return out


def partner_json(partner) -> dict:
    return {"id": partner.id, "name": partner.name, "type": partner.type, "parentId": partner.parent_id,
            "createdAt": rfc3339(partner.created_at)}


class IdentityHandlers:
    """The contract, ``/v1/me`` and token operations of the partner API, one method each;
    ``contract``: the served partner contract."""

    def __init__(self, store, clock, contract):
        self.store, self.clock, self.contract = store, clock, contract

    def handlers(self) -> dict:
        return {"getPartnerContract": self.get_contract, "getMe": self.get_me, "listTokens": self.list_tokens,
                "createToken": self.create_token, "revokeToken": self.revoke_token}

    async def get_contract(self, call):
        return Reply(200, self.contract.text, content_type="application/yaml")

    async def get_me(self, call):
        return Reply(200, me_json(call.caller))

    async def list_tokens(self, call):
        found = await self.store.run(tokens.list_tokens, self.store.uow(), call.caller)
        return Reply(200, [token_json(t) for t in found])

    async def create_token(self, call):
        token, secret = await self.store.run(
            tokens.create_token, self.store.uow(), self.clock, partner_id=call.caller.partner.id,
            label=call.body["label"], scope=call.body["scope"], created_by=call.caller.token.id)
        return Reply(201, token_json(token, secret))

    async def revoke_token(self, call):
        await self.store.run(tokens.revoke_token, self.store.uow(), self.clock, call.caller, call.params["tokenId"])
        return Reply(204)
