"""slipway-hello: an example plugin using every behaviour hook of Slipway.

It imports only ``ports`` (Slipway's hook specifications and port types), never the app
or the core, so it keeps working while Slipway's inside changes.
"""
from __future__ import annotations

import hmac
import json
import os
import threading
from pathlib import Path

from ports import hookimpl
from ports.extensions import (AuthSource, Identity, Job, Route, RouteError, RouteReply, Subscriber)
from ports.settings import Setting, positive, stripped, text

PLUGIN = "hello"
#: its settings, declared once each: `slipway settings` lists them (the token as ***)
DIR = Setting("SLIPWAY_HELLO_DIR", stripped, None, "where slipway-hello keeps its files (required)")
INTERVAL = Setting("SLIPWAY_HELLO_INTERVAL", positive, 60.0, "seconds between two hello-tick runs")
TOKEN = Setting("SLIPWAY_HELLO_TOKEN", text, None, "the X-Hello-Token the hello auth source accepts", secret=True)
CRASH_ON = Setting("SLIPWAY_HELLO_CRASH_ON", stripped, None,
                   "a topic whose first event stops the process after it is recorded (the tests')")
SETTINGS = (DIR, INTERVAL, TOKEN, CRASH_ON)
_lock = threading.Lock()


def _folder(settings) -> Path:
    folder = DIR.read(settings)
    if not folder:
        raise RouteError(409, "slipway-hello is not configured: set SLIPWAY_HELLO_DIR")
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _append(settings, name: str, line: str) -> None:
    with _lock, open(_folder(settings) / name, "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def _lines(settings, name: str) -> list[str]:
    path = _folder(settings) / name
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# --- register_routes ----------------------------------------------------------------------


def greeting(request):
    caller = request.caller
    who = caller.customer_id if caller.customer_id else caller.role
    return RouteReply(200, {"greeting": f"hello, {who}", "via": caller.credential,
                            "ticks": len(_lines(request.context.settings, "ticks"))})


def echo(request):
    text = request.body["text"]
    if text.strip().lower() == "forbidden word":
        raise RouteError(422, "invalid request body", {"text": "must not be the forbidden word"})
    return RouteReply(201, {"echo": text, "by": request.caller.customer_id})


def seen(request):
    settings = request.context.settings
    return RouteReply(200, {"events": [json.loads(line) for line in _lines(settings, "events.jsonl")],
                            "ticks": len(_lines(settings, "ticks"))})


@hookimpl
def register_routes():
    greeting_schema = {"type": "object", "required": ["greeting", "via", "ticks"], "properties": {
        "greeting": {"type": "string"}, "via": {"type": "string"}, "ticks": {"type": "integer"}}}
    return [
        Route(plugin=PLUGIN, method="GET", path="/greeting", operation_id="greeting", permission="services:read",
              handler=greeting, summary="A greeting for the caller", response_schema=greeting_schema, mcp=True),
        Route(plugin=PLUGIN, method="POST", path="/echo", operation_id="echo", permission="services:deploy",
              handler=echo, summary="The text sent, back", rate_tier="deploy",
              request_schema={"type": "object", "required": ["text"], "additionalProperties": False,
                              "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 100}}},
              response_schema={"type": "object", "properties": {"echo": {"type": "string"},
                                                               "by": {"type": ["string", "null"]}}}),
        Route(plugin=PLUGIN, method="GET", path="/seen", operation_id="seen", permission="customers:read",
              handler=seen, summary="The events and job runs the plugin recorded",
              response_schema={"type": "object", "properties": {"events": {"type": "array"},
                                                               "ticks": {"type": "integer"}}}),
    ]


# --- register_jobs ------------------------------------------------------------------------


def tick(context) -> None:
    _append(context.settings, "ticks", context.clock.now().isoformat())


@hookimpl
def register_jobs():
    interval = INTERVAL.read(os.environ)
    return [Job(name="hello-tick", interval=interval, run=tick)]


# --- register_event_subscribers -----------------------------------------------------------


def audit(event, context) -> None:
    settings = context.settings
    _append(settings, "events.jsonl", json.dumps({
        "id": event.id, "topic": event.topic, "service_id": event.service_id, "customer_id": event.customer_id,
        "data": event.data, "thread": threading.current_thread().name}))
    crash_on = CRASH_ON.read(settings)
    marker = _folder(settings) / "crashed"
    if crash_on and event.topic == crash_on and not marker.exists():
        marker.write_text(str(event.id))
        os._exit(70)  # the process dies mid-delivery: the delivery was not recorded


@hookimpl
def register_event_subscribers():
    return [Subscriber(name="hello-audit", handle=audit)]


# --- register_auth_sources ----------------------------------------------------------------


def authenticate(request, context):
    token = request.headers.get("x-hello-token")
    if token is None:
        return None  # not a hello request: the next source, or 401
    if token == "explode":
        raise RuntimeError("the hello directory is unreachable")
    expected = TOKEN.read(context.settings) or ""
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        return None
    customer = request.headers.get("x-hello-customer") or ""
    return Identity(subject=f"hello-{customer}", role="customer", customer_id=customer)


@hookimpl
def register_auth_sources():
    return [AuthSource(name="hello", authenticate=authenticate)]
