"""The route-provider port: how the route records (``core.panel.routes.Route``, hostname
-> upstream) reach a reverse proxy. A provider plugin registers factories
(``register_route_providers``); ``SLIPWAY_ROUTES`` names the one the server uses, and
``app.workers.proxy_routes`` calls its ``sync`` with every record, every
``SLIPWAY_ROUTES_INTERVAL`` seconds and when a deploy switches a service's upstream."""
from __future__ import annotations

import ipaddress
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from urllib.parse import urlsplit

from core.panel.routes import Route  # noqa: F401 (part of the port)


log = logging.getLogger("slipway.routes")
_HOST_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


def loopback_upstream(target) -> tuple[str, int] | None:
    """``(host, port)`` of ``target`` when it is exactly ``http://<loopback IP>:<port>``
    (what ``core.panel.routes.upstream`` writes), else None."""
    if not isinstance(target, str) or not target.isascii() or any(c.isspace() for c in target):
        return None
    try:
        parts = urlsplit(target)
        port = parts.port
        address = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return None
    if parts.scheme != "http" or parts.username is not None or parts.password is not None \
            or parts.path not in ("", "/") or parts.query or parts.fragment or not port:
        return None
    if not address.is_loopback:
        return None
    return str(address), port


def well_formed(route) -> bool:
    """Whether a record may reach a proxy's config: its hostname a lower-case RFC 1123
    name (labels of ``a-z``, ``0-9``, inner ``-``; at most 253 characters) and its target
    a loopback upstream (``loopback_upstream``). Whatever the records hold, nothing else
    (quotes, backticks, spaces, another host) is ever written into a proxy's config."""
    name = getattr(route, "hostname", None)
    if not isinstance(name, str) or not name.isascii() or not 0 < len(name) <= 253:
        return False
    if not all(_HOST_LABEL.fullmatch(label) for label in name.split(".")):
        return False
    return loopback_upstream(getattr(route, "target", None)) is not None


def usable(routes) -> list:
    """The records that are ``well_formed``; the others are logged and left out (one bad
    record never keeps the others from the proxy)."""
    kept = []
    for route in routes:
        if well_formed(route):
            kept.append(route)
        else:
            log.warning("route record left out of the proxy: hostname %r, target %r",
                        getattr(route, "hostname", None), getattr(route, "target", None))
    return kept


class RouteProviderError(RuntimeError):
    """The proxy could not be brought up to date (it is tried again at the next interval)."""


class RouteProvider(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The value of ``SLIPWAY_ROUTES`` that selects this provider."""

    @abstractmethod
    def sync(self, routes: list) -> bool:
        """Make the proxy serve exactly ``routes`` (a list of ``Route``, by hostname);
        blocking, returns once the proxy serves them (or has been handed them, for a proxy
        that reloads by itself). Returns whether it changed anything; raises
        ``RouteProviderError`` (or any exception) when it could not."""


class RouteProviderFactory(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The value of ``SLIPWAY_ROUTES`` that selects this provider."""

    @abstractmethod
    def create(self, settings: Mapping[str, str]) -> RouteProvider | None:
        """The provider, configured from its ``SLIPWAY_*`` settings; ``None`` when the
        settings leave it off (``file`` without ``SLIPWAY_ROUTES_FILE``). A bad setting is
        a ``ValueError`` naming the variable (start-up stops with it)."""
