"""The panel's real-time WebSockets: the channel ``GET /api/ws`` and log following
``GET /api/services/{id}/logs?follow=true``.

- ``Hub`` holds this process's channel connections. It subscribes once to the event bus
  and hands each event, serialized once, to the connections that may see it: a
  ``customer`` key only its own customer's services, a key without ``services:logs`` no
  ``service.logs``, a connection that sent ``subscribe`` only the services it named.
- Every connection has a bounded queue (``SLIPWAY_WS_QUEUE``, 1000 messages). A client
  that lets it fill up is disconnected (close code 1008 and a reason) instead of making
  the server hold an ever-growing backlog.
- ``service.logs``: a log pump per service, in the process whose clients want it. It is
  started when the first connection allowed to see the service's logs wants them (it
  subscribed to the service by name, or it is unnarrowed: then every running service its
  key may see is followed) and stopped when the last such connection leaves or narrows
  its subscription away; its lines go to this process's connections only (never through the shared bus:
  each process reads the engine itself, so lines are neither duplicated nor pushed
  through PostgreSQL).
- Credentials: a key or session holds at most ``SLIPWAY_WS_PER_KEY`` (20) open
  WebSockets in this process (channel and log follows together; another upgrade is 429
  ``rate_limited``). Every ``RECHECK_S`` seconds, while any is open, one read of the
  database checks the keys and sessions of all of this process's sockets (so a revoke or
  logout in any process sharing the database counts); the sockets of a key that was
  revoked or expired, or of a session that ended or whose user changed, are closed with
  1008 and the reason.
- A connection's ``subscribe`` messages beyond ``SUBSCRIBES_PER_S`` (5) in any second are
  answered with an ``error`` and ignored (the subscription stays as it was).
- ``ServiceFollower`` follows every container of a service: a thread per container
  reads ``runtime.follow_logs``; every couple of seconds the container list is read
  again, so restarted and redeployed containers are followed too. Stopping it closes the
  engine streams, which ends the threads.
"""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import threading
from datetime import datetime, timezone

from app.http.errors import ApiError
from app.http.pipeline import Upgradable, time_param
from app.http.timefmt import rfc3339
from core.panel import sessions as panel_sessions
from core.panel import services as core_services
from core.errors import NotFound
from ports.events import Event

log = logging.getLogger("slipway.realtime")

RESCAN_S = 2.0
SLOW_CLIENT = 1008  # policy violation: the client does not read fast enough
POLICY = 1008  # also: the credentials of the socket no longer hold
GOING_AWAY = 1001
MAX_SUBSCRIBE = 200  # service ids in one subscribe message
RECHECK_S = 3.0  # seconds between checks of open sockets' keys and sessions (closed within 10 s)
SUBSCRIBES_PER_S = 5  # subscribe messages a connection may send in any one second
WS_PER_KEY = 20  # SLIPWAY_WS_PER_KEY: open WebSockets per key or session, per process
ENDED_GRACE_S = 1.0  # a socket ended by the server that cannot send its close frame is dropped after it


def dumps(message: dict) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def now_stamp() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Outbox:
    """A bounded queue of text messages for one WebSocket; ``offer`` never blocks (it
    runs on the event loop for every event), ``overflowed`` once the client fell behind."""

    def __init__(self, limit: int):
        self.limit = limit
        self._items: collections.deque = collections.deque()
        self._ready = asyncio.Event()
        self.overflowed = False
        self.closing: tuple | None = None  # (code, reason) asked for by the server
        self.ended = asyncio.Event()  # set by ``end``

    def offer(self, text: str) -> bool:
        if self.overflowed or self.closing:
            return False
        if len(self._items) >= self.limit:
            self.overflowed = True
            self._items.clear()
            self._ready.set()
            return False
        self._items.append(text)
        self._ready.set()
        return True

    def close(self, code: int, reason: str) -> None:
        self.closing = (code, reason)
        self._ready.set()

    def end(self, code: int, reason: str) -> None:
        """Close now: drop what waits (the client may no longer see it) and close even when
        the pump is stuck sending to a client that does not read (``serve``)."""
        if self.closing is None:
            self.closing = (code, reason)
        self._items.clear()
        self._ready.set()
        self.ended.set()

    async def next(self) -> str | None:
        """The next message; None when the socket must be closed (overflow or server close)."""
        while not self._items:
            if self.overflowed or self.closing:
                return None
            self._ready.clear()
            await self._ready.wait()
        if self.overflowed:
            return None
        return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)

    def close_reason(self) -> tuple:
        if self.overflowed:
            return SLOW_CLIENT, f"client too slow: more than {self.limit} messages waiting"
        return self.closing or (1000, "")


