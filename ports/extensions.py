"""What behaviour plugins hand Slipway, and what Slipway hands them back.

The four behaviour hooks of :mod:`ports.hookspecs` (``register_routes``,
``register_jobs``, ``register_event_subscribers``, ``register_auth_sources``) return
lists of the objects below. Their code is plain, synchronous Python: Slipway runs it in
worker threads, never on the event loop, so a slow plugin holds up no other request.

Every call gets an :class:`ExtensionContext`: the plugin's settings (the ``SLIPWAY_*``
variables, read-only) and the clock. A plugin keeps its own state where it likes (its
own table, a file, a service); Slipway gives it no handle on the panel's database.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

#: a plugin's name in ``/api/ext/<plugin>/...``, a job's and a subscriber's name
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
#: the path of a route below ``/api/ext/<plugin>``: segments and ``{parameters}``
ROUTE_PATH = re.compile(r"^(/([a-z0-9][a-z0-9_.-]*|\{[a-z][a-z0-9_]*\}))+$")
ROUTE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class ExtensionContext:
    """What every plugin call gets: ``settings`` (the ``SLIPWAY_*`` variables) and ``clock``
    (``ports.clock.Clock``: ``now()`` and ``monotonic()``)."""

    settings: Mapping[str, str]
    clock: object


# --- register_routes ------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who called a plugin's route: the role (``admin``, ``customer``, ``viewer``), the
    customer it is bound to (role ``customer``), its permissions, and how it signed in
    (``key``, ``session`` or ``source:<auth source>``) with that credential's id."""

    role: str
    customer_id: str | None
    permissions: frozenset
    credential: str


@dataclass(frozen=True)
class RouteRequest:
    """A request to a plugin's route, already admitted by the panel's gate and held to
    the route's schemas: ``params`` (path parameters, by name), ``query`` (the query
    string, first value of each name), ``body`` (the JSON body, or None)."""

    caller: Caller
    params: dict
    query: dict
    body: object
    context: ExtensionContext


@dataclass(frozen=True)
class RouteReply:
    """What a route answers: a status and a JSON body (None: no body)."""

    status: int = 200
    body: object = None


class RouteError(Exception):
    """Raised by a route's handler: the panel's error answer with this status (4xx) and
    message (and ``fields``, ``{name: problem}``)."""

    def __init__(self, status: int, message: str, fields: dict | None = None):
        if not 400 <= status < 500:
            raise ValueError("a RouteError is a client error: status 400-499")
        super().__init__(message)
        self.status, self.message, self.fields = status, message, fields or {}


@dataclass(frozen=True)
class Route:
    """One HTTP operation under ``/api/ext/<plugin><path>``.

    ``permission``: the panel permission a caller must hold (one of
    ``core.panel.access.PERMISSIONS``); ``rate_tier``: ``None`` (the caller's bucket
    only) or ``"deploy"``; ``handler(RouteRequest) -> RouteReply``; ``request_schema`` /
    ``response_schema``: JSON Schemas shown in the served contract (the request body is
    validated against its schema: 422 naming the field); ``mcp``: also an MCP tool named
    ``<plugin>_<operation_id>`` (a name of one of Slipway's own tools stops start-up).
    """

    plugin: str
    method: str
    path: str
    operation_id: str
    permission: str
    handler: Callable[[RouteRequest], RouteReply]
    summary: str = ""
    description: str = ""
    rate_tier: str | None = None
    request_schema: dict | None = None
    response_schema: dict = field(default_factory=lambda: {"type": "object"})
    query: dict = field(default_factory=dict)  # name -> JSON Schema of a query parameter
    mcp: bool = False


# --- register_jobs --------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """``run(ExtensionContext)`` every ``interval`` seconds (as the clock counts), in a worker
    thread of each Slipway process that runs the workers, first at start-up; stopped at
    shutdown (a run in progress finishes; none starts after). A run that raises is
    logged and the next one runs on time. Runs in several processes may overlap: a job
    that must run once across them takes its own lock."""

    name: str
    interval: float
    run: Callable[[ExtensionContext], None]


# --- register_event_subscribers -------------------------------------------------------


@dataclass(frozen=True)
class DeliveredEvent:
    """One event, as every subscriber receives it.

    ``id``: the outbox row's id (increasing; the same event delivered again has the same
    id: use it to drop repeats). ``topic``: ``panel.service.status``,
    ``panel.deploy.progress``, ``panel.backup.progress``, ``panel.timeline`` or
    ``partner.ledger``. ``data``: the event's body (the WebSocket envelope's ``data``, a
    timeline event, a ledger event). ``service_id``, ``customer_id``: set for panel
    events. ``at``: when it was recorded."""

    id: int
    topic: str
    data: dict
    at: datetime
    service_id: str | None = None
    customer_id: str | None = None


@dataclass(frozen=True)
class Subscriber:
    """``handle(DeliveredEvent, ExtensionContext)`` for every event, in order, after the
    transaction that made it committed, never in the request that caused it, at least
    once (a process that stops before recording the delivery delivers it again after its
    restart). A handler that raises gets the same event again later (backing off); the
    events after it wait."""

    name: str
    handle: Callable[[DeliveredEvent, ExtensionContext], None]


# --- register_auth_sources ------------------------------------------------------------


@dataclass(frozen=True)
class RequestView:
    """What an auth source sees of a request: ``method``, ``path``, ``headers`` (lower-case
    names, first value of each) and ``client`` (the caller's address)."""

    method: str
    path: str
    headers: Mapping[str, str]
    client: str


@dataclass(frozen=True)
class Identity:
    """What an auth source answers for a request it recognises: the ``subject`` (who, for
    its rate bucket and the audit trail), a ``role`` of the panel (``admin``,
    ``customer``, ``viewer``) and, for ``customer``, the existing panel customer it acts
    for; ``rate_limit_rpm`` (default ``SLIPWAY_RATE_AUTH_RPM``)."""

    subject: str
    role: str
    customer_id: str | None = None
    rate_limit_rpm: int | None = None


@dataclass(frozen=True)
class AuthSource:
    """``authenticate(RequestView, ExtensionContext) -> Identity | None``, asked (in plugin
    order) only when a request's API key or session did not authenticate it. ``None``:
    not mine (the next source is asked; with none left the request is 401). Raising
    refuses the request with 401: it never lets a request through. An identity naming a
    role or customer that does not exist is 401 too."""

    name: str
    authenticate: Callable[[RequestView, ExtensionContext], Identity | None]


__all__ = ["AuthSource", "Caller", "DeliveredEvent", "ExtensionContext", "Identity", "Job", "RequestView",
           "Route", "RouteError", "RouteReply", "RouteRequest", "Subscriber"]
