"""The plugins' auth sources, asked in order after keys and sessions did not admit a
request, each within ``AUTH_SOURCE_TIMEOUT_S``: one that raises refuses the request,
one that hangs makes it a 503; none ever lets a request through by failing."""
from __future__ import annotations

import logging

from app.engine_calls import CallTimedOut
from app.http.errors import ApiError
from core.errors import Unauthorized
from core.panel import access
from ports.extensions import ExtensionContext, RequestView

log = logging.getLogger("slipway.extensions")


#: seconds an auth source has to answer; past them the request is 503 (its call goes on
#: in its thread, counted against the source's share of the pool)
AUTH_SOURCE_TIMEOUT_S = 5.0


class AuthSources:
    """The plugins' auth sources, asked in order after keys and sessions failed."""

    def __init__(self, sources, context: ExtensionContext, store, calls, default_rpm: int):
        self.sources, self.context, self.store, self.calls = tuple(sources), context, store, calls
        self.default_rpm = default_rpm

    def __bool__(self) -> bool:
        return bool(self.sources)

    async def authenticate(self, req, client: str):
        """The principal the first source that recognises ``req`` vouches for, or None;
        ``Unauthorized`` when a source raises or answers an identity the panel cannot hold."""
        view = RequestView(method=req.method, path=req.path, client=client,
                           headers={name.lower(): value for name, value in req.headers.items()})
        for source in self.sources:
            try:
                identity = await self.calls.run_for("auth-source:" + source.name, source.authenticate, view,
                                                    self.context)
            except CallTimedOut:
                log.warning("auth source %s did not answer within %g s", source.name, AUTH_SOURCE_TIMEOUT_S)
                raise ApiError(503, f"the auth source {source.name} did not answer within "
                               f"{AUTH_SOURCE_TIMEOUT_S:g} s; retry shortly", headers={"Retry-After": "1"}) from None
            except Exception as exc:  # noqa: BLE001 (a source that fails refuses; it never admits)
                log.warning("auth source %s refused a request: %s: %s", source.name, type(exc).__name__, exc)
                raise Unauthorized(f"the auth source {source.name} refused the request") from None
            if identity is None:
                continue
            return await self.store.read(  # the read path of every request's credentials
                access.source_principal, source=source.name, subject=getattr(identity, "subject", None),
                role=getattr(identity, "role", None), customer_id=getattr(identity, "customer_id", None),
                rate_limit_rpm=getattr(identity, "rate_limit_rpm", None), default_rpm=self.default_rpm)
        return None
