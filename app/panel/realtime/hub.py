"""``Hub``: this process's channel connections. It subscribes once to the event bus and
hands each event, serialized once, to the connections that may see it; it runs a log pump
(``logs.ServiceFollower``) per service while a connection allowed to see its logs wants
them; it counts open WebSockets per key or session (``SLIPWAY_WS_PER_KEY``, 429 beyond)
and every ``RECHECK_S`` seconds re-checks their credentials in one database read."""
from __future__ import annotations

import asyncio
import logging

from app.http.errors import ApiError
from app.panel.realtime.logs import RESCAN_S, ServiceFollower, origins_of
from app.panel.services import log_json
from app.panel.realtime.sockets import GOING_AWAY, POLICY, Outbox, dumps
from app.panel.realtime.subscriptions import Connection
from core.panel import sessions as panel_sessions
from ports.events import Event

log = logging.getLogger("slipway.realtime")

RECHECK_S = 3.0  # seconds between checks of open sockets' keys and sessions (closed within 10 s)
WS_PER_KEY = 20  # SLIPWAY_WS_PER_KEY: open WebSockets per key or session, per process


class Hub:
    """This process's channel connections, the bus subscription and the log pumps."""

    def __init__(self, store, bus, runtime, calls, limit: int = 1000, *, clock=None, per_key: int = WS_PER_KEY,
                 recheck_s: float = RECHECK_S):
        self.store, self.bus, self.runtime, self.calls, self.limit = store, bus, runtime, calls, limit
        self.clock, self.per_key, self.recheck_s = clock, per_key, recheck_s
        self.sockets: dict[str, dict] = {}  # key id or "session:<id>" -> {outbox: principal}
        self._watch_task: asyncio.Task | None = None
        self.connections: set[Connection] = set()
        self.pumps: dict[str, tuple[ServiceFollower, set]] = {}
        self._handle = None
        self._everything: set = set()  # unnarrowed connections that may see logs
        self._everything_task: asyncio.Task | None = None

    def start(self) -> None:
        if self._handle is None:
            self._handle = self.bus.subscribe(self.deliver)

    async def stop(self) -> None:
        if self._handle is not None:
            self.bus.unsubscribe(self._handle)
            self._handle = None
        for conn in list(self.connections):
            conn.outbox.close(GOING_AWAY, "server shutting down")
        if self._everything_task is not None:
            self._everything_task.cancel()
            self._everything_task = None
        if self._watch_task is not None:
            self._watch_task.cancel()
            self._watch_task = None
        self._everything.clear()
        for follower, _ in self.pumps.values():
            follower.stop()
        self.pumps.clear()

    def deliver(self, event: Event) -> None:
        """On the event loop: one event to every connection that may see it."""
        text = None
        for conn in tuple(self.connections):
            if conn.wants(event):
                if text is None:
                    text = dumps(event.envelope())
                conn.outbox.offer(text)

    # Open sockets per credential (channel and log follows alike) and their re-check.

    def hold(self, principal, outbox: Outbox) -> None:
        """Count a socket of ``principal`` (before it is accepted); past ``per_key`` in this
        process it is ``ApiError(429)``. Check and count happen in one step on the loop."""
        held = self.sockets.get(principal.bucket_id, {})
        if len(held) >= self.per_key:
            raise ApiError(429, f"too many open WebSockets: a key or session holds at most {self.per_key} "
                                "at once on this server process (SLIPWAY_WS_PER_KEY); close one first")
        self.sockets.setdefault(principal.bucket_id, {})[outbox] = principal
        if self._watch_task is None and self.store is not None and self.clock is not None:
            self._watch_task = asyncio.get_running_loop().create_task(self._watch(), name="ws-credentials")

    def release(self, principal, outbox: Outbox) -> None:
        held = self.sockets.get(principal.bucket_id)
        if held is not None:
            held.pop(outbox, None)
            if not held:
                del self.sockets[principal.bucket_id]

    async def _watch(self) -> None:
        """While sockets are open: every ``recheck_s`` seconds one read of all their keys and
        sessions; those that no longer hold have their sockets closed with 1008."""
        try:
            while self.sockets:
                await asyncio.sleep(self.recheck_s)
                await self.recheck()
        finally:
            self._watch_task = None

    async def recheck(self) -> None:
        held = [(outbox, principal) for sockets in self.sockets.values() for outbox, principal in sockets.items()]
        if not held:
            return
        try:
            reasons = await self.store.run(panel_sessions.lapsed, self.store.uow(transaction=False), self.clock,
                                           [principal for _, principal in held])
        except Exception:  # the database hiccupped: look again next round
            log.warning("could not re-check the credentials of open WebSockets", exc_info=True)
            return
        for (outbox, _), reason in zip(held, reasons):
            if reason is not None:
                outbox.end(POLICY, reason)

    def add(self, conn: Connection) -> None:
        self.connections.add(conn)
        self._follow_everything(conn, conn.services is None and conn.may_logs)

    def remove(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self._follow_everything(conn, False)
        for service_id in list(conn.log_services):
            self._release_logs(conn, service_id)
        conn.log_services = set()

    def narrow(self, conn: Connection, visible: list | None) -> None:
        """Apply a subscribe: ``visible`` the services (entities) it named that its key may
        see, or None for everything again."""
        conn.services = None if visible is None else {s.id for s in visible}
        self._follow_everything(conn, visible is None and conn.may_logs)
        wanted = {s.id: s for s in visible or ()} if conn.may_logs else {}
        for service_id in conn.log_services - set(wanted):
            self._release_logs(conn, service_id)
        for service_id, service in wanted.items():
            if service_id not in conn.log_services:
                self._want_logs(conn, service)
        conn.log_services = set(wanted)

    def _want_logs(self, conn: Connection, service) -> None:
        entry = self.pumps.get(service.id)
        if entry is None:
            def on_line(line, origin, service_id=service.id, customer_id=service.customer_id):
                self.deliver(Event("service.logs", {"service_id": service_id, **log_json(line, origin)},
                                   service_id, customer_id))

            follower = ServiceFollower(self.runtime, self.calls, service.id, on_line,
                                       describe=origins_of(self.store, self.runtime, service.id))
            follower.start()
            entry = self.pumps[service.id] = (follower, set())
        entry[1].add(conn)

    def _release_logs(self, conn: Connection, service_id: str) -> None:
        entry = self.pumps.get(service_id)
        if entry is None:
            return
        entry[1].discard(conn)
        if not entry[1]:
            entry[0].stop()
            del self.pumps[service_id]


    # An unnarrowed connection gets every event its key may see (docs/decisions.md), log lines
    # included: while one is open, every running service it may see is followed, the set
    # read again every RESCAN_S seconds so new, started and stopped services are noticed.

    def _follow_everything(self, conn: Connection, on: bool) -> None:
        if on:
            self._everything.add(conn)
            if self._everything_task is None:
                self._everything_task = asyncio.get_running_loop().create_task(
                    self._pump_everything(), name="follow-every-service")
        else:
            self._everything.discard(conn)

    async def _pump_everything(self) -> None:
        try:
            while self._everything:
                try:
                    running = await self.store.run(_running_services, self.store.uow(write=False))
                except Exception:  # try again next round
                    log.exception("could not list running services for log following")
                    running = None
                if running is not None:
                    self._hold_everything(running)
                await asyncio.sleep(RESCAN_S)
        finally:
            self._hold_everything([])
            self._everything_task = None

    def _hold_everything(self, running: list) -> None:
        customers = {conn.customer_id for conn in self._everything}
        wanted = {s.id: s for s in running if None in customers or s.customer_id in customers}
        for service_id in [sid for sid, (_, holders) in self.pumps.items() if _EVERYTHING in holders]:
            if service_id not in wanted:
                self._release_logs(_EVERYTHING, service_id)
        for service_id, service in wanted.items():
            entry = self.pumps.get(service_id)
            if entry is None or _EVERYTHING not in entry[1]:
                self._want_logs(_EVERYTHING, service)


_EVERYTHING = object()  # the holder of the pumps kept for unnarrowed connections


def _running_services(uow) -> list:
    with uow.reading():
        return uow.services.with_status("running")
