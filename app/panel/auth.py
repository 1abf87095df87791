"""Handlers of the browser login of the panel API: ``/api/auth/*``.

``POST /api/auth/key`` signs a browser in with an API key: the session cookie of a
session that acts as the key (``core.panel.sessions.open_key_session``).

``GET /api/auth/login`` -> the identity provider -> ``GET /api/auth/callback`` -> the
session cookie, which the gate (``app.panel.gate``) accepts on every ``/api`` request;
``POST /api/auth/logout`` ends it; ``GET /api/auth/session`` describes it. The cookie is
``__Host-slipway_session`` (Secure, Path=/) with an https ``SLIPWAY_PUBLIC_URL``, else
``slipway_session`` (Path=/api); signing in and out with the first also clears a
``slipway_session`` the browser may keep from before (Path=/api), which would otherwise
make two session cookies.
The protocol is ``app.panel.oidc`` (Authlib); users and sessions are ``core.panel.sessions``.
"""
from __future__ import annotations

import hmac
import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from app.http.errors import ApiError, unauthorized_message
from app.http.pipeline import Reply
from app.panel.gate import SESSION_COOKIE, secure_url, session_cookie_name
from app.http.timefmt import rfc3339
from core.panel import sessions as panel_sessions
from core.errors import Invalid, Unauthorized

if TYPE_CHECKING:
    from app.panel.oidc import OidcClient

LOGIN_COOKIE = "slipway_login"
CALLBACK_PATH = "/api/auth/callback"
DEFAULT_NEXT = "/api/docs"
NOT_CONFIGURED = ("browser login is not configured on this panel (SLIPWAY_OIDC_ISSUER is not set); "
                  "use an API key")
NO_SESSION = ("no browser session: this request carries no live session cookie (an API key is not a "
              "session); sign in with POST /api/auth/key or log in at /api/auth/login")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def make_oidc_client(config) -> OidcClient | None:
    if not config.oidc_issuer:
        return None
    from app.panel.oidc import OidcClient  # Authlib and httpx: imported only where OIDC is configured

    return OidcClient(issuer=config.oidc_issuer, client_id=config.oidc_client_id,
                      client_secret=config.oidc_client_secret, redirect_uri=config.public_url + CALLBACK_PATH)


def session_json(principal) -> dict:
    session = principal.session
    if isinstance(principal, panel_sessions.KeySessionPrincipal):
        key = principal.key
        who = {"email": None, "key": {"id": key.id, "name": key.name}, "role": key.role,
               "customer_id": principal.customer_id}
    else:
        user = principal.user
        who = {"email": user.email, "key": None, "role": user.role, "customer_id": user.customer_id}
    return {**who, "permissions": sorted(principal.permissions), "created_at": rfc3339(session.created_at),
            "expires_at": rfc3339(session.expires_at)}


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


