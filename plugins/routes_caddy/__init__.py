"""Route provider ``caddy``: keeps a Caddy 2 server equal to the route records through
Caddy's admin API (``SLIPWAY_CADDY_ADMIN``, default ``http://127.0.0.1:2019``).

Slipway owns one HTTP server of Caddy's config, ``apps.http.servers.slipway``, listening
on ``SLIPWAY_CADDY_LISTEN`` (default ``:443``), with one route per record: a ``host``
matcher and a ``reverse_proxy`` to the upstream's ``host:port``. Its load balancing
retries a dial that fails for a few seconds (``try_duration``), so a request that
arrives while a service switches upstreams waits for the new one instead of failing.
Caddy's automatic HTTPS gets the certificates: from ACME by default, or with
``SLIPWAY_CADDY_TLS=internal`` from Caddy's own CA, through a TLS automation policy
Slipway also owns (``"@id": "slipway-tls"``, first in ``apps.tls.automation.policies``,
present only while there are hostnames: a policy without subjects would apply to every
name). Missing parent objects (``apps``, ``http``, ``servers``, ``tls``, ...) are made;
nothing else of the operator's config is touched. Each sync reads Caddy's config and
writes only what differs (so a restarted Caddy is brought back at the next interval).
Errors are raised as ``RouteProviderError``; the route worker logs them and tries again."""
from __future__ import annotations

import time
from urllib.parse import quote, urlsplit

import httpx

from ports import hookimpl
from ports.routes import RouteProvider, RouteProviderError, RouteProviderFactory, loopback_upstream, usable
from ports.common_settings import CADDY_ADMIN as ADMIN, CADDY_LISTEN as LISTEN, CADDY_TLS as TLS

SERVER = "slipway"
TLS_ID = "slipway-tls"
TRY_DURATION = "5s"  # how long a request waits for an upstream that refuses connections
TRY_INTERVAL = "250ms"
TLS_CHOICES = ("", "internal")
#: the provider's settings (declared in ports: the app reads them too, as the admin API's
#: host is never a custom domain)
SETTINGS = (ADMIN, TLS, LISTEN)
DEFAULT_ADMIN, DEFAULT_LISTEN = ADMIN.default, LISTEN.default


def dial(target: str) -> str:
    """``http://127.0.0.1:49153`` -> ``127.0.0.1:49153``: only a loopback upstream
    (``ports.routes.loopback_upstream``), anything else is a ``ValueError``."""
    found = loopback_upstream(target)
    if found is None:
        raise ValueError(f"not an http://<loopback>:<port> upstream: {target!r}")
    host, port = found
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def render_server(routes, listen: str = DEFAULT_LISTEN) -> dict:
    """The config of ``apps.http.servers.slipway`` for ``routes`` (the well-formed ones:
    ``ports.routes.usable``)."""
    routes = usable(routes)
    return {
        "listen": [listen],
        "routes": [{
            "match": [{"host": [route.hostname]}],
            "handle": [{"handler": "reverse_proxy", "upstreams": [{"dial": dial(route.target)}],
                        "load_balancing": {"try_duration": TRY_DURATION, "try_interval": TRY_INTERVAL}}],
            "terminal": True,
        } for route in sorted(routes, key=lambda r: r.hostname)],
    }


def render_tls_policy(routes, tls: str = "") -> dict | None:
    """Slipway's TLS automation policy, or None (automatic ACME; or no hostnames)."""
    routes = usable(routes)
    if tls != "internal" or not routes:
        return None
    return {"@id": TLS_ID, "subjects": sorted(r.hostname for r in routes), "issuers": [{"module": "internal"}]}


def _at(config, keys):
    node = config
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _nest(keys, value):
    for key in reversed(keys):
        value = {key: value}
    return value


