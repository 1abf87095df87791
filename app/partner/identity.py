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


def identity_handlers(store, clock, contract) -> dict:
    async def get_contract(call):
        return Reply(200, contract.text, content_type="application/yaml")

    async def get_me(call):
        return Reply(200, me_json(call.caller))

    async def list_tokens(call):
        found = await store.run(tokens.list_tokens, store.uow(), call.caller)
        return Reply(200, [token_json(t) for t in found])

    async def create_token(call):
        token, secret = await store.run(
            tokens.create_token, store.uow(), clock, partner_id=call.caller.partner.id,
            label=call.body["label"], scope=call.body["scope"], created_by=call.caller.token.id)
        return Reply(201, token_json(token, secret))

    async def revoke_token(call):
        await store.run(tokens.revoke_token, store.uow(), clock, call.caller, call.params["tokenId"])
        return Reply(204)

    return {
        "getPartnerContract": get_contract,
        "getMe": get_me,
        "listTokens": list_tokens,
        "createToken": create_token,
        "revokeToken": revoke_token,
    }
