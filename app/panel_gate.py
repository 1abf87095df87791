"""The panel API's gate: API key (Bearer), rate tiers, permission.

Tiers (DECISIONS.md): requests that do not authenticate draw on 60/min per source
address; authenticated ones on the key's ``rateLimitRpm`` (120/min by default); the
deploy operations (``x-slipway-rate-tier: deploy`` in the contract) also on 10/min per
key. Every response carries ``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset`` (Unix
seconds when that bucket is full again) of the tightest bucket the request touched.
"""
from __future__ import annotations

import math

from app.clientaddr import client_address
from app.errors import ApiError
from app.partner_gate import bearer
from core import panel_access
from core.errors import Forbidden, Unauthorized
from core.ratelimit import BucketTable

UNAUTHENTICATED_RPM = 60
AUTHENTICATED_RPM = 120
DEPLOY_RPM = 10


class PanelGate:
    def __init__(self, store, config):
        self.store = store
        self.clock = config.clock
        self.trusted = config.trusted_proxies
        self.by_address = BucketTable(UNAUTHENTICATED_RPM / 60, UNAUTHENTICATED_RPM)
        self.by_key = BucketTable(AUTHENTICATED_RPM / 60, AUTHENTICATED_RPM)
        self.deploys = BucketTable(DEPLOY_RPM / 60, DEPLOY_RPM)

    def _headers(self, req, decisions) -> None:
        tightest = min(decisions, key=lambda d: (d.allowed, d.remaining))
        reset = math.ceil(self.clock.now().timestamp() + tightest.full_after)
        req.context.rate_headers = {"X-RateLimit-Limit": str(tightest.limit),
                                    "X-RateLimit-Remaining": str(tightest.remaining),
                                    "X-RateLimit-Reset": str(reset)}
        refused = next((d for d in decisions if not d.allowed), None)
        if refused is not None:
            raise ApiError(429, "rate limit exceeded", headers={"Retry-After": str(refused.retry_after)})

    async def admit(self, req, op):
        now = self.clock.monotonic()
        try:
            principal = await self.store.run(panel_access.authenticate_key, self.store.uow(transaction=False),
                                             self.clock, bearer(req))
        except Unauthorized as exc:
            source = client_address(req.remote_addr, req.get_header("X-Forwarded-For"), self.trusted)
            self._headers(req, [self.by_address.take(source, now)])
            raise ApiError(401, exc.message) from exc
        key = principal.key
        decisions = [self.by_key.take(key.id, now, rate=key.rate_limit_rpm / 60, burst=key.rate_limit_rpm)]
        if op.rate_tier == "deploy":
            decisions.append(self.deploys.take(key.id, now))
        self._headers(req, decisions)
        if op.permission:
            try:
                principal.require(op.permission)
            except Forbidden as exc:
                raise ApiError(403, exc.message) from exc
        return principal
