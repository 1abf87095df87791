"""The panel API's gate: who is calling (API key or browser session), rate tiers, CSRF,
permission.

Authentication (``PanelGate.authenticate``): an ``Authorization: Bearer`` key decides
when the request has one (a key takes precedence over a cookie); otherwise the
session cookie of a browser login, when login is configured
(``SLIPWAY_OIDC_ISSUER``). Operations the contract marks ``security: []`` (the login
flow) need neither.

The session cookie (docs/decisions.md "Tenant safety, second round"): with an ``https``
``SLIPWAY_PUBLIC_URL`` it is ``__Host-slipway_session`` (``Secure``, ``Path=/``, no
``Domain``: no other site, not even a sibling subdomain, can set one of that name), and a
plain ``slipway_session`` alone is ignored as if absent; over plain http it is
``slipway_session`` (and a ``__Host-slipway_session`` alone is ignored). A request that
carries two session cookies (both names, or one name twice: cookie tossing, a second
cookie set by a page on a sibling domain or with a longer path) is 401 on every ``/api``
operation, the MCP endpoint and the WebSocket upgrade, before any other check: the gate
never picks one of them.

Tiers (docs/decisions.md): requests that do not authenticate, and the ``security: []``
operations, draw on ``SLIPWAY_RATE_ANON_RPM`` (60/min) per source address; authenticated
ones on the key's ``rateLimitRpm`` (at creation ``SLIPWAY_RATE_AUTH_RPM`` by default), or
``SLIPWAY_RATE_AUTH_RPM`` (120/min) per session; the deploy operations (``x-slipway-rate-tier: deploy`` in the
contract) also on ``SLIPWAY_RATE_DEPLOY_RPM`` (10/min) per key or session. A git webhook
delivery (``x-slipway-rate-tier: hook``) draws on ``SLIPWAY_RATE_HOOK_RPM`` (60/min) of its
service once its signature verifies, and on the per-address tier only when it does not
verify or names no service (``charge_hook``, ``charge_address``: app/panel/git_hooks.py),
so a flood from a provider's shared address never starves another tenant's pushes.
Address buckets are keyed by ``address_bucket``: an IPv6 client by its /64.
Every response carries ``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset`` (Unix seconds
when that bucket is full again) of the tightest bucket the request touched.

Signing in from the docs (docs/web-frontend.md "API docs"): a browser that opens ``GET
/api/docs`` without a live session (it asks for ``text/html`` before JSON and sends no
``Authorization``) is sent with 303 to the web page's sign-in, ``/sign-in?next=/api/docs``,
which comes back to the docs once signed in; an API client (``Accept: application/json``,
``*/*``, or a key) gets the documented JSON 401 as on every operation.

Sessions: a login session (OIDC) counts only when login is configured; a key session
(``POST /api/auth/key``) always, and acts as its key (role, customer, denied
permissions, the key's rate bucket and limit).

CSRF: a state-changing request (anything but GET, HEAD, OPTIONS) authenticated by the
session cookie, and ``POST /api/auth/key``, must carry ``Origin`` equal to the origin of
``SLIPWAY_PUBLIC_URL`` (without it: of the request's ``Host``), or,
without an ``Origin`` header, a non-empty ``X-Requested-With`` header; otherwise 403.
A cross-site page can do neither (a custom header needs a CORS preflight, which the
panel never grants). Requests authenticated by a key are not affected.
"""
from __future__ import annotations

import math
from urllib.parse import quote, urlsplit

import falcon

from app.config_table import FIELDS
from app.http.clientaddr import address_bucket, client_address
from app.http.errors import RATE_LIMIT_MESSAGE, ApiError, unauthorized_message
from app.partner.gate import bearer
from core.panel import access, sessions
from core.errors import Forbidden, Unauthorized
from ports.ratestore import RateStore

