"""The WebSocket handlers: ``openRealtimeChannel`` (``GET /api/ws``) and the follow half
of ``getServiceLogs`` (``GET /api/services/{id}/logs?follow=true``)."""
from __future__ import annotations

import asyncio
import json

from app.http.errors import ApiError
from app.http.pipeline import Upgradable, time_param
from app.panel.realtime.hub import Hub
from app.panel.realtime.logs import ServiceFollower, origins_of
from app.panel.services import log_json
from app.panel.realtime.sockets import Outbox, dumps, now_stamp, serve
from app.panel.realtime.subscriptions import MAX_SUBSCRIBE, SUBSCRIBES_PER_S, Connection, visible_services
from core.errors import NotFound
from core.panel import services as core_services


class RealtimeHandlers:
    """``openRealtimeChannel`` and the follow half of ``getServiceLogs`` (``logs_http`` is
    the plain logs handler, which a ``follow=true`` request without upgrade may not reach);
    ``calls`` runs the log followers' engine calls; ``limit`` bounds each socket's queue."""

    def __init__(self, hub: Hub, store, runtime, calls, limit: int = 1000, logs_http=None):
        self.hub, self.store, self.runtime, self.calls = hub, store, runtime, calls
        self.limit, self.logs_http = limit, logs_http

    def handlers(self) -> dict:
        return {"openRealtimeChannel": Upgradable(websocket=self.channel),
                "getServiceLogs": Upgradable(websocket=self.follow, http=self.logs_request)}

    async def channel(self, call, ws):
        conn = Connection(call.caller, self.hub.limit)
        self.hub.hold(call.caller, conn.outbox)  # 429 past SLIPWAY_WS_PER_KEY
        self.hub.add(conn)  # before accepting: an event right after the handshake is not missed

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
            visible = None if ids is None else await self.store.run(
                visible_services, self.store.uow(write=False), call.caller, list(dict.fromkeys(ids)))
            self.hub.narrow(conn, visible)
            conn.outbox.offer(dumps({"type": "subscribed", "data": {
                "services": None if visible is None else [s.id for s in visible],
                "logs": None if conn.services is None and conn.may_logs else sorted(conn.log_services)},
                "timestamp": now_stamp()}))

        try:
            await ws.accept()
            await serve(ws, conn.outbox, on_message)
        finally:
            self.hub.remove(conn)
            self.hub.release(call.caller, conn.outbox)

    async def follow(self, call, ws):
        try:
            service = await self.store.run(core_services.get_service, self.store.uow(write=False), call.caller,
                                      call.params["id"])
        except NotFound as exc:
            raise ApiError(404, exc.message) from exc
        since = time_param(call, "since")
        outbox = Outbox(self.limit)

        def on_line(line, origin):
            outbox.offer(dumps(log_json(line, origin)))

        def on_event(event):  # a deleted service has no more lines: say so and close
            if (event.type == "service.status" and event.service_id == service.id
                    and event.data.get("status") == "deleted"):
                outbox.close(1000, "the service was deleted")

        self.hub.hold(call.caller, outbox)  # 429 past SLIPWAY_WS_PER_KEY
        try:
            follower = ServiceFollower(self.runtime, self.calls, service.id, on_line, since=since,
                                       describe=origins_of(self.store, self.runtime, service.id))
            await ws.accept()
            follower.start()
            subscription = self.hub.bus.subscribe(on_event)
            try:
                await serve(ws, outbox)
            finally:
                self.hub.bus.unsubscribe(subscription)
                follower.stop()
        finally:
            self.hub.release(call.caller, outbox)

    async def logs_request(self, call):
        if call.params.get("follow"):
            raise ApiError(400, "follow=true streams over a WebSocket: send the request as an upgrade "
                                "(Connection: Upgrade, Upgrade: websocket)")
        return await self.logs_http(call)
