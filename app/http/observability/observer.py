"""Request ids and the access log around the ASGI app: ``Observer`` wraps it
(``SlipwayApp.__call__``); every HTTP response and every WebSocket handshake answer carries
``X-Request-Id`` (the client's value when it is 1-128 visible ASCII characters, else a
generated one), and every request ends with one access line (``request_id``, method, API,
operation id, status, duration in ms) on the ``slipway.access`` logger, and is counted in
the request metrics (``prometheus``)."""
from __future__ import annotations

import logging
import os
import time

from app.http.observability.logs import REDACTED, access_handler, access_log, request_id_var
from app.http.observability.prometheus import metrics
from core.redaction import redact

REQUEST_ID_HEADER = b"x-request-id"
UNKNOWN_OPERATION = "unknown"  # routes and methods no contract has: one fixed label, never the raw path
MAX_REQUEST_ID = 128
#: the client's method and path are logged (and redacted) up to this long: a server may let
#: a request line of 16 KiB through (h11), and no method is longer than 17 characters
MAX_LOGGED_METHOD, MAX_LOGGED_PATH = 32, 512


def valid_request_id(value: bytes | None) -> str | None:
    """The client's ``X-Request-Id`` when it is 1-128 visible ASCII characters that the
    redactor leaves alone (it is written into every log line of the request), else None."""
    if not value or len(value) > MAX_REQUEST_ID or any(b < 0x21 or b > 0x7E for b in value):
        return None
    text = value.decode("ascii")
    return text if redact(text) == text else None


def api_label(path: str) -> str | None:
    """``partner`` for /v1, ``panel`` for /api, None for the rest (probes, metrics)."""
    if path == "/v1" or path.startswith("/v1/"):
        return "partner"
    if path == "/api" or path.startswith("/api/"):
        return "panel"
    return None


class Observer:
    """Request ids, access lines and request metrics around an ASGI app.

    ``find(path)`` answers the route template of ``path`` (or None) and ``operations``
    maps ``(template, METHOD)`` to the contract's operation id, so a label is always an
    operation id or ``unknown``."""

    def __init__(self, find, operations: dict):
        self.find = find
        self.operations = operations
        self._children: dict = {}  # (api, operation, status) -> the metrics' labelled series

    def _series(self, api: str, operation: str, status) -> tuple:
        """The request counter's and the latency histogram's series of these labels,
        looked up once (their number is bounded: operation ids times statuses)."""
        key = (api, operation, status)
        found = self._children.get(key)
        if found is None:
            m = metrics()
            found = self._children[key] = (m.requests.labels(api, operation, str(status)),
                                           m.latency.labels(api, operation))
        return found

    def operation(self, path: str, method: str) -> str:
        try:
            found = self.find(path)
        except Exception:  # noqa: BLE001 (a label must never fail a request)
            found = None
        if not found:
            return UNKNOWN_OPERATION
        return self.operations.get((found, method), UNKNOWN_OPERATION)

    async def __call__(self, scope, receive, send, app):
        kind = scope.get("type")
        if kind != "http" and kind != "websocket":
            return await app(scope, receive, send)
        # any iterable of 2-item iterables (falcon.testing passes iterators): read once, pass a
        # list on (a server's list, as uvicorn's, as it is)
        headers = scope.get("headers")
        if type(headers) is not list:
            headers = [tuple(pair) for pair in headers or ()]
            scope = {**scope, "headers": headers}
        incoming = None
        for name, value in headers:
            if name.lower() == REQUEST_ID_HEADER:
                incoming = value
                break
        request_id = valid_request_id(incoming) or os.urandom(16).hex()
        exchange = _Exchange(self, kind, scope, send, request_id)
        token = request_id_var.set(request_id)
        try:
            await app(scope, receive, exchange.send)
        finally:
            if exchange.accepted and exchange.api:
                metrics().websockets.labels(exchange.api).dec()
            exchange.finish()
            request_id_var.reset(token)


class _Exchange:
    """One request as ``Observer`` sees it: ``send`` passes the app's messages on (with the
    request id header on the answer's head) and ``finish`` counts and logs it, once."""

    __slots__ = ("observer", "kind", "method", "path", "api", "operation", "header", "downstream", "status",
                 "accepted", "done", "started")

    def __init__(self, observer: Observer, kind: str, scope, send, request_id: str):
        self.observer, self.kind, self.downstream = observer, kind, send
        self.path = path = scope.get("path") or "/"
        self.method = method = "GET" if kind == "websocket" else (scope.get("method") or "GET").upper()
        self.api = api_label(path)
        self.header = (REQUEST_ID_HEADER, request_id.encode("ascii"))
        self.status = None
        self.accepted = self.done = False
        self.started = time.perf_counter()
        self.operation = observer.operation(path, method)

    def finish(self) -> None:
        """Count and log the request once: before its last message goes out (so a client
        that has the whole answer also finds it in /metrics and the log), or when an
        accepted WebSocket ends."""
        if self.done:
            return
        self.done = True
        elapsed = time.perf_counter() - self.started
        status = self.status or (1000 if self.kind == "websocket" else 500)
        api, operation = self.api, self.operation
        if api:
            counted, timed = self.observer._series(api, operation, status)
            counted.inc()
            timed.observe(elapsed)
            if status == 429:
                metrics().rate_limited.labels(api).inc()
        handler = access_handler()
        if handler is not None or access_log.isEnabledFor(logging.INFO):
            # the client's two strings (method, path) redacted here (the rest is Slipway's
            # own vocabulary): this runs on every request
            method, path = redact(self.method[:MAX_LOGGED_METHOD]), redact(self.path[:MAX_LOGGED_PATH])
            message = f"{method} {operation} {status}"
            fields = {"kind": "access", "method": method, "api": api or "none", "operation": operation,
                      "path": path, "status": status, "duration_ms": round(elapsed * 1000, 3)}
            if handler is not None:  # log_config's own handler: the line without a LogRecord
                handler.access(message, fields)
            else:  # Logger.info without its caller lookup (no formatter here shows the caller)
                access_log.handle(access_log.makeRecord(access_log.name, logging.INFO, "", 0, message,
                                                        None, None, extra={REDACTED: True, "fields": fields}))

    def _with_header(self, message: dict) -> dict:
        headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != REQUEST_ID_HEADER]
        headers.append(self.header)
        return {**message, "headers": headers}

    async def send(self, message):
        kind = message.get("type")
        if kind == "http.response.body" or kind == "websocket.http.response.body":
            if not message.get("more_body"):
                self.finish()
        elif kind == "http.response.start" or kind == "websocket.http.response.start":
            self.status = message.get("status")
            message = self._with_header(message)
        elif kind == "websocket.accept":
            self.status, self.accepted = 101, True
            message = self._with_header(message)
            if self.api:
                metrics().websockets.labels(self.api).inc()
        elif kind == "websocket.close" and not self.accepted:
            if self.status is None:
                self.status = 403  # closed before accepting: the server refuses the handshake with 403
            self.finish()
        await self.downstream(message)