async def pump(ws, outbox: Outbox) -> None:
    """Send what the outbox holds until it says stop, then close with its reason."""
    while True:
        text = await outbox.next()
        if text is None:
            code, reason = outbox.close_reason()
            await ws.close(code, reason)
            return
        await ws.send_text(text)


async def until_disconnected(ws, on_message=None) -> None:
    """Read client messages (handing each to ``on_message``) until the client leaves."""
    while True:
        text = await ws.receive_text()  # raises WebSocketDisconnected when the client leaves
        if on_message is not None:
            await on_message(text)


async def serve(ws, outbox: Outbox, on_message=None) -> None:
    """Run sending and receiving until either ends; the other is cancelled."""
    import falcon

    sending = asyncio.ensure_future(pump(ws, outbox))
    ended = asyncio.ensure_future(outbox.ended.wait())
    tasks = [sending, asyncio.ensure_future(until_disconnected(ws, on_message)), ended]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if ended in done and not sending.done():  # the pump closes; unless stuck on a client that does not read
            await asyncio.wait([sending], timeout=ENDED_GRACE_S)
            if not sending.done():
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
                code, reason = outbox.close_reason()
                try:
                    await asyncio.wait_for(ws.close(code, reason), ENDED_GRACE_S)
                except Exception:  # noqa: BLE001 (the connection is going anyway)
                    pass
        for task in done:
            exc = task.exception()
            if exc is not None and not isinstance(exc, falcon.WebSocketDisconnected):
                raise exc
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Connection:
    """One ``/api/ws`` client: what its key may see and what it subscribed to."""

    def __init__(self, principal, limit: int):
        self.customer_id = principal.customer_id  # None: every customer (admin, viewer)
        self.may_logs = "services:logs" in principal.permissions
        self.may_backups = "backups:read" in principal.permissions
        self.services: set | None = None  # None: every service it may see
        self.log_services: set = set()
        self.outbox = Outbox(limit)
        self.subscribes: collections.deque = collections.deque()  # monotonic times of accepted subscribes

    def may_subscribe(self, now: float) -> bool:
        """At most ``SUBSCRIBES_PER_S`` accepted subscribes in any second (refused ones do not count)."""
        while self.subscribes and now - self.subscribes[0] >= 1.0:
            self.subscribes.popleft()
        if len(self.subscribes) >= SUBSCRIBES_PER_S:
            return False
        self.subscribes.append(now)
        return True

    def wants(self, event: Event) -> bool:
        if self.customer_id is not None and event.customer_id != self.customer_id:
            return False
        if event.type == "service.logs":
            return self.may_logs and (self.services is None or event.service_id in self.log_services)
        if event.type == "backup.progress" and not self.may_backups:
            return False
        return self.services is None or event.service_id in self.services