class CaddyRoutes(RouteProvider):
    name = "caddy"

    def __init__(self, admin: str = DEFAULT_ADMIN, listen: str = DEFAULT_LISTEN, tls: str = "",
                 timeout: float = 10.0):
        self.admin, self.listen, self.tls = admin.rstrip("/"), listen, tls
        self.timeout = timeout  # for a whole sync, every call to the admin API included
        self._deadline = float("inf")

    def __str__(self) -> str:
        return f"Caddy at {self.admin}"

    # --- the admin API ---

    def _call(self, client, method: str, path: str, body=None):
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise RouteProviderError(f"Caddy's admin API at {self.admin}: no answer within {self.timeout:g} s")
        timeout = httpx.Timeout(min(self.timeout, remaining))
        try:
            if body is None:
                response = client.request(method, self.admin + path, timeout=timeout)
            else:
                response = client.request(method, self.admin + path, json=body, timeout=timeout)
        except httpx.HTTPError as exc:
            raise RouteProviderError(f"Caddy's admin API at {self.admin}: {exc}") from None
        if response.status_code >= 300:
            raise RouteProviderError(f"Caddy's admin API: {method} {path} answered {response.status_code}: "
                                     f"{response.text.strip()[:500]}")
        return response

    def _config(self, client):
        response = self._call(client, "GET", "/config/")
        try:
            return response.json()
        except ValueError:
            raise RouteProviderError("Caddy's admin API: GET /config/ did not answer JSON") from None

    def _set(self, client, config, keys: list, value) -> None:
        """Set ``keys`` (a path of object keys from the top) to ``value``, making the
        missing parents: a POST at the first missing key (Caddy sets or replaces an
        object's member there)."""
        if not isinstance(config, dict):
            self._call(client, "POST", "/config/", _nest(keys, value))
            return
        depth = 0
        node = config
        while depth < len(keys) - 1 and isinstance(node, dict) and keys[depth] in node \
                and isinstance(node[keys[depth]], dict):
            node = node[keys[depth]]
            depth += 1
        path = "/config/" + "/".join(quote(k, safe="") for k in keys[:depth + 1])
        self._call(client, "POST", path, _nest(keys[depth + 1:], value))

    # --- the sync ---

    def sync(self, routes) -> bool:
        """Bring Caddy up to date; ``RouteProviderError`` when it answers an error or the
        whole sync (every admin call) takes more than ``timeout`` seconds, so a deploy
        waiting on it (``app.workers.proxy_routes.ProxyRouteSync.sync_now``) never hangs."""
        self._deadline = time.monotonic() + self.timeout
        server, policy = render_server(routes, self.listen), render_tls_policy(routes, self.tls)
        changed = False
        with httpx.Client(timeout=self.timeout) as client:
            config = self._config(client)
            # the TLS policy first: the certificates of new names come from the right issuer
            policies = _at(config, ["apps", "tls", "automation", "policies"])
            policies = policies if isinstance(policies, list) else None
            mine = [i for i, p in enumerate(policies or ()) if isinstance(p, dict) and p.get("@id") == TLS_ID]
            if policy is None and mine:
                self._call(client, "DELETE", f"/id/{TLS_ID}")
                changed = True
            elif policy is not None and not mine:
                if policies is None:
                    self._set(client, config, ["apps", "tls", "automation", "policies"], [policy])
                else:  # first: a policy without subjects (the operator's catch-all) must not win
                    self._call(client, "PUT", "/config/apps/tls/automation/policies/0", policy)
                changed = True
            elif policy is not None and policies[mine[0]] != policy:
                self._call(client, "PATCH", f"/config/apps/tls/automation/policies/{mine[0]}", policy)
                changed = True
            if changed:
                config = self._config(client)
            if _at(config, ["apps", "http", "servers", SERVER]) != server:
                self._set(client, config, ["apps", "http", "servers", SERVER], server)
                changed = True
        return changed


class CaddyRoutesFactory(RouteProviderFactory):
    name = "caddy"

    def create(self, settings):
        admin = ADMIN.read(settings)
        parts = urlsplit(admin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"SLIPWAY_CADDY_ADMIN must be an http:// URL of Caddy's admin API, got {admin!r}")
        tls = TLS.read(settings)
        if tls not in TLS_CHOICES:
            raise ValueError(f"SLIPWAY_CADDY_TLS must be empty (automatic ACME) or internal, got {tls!r}")
        listen = LISTEN.read(settings)
        if ":" not in listen:
            raise ValueError(f"SLIPWAY_CADDY_LISTEN must be a listen address such as :443, got {listen!r}")
        return CaddyRoutes(admin, listen, tls)


@hookimpl
def register_route_providers():
    return [CaddyRoutesFactory()]
