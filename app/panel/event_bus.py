"""Event buses (``ports.events.EventBus``): in-process (default) and PostgreSQL
``LISTEN/NOTIFY`` for several Slipway processes behind one load balancer.

``SLIPWAY_EVENT_BUS`` chooses: ``memory`` delivers to the subscribers of this process
only; ``postgres`` sends every event through the database, so a client connected to
any process hears the events of all of them (also those of this process: they come
back through the listener, so each is delivered exactly once everywhere).
"""
from __future__ import annotations

import asyncio
import json
import logging
import select
import threading
from datetime import datetime

from ports.events import Event, EventBus

log = logging.getLogger("slipway.events")

CHANNEL = "slipway_events"
#: PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; long messages are cut to fit
PAYLOAD_LIMIT = 7900
ELLIPSIS = "…"


class InProcessBus(EventBus):
    """Thread-safe publish from any thread; each subscriber's callback runs on the event
    loop it subscribed from (one ``call_soon_threadsafe`` per loop and event, however
    many subscribers that loop has)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._subscribers: dict[asyncio.AbstractEventLoop, dict[int, object]] = {}
        self._handles: dict[int, asyncio.AbstractEventLoop] = {}
        self._next = 0

    def publish(self, event: Event) -> None:
        self._deliver(event)

    def _deliver(self, event: Event) -> None:
        with self._lock:
            loops = list(self._subscribers)
        for loop in loops:
            try:
                loop.call_soon_threadsafe(self._dispatch, loop, event)
            except RuntimeError:  # that loop is closed: its subscribers are gone
                pass

    def _dispatch(self, loop, event: Event) -> None:
        with self._lock:
            callbacks = list(self._subscribers.get(loop, {}).values())
        for callback in callbacks:
            try:
                callback(event)
            except Exception:  # one subscriber's failure is not the publisher's
                log.exception("event subscriber failed on %s", event.type)

    def subscribe(self, callback) -> object:
        loop = asyncio.get_running_loop()
        with self._lock:
            self._next += 1
            handle = self._next
            self._subscribers.setdefault(loop, {})[handle] = callback
            self._handles[handle] = loop
        return handle

    def unsubscribe(self, handle) -> None:
        with self._lock:
            loop = self._handles.pop(handle, None)
            if loop is None:
                return
            callbacks = self._subscribers.get(loop, {})
            callbacks.pop(handle, None)
            if not callbacks:
                self._subscribers.pop(loop, None)

    @property
    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._handles)


def encode(event: Event, limit: int = PAYLOAD_LIMIT) -> str | None:
    """The NOTIFY payload of ``event``; a ``message`` too long for PostgreSQL is cut
    (ending in "…"); None when even that does not fit."""
    data = dict(event.data)
    while True:
        payload = json.dumps({"type": event.type, "data": data, "service_id": event.service_id,
                              "customer_id": event.customer_id, "timestamp": event.timestamp.isoformat()},
                             ensure_ascii=False, separators=(",", ":"))
        excess = len(payload.encode("utf-8")) - limit
        if excess <= 0:
            return payload
        message = data.get("message")
        if not isinstance(message, str) or not message:
            return None
        raw = message.encode("utf-8")
        keep = max(len(raw) - excess - len(ELLIPSIS.encode("utf-8")) - 16, 0)  # 16: JSON escapes slack
        data["message"] = raw[:keep].decode("utf-8", "ignore") + ELLIPSIS
        if keep == 0:
            data["message"] = ELLIPSIS


def decode(payload: str) -> Event:
    body = json.loads(payload)
    return Event(type=body["type"], data=body["data"], service_id=body["service_id"],
                 customer_id=body.get("customer_id"), timestamp=datetime.fromisoformat(body["timestamp"]))


class PostgresBus(InProcessBus):
    """``pg_notify`` on a connection of its own (autocommit) to publish; a listener thread
    with another connection ``LISTEN``s, waits in ``select()`` and hands what arrives to
    this process's subscribers. A lost connection is opened again (events sent while it
    was down are missed: the channel is live, not a log)."""

    def __init__(self, dsn: str, channel: str = CHANNEL, poll_s: float = 0.5):
        super().__init__()
        self.dsn, self.channel, self.poll_s = dsn, channel, poll_s
        self._publish_lock = threading.Lock()
        self._publisher = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.listening = threading.Event()  # set while the listener is LISTENing

    def _connect(self):
        import psycopg2

        conn = psycopg2.connect(self.dsn)
        conn.autocommit = True
        return conn

    def publish(self, event: Event) -> None:
        payload = encode(event)
        if payload is None:
            log.warning("event %s for %s is too large for NOTIFY; dropped", event.type, event.service_id)
            return
        with self._publish_lock:
            for attempt in (1, 2):
                try:
                    if self._publisher is None or self._publisher.closed:
                        self._publisher = self._connect()
                    with self._publisher.cursor() as cur:
                        cur.execute("SELECT pg_notify(%s, %s)", (self.channel, payload))
                    return
                except Exception:  # never raise for the bus's sake: the change itself is committed
                    self._close_publisher()
                    if attempt == 2:
                        log.exception("could not publish %s on PostgreSQL", event.type)

    def _close_publisher(self) -> None:
        if self._publisher is not None:
            try:
                self._publisher.close()
            except Exception:  # noqa: BLE001
                pass
            self._publisher = None

    async def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._listen, name="slipway-event-listener", daemon=True)
        self._thread.start()
        # serve only once events are heard (a few seconds at most: a database that is down
        # is retried in the background); waited for off the event loop
        if not await asyncio.to_thread(self.listening.wait, 5.0):
            log.warning("event listener not connected yet; events are missed until it is")

    async def stop(self) -> None:
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, self.poll_s * 4 + 5)
        with self._publish_lock:
            self._close_publisher()

    def _listen(self) -> None:
        while not self._stopping.is_set():
            conn = None
            try:
                conn = self._connect()
                with conn.cursor() as cur:
                    cur.execute(f'LISTEN "{self.channel}"')
                self.listening.set()
                while not self._stopping.is_set():
                    ready, _, _ = select.select([conn], [], [], self.poll_s)
                    if not ready:
                        continue
                    conn.poll()
                    while conn.notifies:
                        notify = conn.notifies.pop(0)
                        try:
                            event = decode(notify.payload)
                        except (ValueError, KeyError, TypeError):
                            log.warning("ignoring a malformed event on %s", self.channel)
                            continue
                        self._deliver(event)
            except Exception:  # the database went away: listen again
                if not self._stopping.is_set():
                    log.exception("event listener lost its connection; reconnecting")
                    self._stopping.wait(1.0)
            finally:
                self.listening.clear()
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
