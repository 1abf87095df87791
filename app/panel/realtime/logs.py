"""Log pumps: ``ServiceFollower`` follows every container of a service. A thread per
container reads ``runtime.follow_logs``; every ``RESCAN_S`` seconds the container list is
read again (on the engine-call threads), so restarted and redeployed containers are
followed too. Stopping it closes the engine streams, which ends the threads."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import datetime, timezone

from core.panel.releases import log_origins

log = logging.getLogger("slipway.realtime")

RESCAN_S = 2.0
UNSETTLED_S = 900.0  # how long a container without a release is asked about again (a deploy's health wait)


NO_ORIGIN = {"component": "", "release": None}


class ServiceFollower:
    """Lines of every container of one service, handed to ``on_line(LogLine, origin)`` on
    the event loop; ``since`` (or, without it, only new lines) for the containers there at
    the start, everything of containers that appear later.

    ``origin`` is ``{component, release}`` of the container that wrote the line, from
    ``describe(container_ids) -> {container id: origin}`` (run on the engine-call threads,
    ``core.panel.releases.log_origins``): asked again when a container appears, and while
    one seen in the last ``UNSETTLED_S`` has no release yet (a deploy in progress records
    its release when it succeeds; a container older than that without one, say made before
    releases were recorded, is not asked about every rescan forever)."""

    def __init__(self, runtime, calls, service_id: str, on_line, since: datetime | None = None, describe=None):
        self.runtime, self.calls, self.service_id, self.on_line = runtime, calls, service_id, on_line
        self.since, self.describe = since, describe
        self._origins: dict = {}  # container id -> {component, release}
        self._seen: dict = {}  # container id -> when it was first described (monotonic)
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
                running = await self.calls.run(self._running)
            except Exception:  # the engine hiccupped: look again later
                log.warning("listing containers of %s failed", self.service_id, exc_info=True)
                running = []
            await self._describe(running)
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

    async def _describe(self, running: list) -> None:
        if self.describe is None or not running:
            return
        now = time.monotonic()
        if all(c in self._origins and (self._origins[c]["release"] is not None or now - self._seen[c] > UNSETTLED_S)
               for c in running):
            return
        try:
            self._origins = await self.calls.run(self.describe, running)
            self._seen = {c: self._seen.get(c, now) for c in running}
        except Exception:  # lines go unlabelled until the next look
            log.warning("reading the origins of %s's containers failed", self.service_id, exc_info=True)

    def _deliver(self, container_id: str, line) -> None:
        self.on_line(line, self._origins.get(container_id, NO_ORIGIN))

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
                    self._loop.call_soon_threadsafe(self._deliver, container_id, line)
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


def origins_of(store, runtime, service_id: str):
    """A follower's ``describe`` for one service: its containers' labels, one database read
    (None without a store: lines go unlabelled)."""
    if store is None:
        return None

    def describe(container_ids) -> dict:
        wanted = set(container_ids)
        states = [state for state in runtime.containers(service_id) if state.id in wanted]
        found = log_origins(store.uow(write=False), service_id, states)
        return {c: found.get(c, NO_ORIGIN) for c in container_ids}  # gone meanwhile: unlabelled
    return describe
