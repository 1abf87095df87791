"""The behaviour hooks at work (``ports.hookspecs``, ``ports.extensions``): the plugins'
routes in the panel contract and behind its gate, their background jobs, their event
subscribers fed from the persisted outbox, and their auth sources.

Plugin code is synchronous and runs in threads of its own (``EngineCalls`` named
``slipway-ext``), never on the event loop: a plugin that blocks slows only itself.
"""
from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
import re
from dataclasses import dataclass

from peewee import fn

from app.engine_calls import CallTimedOut
from app.http.errors import ApiError
from app.http.pipeline import Reply
from app.workers.loop import Background
from core.errors import Unauthorized
from core.panel import access
from core.panel.sessions import KeySessionPrincipal, SessionPrincipal
from ports.extensions import (NAME, ROUTE_METHODS, ROUTE_PATH, AuthSource, Caller, DeliveredEvent,
                              ExtensionContext, Job, RequestView, Route, RouteError, RouteReply, RouteRequest,
                              Subscriber)

log = logging.getLogger("slipway.extensions")

#: where the plugins' routes live, below the panel API
PREFIX = "/api/ext"
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
    def collect(cls, pm) -> "Extensions":
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
            from app.panel.mcp import TOOLS

            if tool_name(route) in TOOLS:
                raise ExtensionError(f"{where}: its MCP tool {tool_name(route)!r} is one of Slipway's own tools")
        seen.add(key)
        ids.add((route.plugin, route.operation_id))


# --- routes -------------------------------------------------------------------------------


def operation_id(route: Route) -> str:
    return f"ext_{route.plugin}_{route.operation_id}"


def path_of(route: Route) -> str:
    return f"{PREFIX}/{route.plugin}{route.path}"


def add_to_document(document: dict, routes) -> None:
    """The plugins' routes as operations of the panel contract (``document``, before it is
    compiled): tagged with the plugin's name, with the permission, rate tier, parameters
    and schemas the plugin declared, and the panel's error answers."""
    paths = document.setdefault("paths", {})
    tags = document.setdefault("tags", [])
    named = {tag.get("name") for tag in tags}
    for route in routes:
        if route.plugin not in named:
            tags.append({"name": route.plugin, "description": f"Added by the plugin {route.plugin}."})
            named.add(route.plugin)
        parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "maxLength": 200}}
                      for name in re.findall(r"\{([a-z][a-z0-9_]*)\}", route.path)]
        parameters += [{"name": name, "in": "query", "required": False, "schema": copy.deepcopy(schema)}
                       for name, schema in sorted(route.query.items())]
        responses = {"200": {"description": route.summary or "The plugin's answer",
                             "content": {"application/json": {"schema": copy.deepcopy(route.response_schema)}}},
                     "401": {"$ref": "#/components/responses/Unauthorized"},
                     "403": {"$ref": "#/components/responses/Forbidden"},
                     "429": {"$ref": "#/components/responses/RateLimited"}}
        if route.query or parameters:
            responses["400"] = {"$ref": "#/components/responses/BadRequest"}
        operation = {"operationId": operation_id(route), "tags": [route.plugin],
                     "summary": route.summary or f"{route.method} {path_of(route)}",
                     "description": (route.description + "\n\n" if route.description else "")
                     + f"Added by the plugin `{route.plugin}`; needs `{route.permission}`.",
                     "x-slipway-permission": route.permission, "x-slipway-extension": route.plugin,
                     "responses": responses}
        if route.rate_tier:
            operation["x-slipway-rate-tier"] = route.rate_tier
        if parameters:
            operation["parameters"] = parameters
        if route.request_schema is not None:
            operation["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": copy.deepcopy(route.request_schema)}}}
            responses["400"] = {"$ref": "#/components/responses/BadRequest"}
            responses["413"] = {"$ref": "#/components/responses/PayloadTooLarge"}
            responses["415"] = {"$ref": "#/components/responses/UnsupportedMediaType"}
            responses["422"] = {"$ref": "#/components/responses/ValidationError"}
        paths.setdefault(path_of(route), {})[route.method.lower()] = operation


def caller_of(principal) -> Caller:
    """What a plugin learns of the panel principal that called it."""
    if isinstance(principal, access.SourcePrincipal):
        role, credential = principal.role, f"source:{principal.source}"
    elif isinstance(principal, KeySessionPrincipal):
        role, credential = principal.key.role, "session"
    elif isinstance(principal, SessionPrincipal):
        role, credential = principal.user.role, "session"
    else:
        role, credential = principal.key.role, "key"
    return Caller(role=role, customer_id=principal.customer_id, permissions=frozenset(principal.permissions),
                  credential=credential)


