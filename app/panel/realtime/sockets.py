"""One WebSocket's sending side: ``Outbox``, the bounded queue of its text messages
(``SLIPWAY_WS_QUEUE``; a client that lets it fill up is disconnected with 1008 and a
reason), and ``serve``, which sends what the outbox holds and reads what the client sends
until either ends."""
from __future__ import annotations

import asyncio
import collections
import json
from datetime import datetime, timezone

SLOW_CLIENT = 1008  # policy violation: the client does not read fast enough
POLICY = 1008  # also: the credentials of the socket no longer hold
GOING_AWAY = 1001
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