class AuthHandlers:
    """The ``/api/auth/*`` operations, one method each; ``oidc`` defaults to one made from
    ``config``; ``gate`` is the panel's gate (sessions, the same-site rule)."""

    def __init__(self, store, config, gate, oidc: OidcClient | None = None):
        self.store, self.config, self.gate, self.clock = store, config, gate, config.clock
        self.oidc = oidc if oidc is not None else make_oidc_client(config)
        self.secure = secure_url(config.public_url)
        self.session_name = session_cookie_name(config.public_url)
        self.session_path = "/" if self.secure else "/api"  # a __Host- cookie must have Path=/

    def handlers(self) -> dict:
        return {"beginLogin": self.begin_login, "finishLogin": self.finish_login, "logout": self.logout,
                "getSession": self.get_session, "signInWithKey": self.key_login}

    def _configured(self):
        if self.oidc is None:
            raise ApiError(404, NOT_CONFIGURED)

    def _cookie(self, name, value, *, path, max_age=None, clear=False):
        return {"name": name, "value": "" if clear else value, "path": path, "max_age": max_age,
                "expires": _EPOCH if clear else None, "secure": self.secure, "http_only": True, "same_site": "Lax"}

    def _session_cookies(self, secret=None, *, max_age=None) -> list:
        """Set-Cookie of the session cookie (cleared without ``secret``), and with the
        ``__Host-`` name also the clearing of an older ``slipway_session`` (Path=/api)."""
        made = [self._cookie(self.session_name, secret, path=self.session_path, max_age=max_age,
                             clear=secret is None)]
        if self.session_name != SESSION_COOKIE:
            made.append(self._cookie(SESSION_COOKIE, "", path="/api", clear=True))
        return made

    async def begin_login(self, call):
        self._configured()
        raw = call.params.get("next")
        next_path = DEFAULT_NEXT if raw is None else panel_sessions.safe_next(raw)
        if next_path is None:
            raise ApiError(400, "invalid parameters",
                           fields={"next": "must be a path on this panel: /..., not //host, printable ASCII"})
        await _provider(self.oidc.metadata())  # an unreachable provider stores nothing
        state, nonce, verifier = await self.store.run(panel_sessions.begin_login, self.store.uow(), self.clock,
                                                      next_path=next_path)
        url = await _provider(self.oidc.authorization_url(state=state, nonce=nonce, code_verifier=verifier))
        return Reply(302, headers={"Location": url, "Cache-Control": "no-store"},
                     cookies=[self._cookie(LOGIN_COOKIE, state, path=CALLBACK_PATH,
                                           max_age=int(panel_sessions.LOGIN_TTL.total_seconds()))])

    async def finish_login(self, call):
        self._configured()
        p, req = call.params, call.req
        state = p.get("state") or ""
        bound = req.get_cookie_values(LOGIN_COOKIE) or []
        if not state or not any(_same(value, state) for value in bound):
            raise ApiError(400, "the login state is missing or is not this browser's: start again at "
                                "/api/auth/login")
        try:
            pending = await self.store.run(panel_sessions.finish_login, self.store.uow(), self.clock, state)
        except Invalid as exc:
            raise ApiError(400, exc.message) from exc
        if p.get("error"):
            described = f" ({p['error_description']})" if p.get("error_description") else ""
            raise ApiError(401, f"the identity provider refused the login: {p['error']}{described}")
        if not p.get("code"):
            raise ApiError(400, "invalid parameters", fields={"code": "is required"})
        token = await _provider(self.oidc.exchange(code=p["code"], code_verifier=pending.code_verifier))
        claims = await _provider(self.oidc.id_token_claims(token, nonce=pending.nonce,
                                                           now=int(self.clock.now().timestamp())))
        email = claims.get("email")
        if not isinstance(email, str) or not email or claims.get("email_verified") not in (True, "true"):
            raise ApiError(403, "the identity provider did not vouch for a verified email address "
                                "(claims email and email_verified)")
        _, _, secret = await self.store.run(panel_sessions.open_session, self.store.uow(), self.clock,
                                            email=email, ttl_seconds=self.config.session_ttl)
        return Reply(302, headers={"Location": pending.next_path, "Cache-Control": "no-store"},
                     cookies=[*self._session_cookies(secret, max_age=self.config.session_ttl),
                              self._cookie(LOGIN_COOKIE, "", path=CALLBACK_PATH, clear=True)])

    async def key_login(self, call):
        self.gate.same_site(call.req)  # no login CSRF: a cross-site page cannot sign a browser in
        old = self.gate.session_cookie(call.req)  # two session cookies: 401
        try:
            session, _, secret = await self.store.run(panel_sessions.open_key_session, self.store.uow(), self.clock,
                                                      raw_key=call.body["key"], ttl_seconds=self.config.session_ttl)
        except Unauthorized as exc:  # a partner token given for a key: the 401 says so
            raise ApiError(401, unauthorized_message("panel", exc.message, call.body["key"])) from exc
        if old:  # the browser's previous session, if any, ends: one browser, one session
            await self.store.run(panel_sessions.revoke_session, self.store.uow(), self.clock, old)
        max_age = max(1, math.ceil((session.expires_at - self.clock.now()).total_seconds()))
        return Reply(204, headers={"Cache-Control": "no-store"},
                     cookies=self._session_cookies(secret, max_age=max_age))

    async def logout(self, call):
        secret = self.gate.session_cookie(call.req)  # two session cookies: 401, nothing ends
        if secret:
            principal = await self.gate.session_of(call.req)
            if principal is not None:
                self.gate.check_origin(call.req, principal)
                await self.store.run(panel_sessions.revoke_session, self.store.uow(), self.clock, secret)
        return Reply(204, cookies=self._session_cookies())

    async def get_session(self, call):
        principal = call.caller if isinstance(call.caller, panel_sessions.SessionPrincipal) \
            else await self.gate.session_of(call.req)
        if principal is None:
            raise ApiError(401, NO_SESSION)
        return Reply(200, session_json(principal))


async def _provider(awaitable):
    """The identity provider's failures as panel errors: 401 refused, 503 unreachable."""
    from app.panel.oidc import LoginRefused, ProviderUnavailable

    try:
        return await awaitable
    except LoginRefused as exc:
        raise ApiError(401, exc.message) from exc
    except ProviderUnavailable as exc:
        raise ApiError(503, exc.message) from exc