def route_handlers(routes, context: ExtensionContext, calls) -> dict:
    """``{operation id: handler}`` for the pipeline (app.http.pipeline): each runs the
    plugin's handler in a thread, at most a quarter of the threads per caller."""
    return {operation_id(route): RouteHandler(route, context, calls) for route in routes}


class RouteHandler:
    """The pipeline's handler of one plugin route: the call made a ``RouteRequest`` (path
    values apart from the query's), the plugin's handler run on ``calls`` (the engine-call
    pool, shared fairly between callers), its ``RouteError`` made the API's error."""

    def __init__(self, route: Route, context: ExtensionContext, calls):
        self.route, self.context, self.calls = route, context, calls
        self.path_names = frozenset(re.findall(r"\{([a-z][a-z0-9_]*)\}", route.path))

    async def __call__(self, call):
        names = self.path_names
        request = RouteRequest(caller=caller_of(call.caller),
                               params={k: v for k, v in call.params.items() if k in names},
                               query={k: v for k, v in call.params.items() if k not in names},
                               body=call.body, context=self.context)
        try:
            reply = await self.calls.run_for(call.caller.bucket_id, self.route.handler, request)
        except RouteError as exc:
            raise ApiError(exc.status, exc.message, fields=exc.fields) from None
        if not isinstance(reply, RouteReply):
            raise RuntimeError(f"the plugin route {operation_id(self.route)} answered {type(reply).__name__}, "
                               "not a RouteReply")
        return Reply(reply.status, reply.body)


def tool_name(route: Route) -> str:
    """The MCP tool a route offered as one is: ``<plugin>_<operation id>``."""
    return f"{route.plugin}_{route.operation_id}"


def mcp_tools(routes) -> dict:
    """``{tool name: operation id}`` of the routes their plugin offers as MCP tools (none
    is named as a built-in tool: ``_check_routes``)."""
    return {tool_name(route): operation_id(route) for route in routes if route.mcp}


# --- auth sources -------------------------------------------------------------------------


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


# --- jobs ---------------------------------------------------------------------------------


class ExtensionJobs(Background):
    """Each plugin job every ``interval`` seconds (as the clock counts), in a thread."""

    TICK_S = 1.0  # how often the clock is looked at while waiting

    def __init__(self, jobs, context: ExtensionContext, calls):
        self.jobs, self.context, self.calls = tuple(jobs), context, calls

    def tasks(self) -> dict:
        return {f"ext-job-{job.name}": functools.partial(self._run, job) for job in self.jobs}

    async def _run(self, job: Job) -> None:
        clock = self.context.clock
        while True:
            started = clock.monotonic()
            try:
                await self.calls.run(job.run, self.context)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 (the next run is on time)
                log.exception("plugin job %s failed", job.name)
            due = started + job.interval
            while (left := due - clock.monotonic()) > 0:
                await asyncio.sleep(min(left, self.TICK_S))


# --- event subscribers --------------------------------------------------------------------


