"""A WebSocket client message over 64 KiB closes the socket with 1009 (docs/security.md),
on the channel ``/api/ws`` and on log following, whether the server was started with
``slipway serve`` (uvicorn refuses the message: ``ws_max_size``) or as ``uvicorn
app.asgi:app`` with uvicorn's own default of 16 MiB (the app closes the socket); a message
of 64 KiB still works, and the panel keeps answering. Real server processes, a real
WebSocket client."""
from __future__ import annotations

import json

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.http.websocket_limits import REASON
from tests.support.processes import slipway
from tests.support.servers import Server

LIMIT = 64 * 1024
WAIT_S = 20  # the longest wait for an answer or the close (they come at once)
SLEEPER = "services:\n  app:\n    image: localhost/busybox:latest\n    command: [sleep, '600']\n"


def _subscribe(size: int) -> str:
    """A subscribe message of exactly ``size`` bytes (a field the server does not read pads it)."""
    empty = json.dumps({"type": "subscribe", "pad": ""})
    return json.dumps({"type": "subscribe", "pad": "x" * (size - len(empty))})


def _closed_with(ws) -> tuple[int, str]:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            message = ws.recv(timeout=WAIT_S)
            assert json.loads(message)["type"] != "subscribed", "a message over 64 KiB was read"
    return closed.value.rcvd.code, closed.value.rcvd.reason


def _subscribed(ws) -> None:
    while True:
        if json.loads(ws.recv(timeout=WAIT_S))["type"] == "subscribed":
            return


@pytest.fixture
def db(migrated_database_url):
    return migrated_database_url


@pytest.mark.parametrize("asgi", [False, True], ids=["slipway-serve", "uvicorn-app-asgi"])
def test_a_client_message_over_64_kib_closes_the_socket_with_1009(db, asgi):
    key = slipway(db, "apikey", "create", "--name", "ops", "--role", "admin", "--rate-limit-rpm", "10000")[1]["key"]
    auth = {"Authorization": f"Bearer {key}"}
    with Server(db, asgi=asgi) as server, httpx.Client(base_url=server.base, headers=auth, timeout=30) as http:
        customer = http.post("/api/customers", json={"name": "Acme"}).json()["id"]
        created = http.post("/api/services", json={"name": "big-ws", "customer_id": customer,
                                                   "deploy_method": "compose", "compose": SLEEPER})
        assert created.status_code == 201, created.text
        follow_path = f"/api/services/{created.json()['id']}/logs?follow=true&api_key={key}"

        def ws(path):
            return connect(server.ws_base + path, open_timeout=WAIT_S, close_timeout=5, max_size=None)

        with ws(f"/api/ws?api_key={key}") as channel:
            channel.send(_subscribe(LIMIT))  # 64 KiB exactly: read and answered
            _subscribed(channel)
            channel.send(_subscribe(LIMIT + 1))  # one byte more: closed, never answered
            code, reason = _closed_with(channel)
            assert code == 1009
            # slipway serve: uvicorn refuses it before reading it whole; else the app closes the socket
            assert (reason == REASON) is asgi, reason
        with ws(f"/api/ws?api_key={key}") as channel:
            channel.send(b"\0" * (LIMIT + 1))  # binary messages too
            assert _closed_with(channel)[0] == 1009
        with ws(f"/api/ws?api_key={key}") as channel:
            channel.send("\u00e9" * (LIMIT // 2 + 1))  # 32,769 characters, 65,538 bytes of UTF-8
            assert _closed_with(channel)[0] == 1009

        with ws(follow_path) as follow:
            follow.send("x" * LIMIT)  # read (and ignored): the socket stays open
            assert follow.ping().wait(WAIT_S), "no pong after a 64 KiB message"
            follow.send("x" * (LIMIT + 1))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    follow.recv(timeout=WAIT_S)
            assert closed.value.rcvd.code == 1009

        # the panel keeps answering, a new socket works
        assert httpx.get(server.base + "/healthz", timeout=30).status_code == 200
        assert http.get("/api/services").status_code == 200
        with ws(f"/api/ws?api_key={key}") as channel:
            channel.send(json.dumps({"type": "subscribe"}))
            _subscribed(channel)