SESSION_COOKIE = "slipway_session"  # over plain http
HOST_SESSION_COOKIE = "__Host-slipway_session"  # with an https SLIPWAY_PUBLIC_URL
SESSION_COOKIES = (SESSION_COOKIE, HOST_SESSION_COOKIE)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
NO_CREDENTIALS = ("missing credentials: send an API key as Authorization: Bearer slw_<key_id>_<secret>"
                  " or log in at /api/auth/login for a session cookie")
#: the same without OIDC login, where /api/auth/login is 404: the session comes from a key
NO_CREDENTIALS_KEY_ONLY = ("missing credentials: send an API key as Authorization: Bearer slw_<key_id>_<secret>"
                           " or sign in with it (the web page's /sign-in, POST /api/auth/key) for a session cookie")
TWO_SESSIONS = ("two session cookies: this request carries more than one slipway_session or "
                "__Host-slipway_session cookie (a page of another site under the same domain can set one), so "
                "none is used; clear this site's cookies in the browser and sign in again")
#: operations a browser opens as a page: signed out, it is sent to the sign-in (module docstring)
SIGN_IN_PAGES = {"getPanelDocs": "/api/docs"}
SIGN_IN = "/sign-in"
CROSS_SITE = ("cross-site request refused: a state-changing request authenticated by the session cookie must "
              "carry an Origin header equal to the panel's public URL, or X-Requested-With")


def origin_of(url: str | None) -> str | None:
    """``scheme://host[:port]`` in lower case, without the scheme's default port."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = parts.port if parts.port not in (None, {"http": 80, "https": 443}[parts.scheme]) else None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


def secure_url(url: str | None) -> bool:
    """Whether ``url`` (``SLIPWAY_PUBLIC_URL``) is https: the panel's cookies are then Secure."""
    return bool(url and url.strip().lower().startswith("https://"))


def session_cookie_name(public_url: str | None) -> str:
    """The session cookie's name for a panel at ``public_url`` (module docstring)."""
    return HOST_SESSION_COOKIE if secure_url(public_url) else SESSION_COOKIE


def session_cookie(req, name: str) -> str | None:
    """The session secret ``req`` carries in the cookie ``name``, or None;
    ``ApiError(401)`` when it carries two session cookies (of either name)."""
    found = [(cookie, value) for cookie in SESSION_COOKIES for value in (req.get_cookie_values(cookie) or [])]
    if len(found) > 1:
        raise ApiError(401, TWO_SESSIONS)
    return next((value for cookie, value in found if cookie == name), None)


