"""Ending a WebSocket from the server side (a revoked key, an ended session): the close
frame goes out at once, pending messages are dropped, and a socket whose client stops
reading (the send never completes) is still closed instead of holding on."""
from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from app.config import Config, ConfigError
from app.panel.realtime.sockets import Outbox, serve
from app.panel.realtime.subscriptions import Connection
from core.panel.access import ROLES, ApiKey, Principal


class StuckSocket:
    """A socket whose client never reads: every send waits forever; records the close."""

    def __init__(self, stuck: bool):
        self.stuck, self.sent, self.closed = stuck, [], None
        self._gone = asyncio.Event()

    async def send_text(self, text):
        if self.stuck:
            await asyncio.Event().wait()
        self.sent.append(text)

    async def receive_text(self):
        await self._gone.wait()

    async def close(self, code, reason):
        self.closed = (code, reason)


@pytest.mark.parametrize("stuck", [False, True])
def test_ending_closes_with_the_reason_even_when_the_client_does_not_read(stuck):
    async def scenario():
        ws, outbox = StuckSocket(stuck), Outbox(100)
        outbox.offer("first")
        serving = asyncio.ensure_future(serve(ws, outbox))
        await asyncio.sleep(0.05)
        for i in range(50):
            outbox.offer(f"pending {i}")
        outbox.end(1008, "the API key was revoked")
        await asyncio.wait_for(serving, timeout=10)
        return ws

    ws = asyncio.run(scenario())
    assert ws.closed == (1008, "the API key was revoked")
    assert ws.sent == ([] if stuck else ["first"])  # what waited behind the end is dropped


def test_subscribes_beyond_five_in_any_second_are_refused():
    key = ApiKey(id="0" * 16, name="v", role="viewer", secret_hash="", rate_limit_rpm=10,
                 created_at=datetime.now(timezone.utc))
    conn = Connection(Principal(key=key, permissions=ROLES["viewer"]), 10)
    assert [conn.may_subscribe(100.0 + i * 0.01) for i in range(7)] == [True] * 5 + [False] * 2
    assert conn.may_subscribe(100.999) is False
    assert conn.may_subscribe(101.0) is True  # the first one is a second old


def test_ws_per_key_setting():
    assert Config.from_env({}).ws_per_key == 20
    assert Config.from_env({"SLIPWAY_WS_PER_KEY": "3"}).ws_per_key == 3
    for bad in ("0", "-1", "many"):
        with pytest.raises(ConfigError, match="SLIPWAY_WS_PER_KEY"):
            Config.from_env({"SLIPWAY_WS_PER_KEY": bad})