class OutboxDelivery(Background):
    """Hands every outbox event to every subscriber, in order, at least once: a delivery
    is recorded (``event_delivery``) only after the subscriber returned, so an event whose
    delivery a stop interrupted is delivered again after the restart. A subscriber that
    raises gets the same event again after ``RETRY_S`` (doubling up to ``RETRY_MAX_S``);
    its later events wait. Events every subscriber has are deleted.

    One process at a time delivers a subscriber's events, whichever number of processes
    share the database: the one whose worker lease (``lease``) holds the subscriber's
    claim (``event_subscriber_claim``). Another process takes the claim over only once
    that lease is gone (a clean stop drops it) or stale (``core.panel.leases.STALE_S``
    after a crash), so a subscriber never hears a later event from one process while an
    earlier one is still in another's hands."""

    POLL_S = 1.0  # between looks when nothing woke it (events of other processes)
    BATCH = 100
    RETRY_S, RETRY_MAX_S = 1.0, 60.0

    def __init__(self, store, subscribers, context: ExtensionContext, calls, lease, bus=None):
        self.store, self.subscribers, self.context, self.calls = store, tuple(subscribers), context, calls
        self.lease, self.bus = lease, bus
        self._handle = None
        self._retry_at: dict[str, float] = {}
        self._backoff: dict[str, float] = {}

    def tasks(self) -> dict:
        return {"event-outbox": self._run}

    def start(self) -> None:
        super().start()
        if self.bus is not None:  # a committed event wakes the delivery at once
            self._handle = self.bus.subscribe(lambda event: self.wake())

    async def stop(self) -> None:
        if self._handle is not None and self.bus is not None:
            self.bus.unsubscribe(self._handle)
            self._handle = None
        await super().stop()

    async def _run(self) -> None:
        await self.lease.hold()  # the lease is written before a claim names it
        while True:
            try:
                busy = await self.calls.run(self.deliver)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 (the database went away: the next round tries again)
                log.exception("event outbox delivery failed")
                busy = False
            if not busy:
                await self.idle(self.POLL_S)

    def deliver(self) -> bool:
        """One round (in a thread): each subscriber's next events; then the outbox pruned.
        True when a subscriber may have more waiting."""
        more = False
        now = self.context.clock.monotonic()
        for subscriber in self.subscribers:
            if self._retry_at.get(subscriber.name, 0) > now:
                continue
            if not self._pending(subscriber.name, limit=1):  # nothing waits: no claim written
                continue
            if not self._claim(subscriber.name):  # another process delivers its events
                continue
            more |= self._deliver_to(subscriber)
        self._prune()
        return more

    def _claim(self, name: str) -> bool:
        """Whether this process delivers ``name``'s events now: it holds the claim, or
        takes it from a holder whose worker lease is gone or stale (one short write
        transaction; the database decides between processes asking at once)."""
        from core.panel.leases import stale_before

        m = self.store.models
        C, L = m.EventSubscriberClaim, m.WorkerLease
        me, now = self.lease.id, self.context.clock.now()
        live = L.select(L.worker_id).where(L.heartbeat_at >= stale_before(self.context.clock))
        with self.store.uow() as uow:
            C.insert(subscriber=name, holder=me, claimed_at=now).on_conflict_ignore().execute()
            held = C.update(holder=me, claimed_at=now).where(
                (C.subscriber == name) & ((C.holder == me) | C.holder.not_in(live))).execute()
            uow.commit()
        return held == 1

    def _pending(self, name: str, limit: int = BATCH) -> list:
        m = self.store.models
        O, D = m.EventOutbox, m.EventDelivery
        with self.store.uow(write=False).reading():
            done = D.select(D.event_id).where(D.subscriber == name)
            return list(O.select().where(O.id.not_in(done)).order_by(O.id).limit(limit))

    def _deliver_to(self, subscriber: Subscriber) -> bool:
        rows = self._pending(subscriber.name)
        D = self.store.models.EventDelivery
        for row in rows:
            event = DeliveredEvent(id=row.id, topic=row.topic, data=json.loads(row.data), at=row.at,
                                   service_id=row.service_id, customer_id=row.customer_id)
            try:
                subscriber.handle(event, self.context)
            except Exception:  # noqa: BLE001 (delivered again later; the events after it wait)
                wait = self._backoff.get(subscriber.name, self.RETRY_S / 2) * 2
                self._backoff[subscriber.name] = min(wait, self.RETRY_MAX_S)
                self._retry_at[subscriber.name] = self.context.clock.monotonic() + self._backoff[subscriber.name]
                log.exception("event subscriber %s failed on event %s (%s); trying again in %.0f s",
                              subscriber.name, row.id, row.topic, self._backoff[subscriber.name])
                return False
            self._backoff.pop(subscriber.name, None)
            with self.store.uow() as uow:
                D.insert(subscriber=subscriber.name, event_id=row.id,
                         delivered_at=self.context.clock.now()).on_conflict_ignore().execute()
                uow.commit()
        return len(rows) == self.BATCH

    def _prune(self) -> None:
        """Delete the events every current subscriber has, and their delivery rows; never
        the newest event (SQLite numbers a new row one above the highest left: deleting
        the highest would hand its id to the next event, which a subscriber's delivery
        record would then claim already delivered)."""
        m = self.store.models
        O, D = m.EventOutbox, m.EventDelivery
        names = [s.name for s in self.subscribers]
        with self.store.uow() as uow:
            done = (D.select(D.event_id).where(D.subscriber.in_(names)).group_by(D.event_id)
                    .having(fn.COUNT(D.event_id) >= len(names)))
            newest = O.select(fn.MAX(O.id))
            gone = O.delete().where(O.id.in_(done) & (O.id < newest)).execute()
            if gone:
                D.delete().where(D.event_id.not_in(O.select(O.id))).execute()
            uow.commit()