class ServiceFollower:
    """Lines of every container of one service, handed to ``on_line(LogLine)`` on the
    event loop; ``since`` (or, without it, only new lines) for the containers there at
    the start, everything of containers that appear later."""

    def __init__(self, runtime, engine, service_id: str, on_line, since: datetime | None = None):
        self.runtime, self.engine, self.service_id, self.on_line = runtime, engine, service_id, on_line
        self.since = since
        self._streams: dict = {}  # container id -> LogStream (None while opening)
        self._threads: dict = {}  # container id -> Thread
        self._lock = threading.Lock()
        self._stopped = False
        self._task: asyncio.Task | None = None
        self._loop = None
        self._last: dict = {}  # container id -> (timestamp, lines at that timestamp)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._supervise(), name=f"follow-{self.service_id}")

    async def _supervise(self) -> None:
        first = True
        started = datetime.now(timezone.utc)
        while not self._stopped:
            try:
                running = await self.engine.run(self._running)
            except Exception:  # noqa: BLE001 (the engine hiccupped: look again later)
                log.warning("listing containers of %s failed", self.service_id, exc_info=True)
                running = []
            for container_id in running:
                with self._lock:
                    alive = self._threads.get(container_id)
                    if alive is not None and alive.is_alive():
                        continue
                    since = self.since if first else started
                    if container_id in self._last:
                        since = self._last[container_id][0]
                    thread = threading.Thread(target=self._read, args=(container_id, since),
                                              name=f"slipway-logs-{self.service_id}", daemon=True)
                    self._threads[container_id] = thread
                    self._streams[container_id] = None
                thread.start()
            first = False
            await asyncio.sleep(RESCAN_S)

    def _running(self) -> list:
        """Ids of the service's running containers: one list call without inspecting each
        (``running_by_service``), or, for a runtime that cannot, its containers' states."""
        by_service = self.runtime.running_by_service()
        if by_service is not None:
            return by_service.get(self.service_id, [])
        return [state.id for state in self.runtime.containers(self.service_id) if state.running]

    def _read(self, container_id: str, since) -> None:
        try:
            stream = self.runtime.follow_logs(container_id, since=since)
        except Exception:  # noqa: BLE001 (gone meanwhile; the next rescan decides)
            return
        with self._lock:
            if self._stopped:
                stream.close()
                return
            self._streams[container_id] = stream
        last, repeat = self._last.get(container_id, (None, 0))
        seen_at_last = 0
        try:
            for line in stream:
                if last is not None:  # a re-follow starts at a whole second: skip what was sent
                    if line.timestamp < last:
                        continue
                    if line.timestamp == last and seen_at_last < repeat:
                        seen_at_last += 1
                        continue
                    last = None
                stamp, count = self._last.get(container_id, (None, 0))
                self._last[container_id] = (line.timestamp, count + 1 if stamp == line.timestamp else 1)
                try:
                    self._loop.call_soon_threadsafe(self.on_line, line)
                except RuntimeError:  # the loop is closed
                    return
        finally:
            stream.close()
            with self._lock:
                self._streams.pop(container_id, None)

    def stop(self) -> None:
        """Close every engine stream (their threads end) and stop looking for containers."""
        with self._lock:
            self._stopped = True
            streams = [s for s in self._streams.values() if s is not None]
        if self._task is not None:
            self._task.cancel()
        for stream in streams:
            stream.close()


class Hub:
    """This process's channel connections, the bus subscription and the log pumps."""

    def __init__(self, store, bus, runtime, engine, limit: int = 1000, *, clock=None, per_key: int = WS_PER_KEY,
                 recheck_s: float = RECHECK_S):
        self.store, self.bus, self.runtime, self.engine, self.limit = store, bus, runtime, engine, limit
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
        except Exception:  # noqa: BLE001 (the database hiccupped: look again next round)
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
            def on_line(line, service_id=service.id, customer_id=service.customer_id):
                self.deliver(Event("service.logs", {"service_id": service_id, "timestamp": rfc3339(line.timestamp),
                                                    "stream": line.stream, "message": line.message},
                                   service_id, customer_id))

            follower = ServiceFollower(self.runtime, self.engine, service.id, on_line)
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
                except Exception:  # noqa: BLE001 (try again next round)
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


def _visible_services(uow, principal, ids: list) -> list:
    found = []
    with uow:
        for service_id in ids:
            try:
                found.append(core_services.visible(principal, uow.services.get(service_id), service_id))
            except NotFound:
                pass  # ids the key may not see are dropped
    return found


