"""What the loaded plugins' behaviour hooks registered (``app.registries``: the rows that
select ``behaviour``), checked once at start-up: a registration Slipway cannot serve stops
it, naming the registration."""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.panel import access
from ports.extensions import NAME, ROUTE_METHODS, ROUTE_PATH, AuthSource, Job, Route, Subscriber

#: the rate tiers a plugin's route may draw on besides the caller's bucket
RATE_TIERS = (None, "deploy")


class ExtensionError(ValueError):
    """A plugin's registration Slipway cannot serve (start-up stops naming it)."""


@dataclass(frozen=True)
class Extensions:
    """What the loaded plugins' behaviour hooks registered, checked."""

    routes: tuple = ()
    jobs: tuple = ()
    subscribers: tuple = ()
    auth_sources: tuple = ()

    @classmethod
    def collect(cls, pm) -> Extensions:
        from app.registries import entries

        routes, jobs = entries(pm, "routes"), entries(pm, "jobs")
        subscribers, sources = entries(pm, "event_subscribers"), entries(pm, "auth_sources")
        _check_routes(routes)
        _check_named(jobs, Job, "job")
        for job in jobs:
            if not (isinstance(job.interval, (int, float)) and job.interval > 0):
                raise ExtensionError(f"job {job.name!r}: interval must be a number of seconds above 0")
        _check_named(subscribers, Subscriber, "event subscriber")
        _check_named(sources, AuthSource, "auth source")
        return cls(routes, jobs, subscribers, sources)


def _check_named(items, kind, what: str) -> None:
    seen = set()
    for item in items:
        if not isinstance(item, kind):
            raise ExtensionError(f"a plugin registered a {what} that is not a ports.extensions.{kind.__name__}")
        if not NAME.match(item.name or ""):
            raise ExtensionError(f"{what} name {item.name!r} must match {NAME.pattern}")
        if item.name in seen:
            raise ExtensionError(f"two plugins register the {what} {item.name!r}")
        seen.add(item.name)


def _check_routes(routes) -> None:
    seen, ids = set(), set()
    for route in routes:
        if not isinstance(route, Route):
            raise ExtensionError("a plugin registered a route that is not a ports.extensions.Route")
        where = f"route {route.method} /api/ext/{route.plugin}{route.path}"
        if not NAME.match(route.plugin or ""):
            raise ExtensionError(f"{where}: plugin name must match {NAME.pattern}")
        if route.method not in ROUTE_METHODS:
            raise ExtensionError(f"{where}: method must be one of {', '.join(ROUTE_METHODS)}")
        if not ROUTE_PATH.match(route.path or ""):
            raise ExtensionError(f"{where}: path must match {ROUTE_PATH.pattern}")
        if not re.match(r"^[A-Za-z][A-Za-z0-9]{0,63}$", route.operation_id or ""):
            raise ExtensionError(f"{where}: operation_id must be letters and digits")
        if route.permission not in access.PERMISSIONS:
            raise ExtensionError(f"{where}: permission must be one of {', '.join(access.PERMISSIONS)}")
        if route.rate_tier not in RATE_TIERS:
            raise ExtensionError(f"{where}: rate_tier must be None or 'deploy'")
        key = (route.method, route.plugin, re.sub(r"\{[^}]*\}", "{}", route.path))
        if key in seen or (route.plugin, route.operation_id) in ids:
            raise ExtensionError(f"{where}: registered twice")
        if route.mcp:
            from app.extensions.routes import tool_name
            from app.panel.mcp import TOOLS

            if tool_name(route) in TOOLS:
                raise ExtensionError(f"{where}: its MCP tool {tool_name(route)!r} is one of Slipway's own tools")
        seen.add(key)
        ids.add((route.plugin, route.operation_id))
