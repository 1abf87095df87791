"""The partner API's gate: bearer token, per-token bucket, failed-auth brake, scope."""
from __future__ import annotations

import math

from app.http.clientaddr import address_bucket, client_address
from app.http.errors import RATE_LIMIT_MESSAGE, ApiError, unauthorized_message
from core.partner import tokens
from core.errors import Forbidden, Unauthorized
from ports.ratestore import RateStore


def bearer(req) -> str | None:
    header = req.get_header("Authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


class PartnerGate:
    def __init__(self, store, config, rates: RateStore):
        self.store = store
        self.clock = config.clock
        self.trusted = config.trusted_proxies
        self.per_token = rates.table("partner-token", config.rate_rps, config.rate_burst)
        self.brake = rates.table("partner-authfail", config.authfail_rps, max(1.0, math.ceil(config.authfail_rps)))

    async def admit(self, req, op):
        secret = bearer(req)
        try:
            # one indexed lookup on every request, no transaction needed around one
            # statement (Store.read: the loop's own connection on SQLite, a worker thread
            # on PostgreSQL; app.storage.readpath)
            caller = await self.store.read(tokens.identify, secret)
        except Unauthorized as exc:
            source = client_address(req.remote_addr, req.get_header("X-Forwarded-For"), self.trusted)
            decision = await self.brake.take(address_bucket(source), self.clock.monotonic())
            if not decision.allowed:
                raise ApiError(429, RATE_LIMIT_MESSAGE, headers={"Retry-After": str(decision.retry_after)}) from exc
            raise ApiError(401, unauthorized_message("partner", exc.message, secret)) from exc
        if caller.token.needs_last_used_refresh(self.clock.now()):  # at most once a minute: a write
            caller = await self.store.run(tokens.refresh_last_used, self.store.uow(transaction=False), self.clock,
                                          caller)
        decision = await self.per_token.take(caller.token.id, self.clock.monotonic())
        if not decision.allowed:
            raise ApiError(429, RATE_LIMIT_MESSAGE, headers={"Retry-After": str(decision.retry_after)})
        try:
            tokens.require_scope(caller, op.scope)
        except Forbidden as exc:
            raise ApiError(403, exc.message) from exc
        return caller