def realtime_handlers(hub: Hub, store, runtime, engine, limit: int = 1000, logs_http=None) -> dict:
    """``openRealtimeChannel`` and the follow half of ``getServiceLogs`` (``logs_http`` is
    the plain logs handler, which a ``follow=true`` request without upgrade may not reach)."""

    async def channel(call, ws):
        conn = Connection(call.caller, hub.limit)
        hub.hold(call.caller, conn.outbox)  # 429 past SLIPWAY_WS_PER_KEY
        hub.add(conn)  # before accepting: an event right after the handshake is not missed

        async def on_message(text: str) -> None:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if not isinstance(message, dict) or message.get("type") != "subscribe":
                conn.outbox.offer(dumps({"type": "error", "data": {
                    "message": 'expected {"type": "subscribe", "services": ["svc_..."]}'}, "timestamp": now_stamp()}))
                return
            if not conn.may_subscribe(asyncio.get_running_loop().time()):
                conn.outbox.offer(dumps({"type": "error", "data": {
                    "message": f"too many subscribe messages: at most {SUBSCRIBES_PER_S} per second; "
                               "this one was ignored"}, "timestamp": now_stamp()}))
                return
            ids = message.get("services")
            if ids is not None and (not isinstance(ids, list) or len(ids) > MAX_SUBSCRIBE
                                    or not all(isinstance(i, str) for i in ids)):
                conn.outbox.offer(dumps({"type": "error", "data": {
                    "message": f"services must be a list of at most {MAX_SUBSCRIBE} service ids"},
                    "timestamp": now_stamp()}))
                return
            visible = None if ids is None else await store.run(_visible_services, store.uow(write=False),
                                                               call.caller, list(dict.fromkeys(ids)))
            hub.narrow(conn, visible)
            conn.outbox.offer(dumps({"type": "subscribed", "data": {
                "services": None if visible is None else [s.id for s in visible],
                "logs": None if conn.services is None and conn.may_logs else sorted(conn.log_services)},
                "timestamp": now_stamp()}))

        try:
            await ws.accept()
            await serve(ws, conn.outbox, on_message)
        finally:
            hub.remove(conn)
            hub.release(call.caller, conn.outbox)

    async def follow(call, ws):
        try:
            service = await store.run(core_services.get_service, store.uow(write=False), call.caller,
                                      call.params["id"])
        except NotFound as exc:
            raise ApiError(404, exc.message) from exc
        since = time_param(call, "since")
        outbox = Outbox(limit)

        def on_line(line):
            outbox.offer(dumps({"timestamp": rfc3339(line.timestamp), "stream": line.stream,
                                "message": line.message}))

        def on_event(event):  # a deleted service has no more lines: say so and close
            if (event.type == "service.status" and event.service_id == service.id
                    and event.data.get("status") == "deleted"):
                outbox.close(1000, "the service was deleted")

        hub.hold(call.caller, outbox)  # 429 past SLIPWAY_WS_PER_KEY
        try:
            follower = ServiceFollower(runtime, engine, service.id, on_line, since=since)
            await ws.accept()
            follower.start()
            subscription = hub.bus.subscribe(on_event)
            try:
                await serve(ws, outbox)
            finally:
                hub.bus.unsubscribe(subscription)
                follower.stop()
        finally:
            hub.release(call.caller, outbox)

    async def logs_request(call):
        if call.params.get("follow"):
            raise ApiError(400, "follow=true streams over a WebSocket: send the request as an upgrade "
                                "(Connection: Upgrade, Upgrade: websocket)")
        return await logs_http(call)

    return {"openRealtimeChannel": Upgradable(websocket=channel),
            "getServiceLogs": Upgradable(websocket=follow, http=logs_request)}


class DeployProgress:
    """The deploy worker's ``progress(job, step, message, percent)`` callback: publishes
    ``deploy.progress`` straight on the bus (progress is not stored, so not transactional).
    Runs in the engine thread of the job; the service's customer is read once per service."""

    def __init__(self, store, bus):
        self.store, self.bus = store, bus
        self._customers: dict = {}
        self._lock = threading.Lock()

    def _customer(self, service_id: str) -> str | None:
        with self._lock:
            if service_id in self._customers:
                return self._customers[service_id]
        with self.store.uow(write=False).reading() as uow:
            service = uow.services.get(service_id)
        customer = service.customer_id if service is not None else None
        with self._lock:
            if len(self._customers) > 10_000:
                self._customers.clear()
            self._customers[service_id] = customer
        return customer

    def __call__(self, job, step, message, percent) -> None:
        try:
            customer = self._customer(job.service_id)
            event = Event("deploy.progress", {
                "service_id": job.service_id, "deploy_job_id": job.id, "step": step, "message": str(message),
                "progress": max(0, min(100, int(percent)))}, job.service_id, customer)
            if self.store.outbox:  # plugins subscribe: recorded, then published once it committed
                with self.store.uow() as uow:
                    uow.emit(event)
                    uow.commit()
            else:
                self.bus.publish(event)
        except Exception:  # noqa: BLE001 (progress is informative: never fail the deploy for it)
            log.exception("could not publish deploy progress of %s", job.id)