class PanelGate:
    def __init__(self, store, config, rates: RateStore, sources=None):
        self.store = store
        #: the plugins' auth sources (app.extensions.AuthSources), asked after keys and sessions
        self.sources = sources
        self.clock = config.clock
        self.trusted = config.trusted_proxies
        # login sessions count only with OIDC login on; key sessions always
        self.sessions = bool(getattr(config, "oidc_issuer", None))
        self.origin = origin_of(getattr(config, "public_url", None))
        self.cookie_name = session_cookie_name(getattr(config, "public_url", None))
        # a config without the tiers (a test's) has the settings' defaults
        anon = getattr(config, "rate_anon_rpm", FIELDS["rate_anon_rpm"].default)
        self.auth_rpm = getattr(config, "rate_auth_rpm", FIELDS["rate_auth_rpm"].default)
        deploy = getattr(config, "rate_deploy_rpm", FIELDS["rate_deploy_rpm"].default)
        self.by_address = rates.table("panel-address", anon / 60, anon)
        self.by_key = rates.table("panel-key", self.auth_rpm / 60, self.auth_rpm)
        self.deploys = rates.table("panel-deploy", deploy / 60, deploy)
        hook = getattr(config, "rate_hook_rpm", FIELDS["rate_hook_rpm"].default)
        self.hooks = rates.table("panel-hook", hook / 60, hook)

    #: ``security: []`` operations come through ``admit`` too (per-address tier)
    guards_open_operations = True
    guards_unknown_routes = "/api"  # routes and methods under it not in the contract: 401 before 404/405

    def session_cookie(self, req) -> str | None:
        """The secret of the request's session cookie (of this panel's name), or None; 401
        when the request carries two session cookies."""
        return session_cookie(req, self.cookie_name)

    def _headers(self, req, decisions) -> None:
        tightest = min(decisions, key=lambda d: (d.allowed, d.remaining))
        reset = math.ceil(self.clock.now().timestamp() + tightest.full_after)
        req.context.rate_headers = {"X-RateLimit-Limit": str(tightest.limit),
                                    "X-RateLimit-Remaining": str(tightest.remaining),
                                    "X-RateLimit-Reset": str(reset)}
        refused = next((d for d in decisions if not d.allowed), None)
        if refused is not None:
            raise ApiError(429, RATE_LIMIT_MESSAGE, headers={"Retry-After": str(refused.retry_after)})

    def _source(self, req) -> str:
        return client_address(req.remote_addr, req.get_header("X-Forwarded-For"), self.trusted)

    async def authenticate(self, req, *, cookies: bool = True):
        """The caller of ``req``: a ``Principal`` (API key) or a ``SessionPrincipal`` (cookie).

        Needs no operation (the WebSocket upgrade uses it too); raises ``ApiError(401)`` and
        touches no rate bucket. Without ``cookies`` (the MCP endpoint) only a key counts."""
        key = bearer(req)
        if key is None and req.is_websocket:  # docs/decisions.md: an upgrade may carry the key as ?api_key=
            key = req.get_param("api_key") or None
        cookie = self.session_cookie(req)  # two session cookies: 401, with or without a key
        if not cookies:
            cookie = None
        try:
            if key is not None or cookie is None:
                if key is None and not req.get_header("Authorization"):
                    raise Unauthorized(NO_CREDENTIALS if self.sessions else NO_CREDENTIALS_KEY_ONLY)
                return await self.store.read(access.authenticate_key, self.clock, key)
            principal = await self.store.read(sessions.authenticate_session, self.clock, cookie, users=self.sessions)
            req.context.session_secret = cookie  # what the request presented (app.http.idempotency)
            return principal
        except Unauthorized as exc:
            if not self.sources:
                raise ApiError(401, unauthorized_message("panel", exc.message, key)) from exc
            refused = exc
        try:  # after keys and sessions: the plugins' auth sources (one that raises refuses)
            principal = await self.sources.authenticate(req, self._source(req))
        except Unauthorized as exc:
            raise ApiError(401, exc.message) from exc
        if principal is None:
            raise ApiError(401, unauthorized_message("panel", refused.message, key)) from refused
        return principal

    async def session_of(self, req):
        """The session of the request's cookie (ignoring any key), or None; 401 for two."""
        cookie = self.session_cookie(req)
        if cookie is None:
            return None
        try:
            return await self.store.read(sessions.authenticate_session, self.clock, cookie, users=self.sessions)
        except Unauthorized:
            return None

    def check_origin(self, req, principal, *, always: bool = False) -> None:
        """The CSRF rule (module docstring) for a request ``principal`` authenticated; with
        ``always`` it applies whatever the method (a WebSocket upgrade is a GET)."""
        if not isinstance(principal, sessions.SessionPrincipal):
            return
        if not always and req.method.upper() in SAFE_METHODS:
            return
        self.same_site(req)

    def same_site(self, req) -> None:
        """403 unless ``req`` carries ``Origin`` equal to the panel's origin, or, without
        ``Origin``, a non-empty ``X-Requested-With``. The panel's origin is that of
        ``SLIPWAY_PUBLIC_URL``; without it, the request's own (its ``Host`` header, in the
        scheme of its ``Origin``): a cross-site page's ``Origin`` names its own site."""
        origin = req.get_header("Origin")
        if origin is not None:
            mine = self.origin
            if mine is None:
                scheme = urlsplit(origin.strip()).scheme
                host = req.get_header("Host")
                mine = origin_of(f"{scheme}://{host}") if host and scheme in ("http", "https") else None
            if mine is None or origin_of(origin) != mine:
                raise ApiError(403, CROSS_SITE)
        elif not (req.get_header("X-Requested-With") or "").strip():
            raise ApiError(403, CROSS_SITE)

    async def charge_address(self, req) -> None:
        """One request of the per-address tier (the address's /64 for IPv6); 429 past it."""
        self._headers(req, [await self.by_address.take(address_bucket(self._source(req)), self.clock.monotonic())])

    async def charge_hook(self, req, service_id: str) -> None:
        """One verified git webhook delivery of ``service_id`` (``SLIPWAY_RATE_HOOK_RPM``); 429 past it."""
        self._headers(req, [await self.hooks.take(service_id, self.clock.monotonic())])

    async def admit(self, req, op, *, cookies: bool = True):
        now = self.clock.monotonic()
        if not op.secured and op.rate_tier == "hook":  # git webhooks: charged once verified or not
            return None                                   # (app/panel/git_hooks.py)
        if not op.secured:  # the login flow: no credentials needed, per-address tier
            await self.charge_address(req)
            self.session_cookie(req)  # two session cookies: 401 here too
            return None
        try:
            principal = await self.authenticate(req, cookies=cookies)
        except ApiError as refused:
            await self.charge_address(req)
            self.send_to_sign_in(req, op, refused)
            raise
        bucket, rpm = principal.bucket_id, principal.rate_limit_rpm  # a key's id and rpm, or the session's
        if isinstance(principal, sessions.SessionPrincipal) and principal.key is None:  # login sessions: the operator's tier
            rpm = self.auth_rpm
        decisions = [await self.by_key.take(bucket, now, rate=rpm / 60, burst=rpm)]
        decisions += await self._tier(principal, op, now)
        self._headers(req, decisions)
        self.check_origin(req, principal)
        self.permit(principal, op)
        return principal

    @staticmethod
    def send_to_sign_in(req, op, refused: ApiError) -> None:
        """For a browser refused a page of ``SIGN_IN_PAGES`` (no session, an expired one), a
        303 to the web page's sign-in that comes back to it; anything else keeps its 401.
        Two session cookies keep theirs too: signing in again would not end them."""
        page = SIGN_IN_PAGES.get(op.operation_id)
        if (page is None or refused.status != 401 or refused.message == TWO_SESSIONS
                or req.get_header("Authorization") or req.method != "GET"
                or req.client_prefers(("application/json", "text/html")) != "text/html"):
            return
        headers = {"Location": f"{SIGN_IN}?next={quote(page, safe='')}", "Cache-Control": "no-store",
                   **getattr(req.context, "rate_headers", {})}
        raise falcon.HTTPStatus(falcon.HTTP_303, headers=headers)

    async def _tier(self, principal, op, now) -> list:
        """The decisions of the operation's own rate tier beyond the caller's bucket."""
        return [await self.deploys.take(principal.bucket_id, now)] if op.rate_tier == "deploy" else []

    async def enter(self, principal, op) -> None:
        """For a caller the request already admitted, one more operation (an MCP tool call,
        app/panel/mcp.py): its rate tier, then its permissions, as ``admit`` checks them."""
        refused = next((d for d in await self._tier(principal, op, self.clock.monotonic()) if not d.allowed), None)
        if refused is not None:
            raise ApiError(429, RATE_LIMIT_MESSAGE, headers={"Retry-After": str(refused.retry_after)})
        self.permit(principal, op)

    @staticmethod
    def permit(principal, op) -> None:
        """403 unless ``principal`` holds every permission ``op`` needs."""
        try:
            for permission in op.permissions:
                principal.require(permission)
        except Forbidden as exc:
            raise ApiError(403, exc.message) from exc

