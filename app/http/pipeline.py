"""Routes from the contract: one resource per path, one pipeline per operation.

The pipeline is the same for both APIs: the API's gate (authentication, rate limit,
permission), then the body (size, media type, JSON, schema), then the parameters, then
the operation's handler. Anything raised becomes that API's error format.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import falcon
import orjson

from app.http.openapi import ApiContract, Operation
from app.http.errors import ApiError, api_of, refuse_websocket, to_api_error

MAX_BODY = 1024 * 1024
#: how deep a JSON body may nest (the MCP SDK's parser allows about as much): deeper would
#: exhaust the recursion of the parser or of what walks the body after it (an
#: Idempotency-Key's hash), a 500 instead of the client's 400
MAX_DEPTH = 200
TOO_DEEP = f"malformed JSON: nested deeper than {MAX_DEPTH} levels"
JSON_TYPES = ("application/json",)


@dataclass
class Reply:
    status: int = 200
    body: object = None
    content_type: str = falcon.MEDIA_JSON
    headers: dict = field(default_factory=dict)
    #: keyword arguments of falcon's ``resp.set_cookie``, one dict per cookie
    cookies: list = field(default_factory=list)


@dataclass
class Call:
    """What a handler gets: the parsed request, and who is calling."""

    req: object
    op: Operation
    params: dict
    body: object
    caller: object


class OpenGate:
    """For APIs (or operations) that need no credentials."""

    async def admit(self, req, op):
        if op.secured:
            raise RuntimeError(f"{op.operation_id} needs credentials but its API has no gate")
        return None


async def read_body(req, op: Operation):
    if op.body_validate is None:
        return None
    length = req.content_length
    if length is not None and length > MAX_BODY:
        raise ApiError(413, "request body is larger than 1 MiB")
    chunks, size = [], 0
    async for chunk in req.stream:
        size += len(chunk)
        if size > MAX_BODY:
            raise ApiError(413, "request body is larger than 1 MiB")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        if op.body_required:
            raise ApiError(422, "a JSON request body is required", fields={"body": "is required"})
        return None
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type not in JSON_TYPES:
        raise ApiError(415, "request body must be application/json")
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except RecursionError:
        raise ApiError(400, TOO_DEEP) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"malformed JSON: {exc}") from exc
    if _too_deep(body):
        raise ApiError(400, TOO_DEEP)
    return check_body(op, body)


def _too_deep(value) -> bool:
    """Whether ``value`` nests more than ``MAX_DEPTH`` arrays and objects (no recursion)."""
    level, containers = 0, [value] if isinstance(value, (dict, list)) else []
    while containers:
        level += 1
        if level > MAX_DEPTH:
            return True
        containers = [child for c in containers for child in (c.values() if isinstance(c, dict) else c)
                      if isinstance(child, (dict, list))]
    return False


def check_body(op: Operation, body):
    """``body`` (parsed JSON) held to the operation's schema; 422 naming the fields. Also
    the MCP endpoint's check of a tool's body arguments (app/panel/mcp.py)."""
    problems = op.body_validate(body)
    if problems:
        raise ApiError(422, "invalid request body", fields=_fields(problems, "body"))
    where = _nul_in(body)
    if where is not None:  # no database stores it (PostgreSQL refuses it outright)
        raise ApiError(422, "invalid request body", fields={where or "body": "must not contain NUL characters"})
    return body


def _nul_in(value, path: str = ""):
    """The dotted path of the first string (or key) holding U+0000, or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                return here
            found = _nul_in(item, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_in(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def parse_params(req, op: Operation, path_values: dict) -> dict:
    """Coerce and validate path and query values; query errors are 422 on the partner API
    and 400 on the panel API; a parameter with ``x-slipway-fallback`` falls back instead."""
    return check_params(op, lambda p: path_values.get(p.name) if p.location == "path" else req.get_param(p.name))


def check_params(op: Operation, lookup) -> dict:
    """``parse_params`` for any source: ``lookup(param)`` answers the raw value (a string
    from a URL, or a JSON value from an MCP tool's arguments) or None when absent."""
    values, problems = {}, {}
    for p in op.params:
        raw = lookup(p)
        if isinstance(raw, str) and "\x00" in raw:
            if p.location == "path" and op.api == "panel":  # no panel id holds one
                raise ApiError(404, f"no resource with that {p.name}")
            problems[p.name] = "must not contain NUL characters"
            continue
        if raw is None:
            if p.required:
                problems[p.name] = "is required"
            elif p.default is not None:
                values[p.name] = p.default
            continue
        value, ok = _coerce(raw, p.kind)
        if ok and not p.validate(value):
            values[p.name] = value
        elif p.has_fallback:
            values[p.name] = p.fallback
        else:
            messages = p.validate(value) if ok else [("", f"must be of type {p.kind}")]
            problems[p.name] = messages[0][1]
    if problems:
        in_query = any(p.location == "query" for p in op.params if p.name in problems)
        status = 400 if (op.api == "panel" and in_query) else 422
        raise ApiError(status, "invalid parameters", fields=problems)
    return values


def _coerce(raw, kind: str):
    if not isinstance(raw, str):  # a JSON value (MCP tool arguments) stands when it is of the kind
        numeric = isinstance(raw, (int, float)) and not isinstance(raw, bool)
        # an int is whole without a float of it (an int beyond a float's range would overflow)
        whole = numeric and (isinstance(raw, int) or raw.is_integer())
        ok = {"integer": whole, "number": numeric, "boolean": isinstance(raw, bool)}.get(kind, False)
        return (int(raw) if ok and kind == "integer" else raw), ok
    try:
        if kind == "integer":
            return int(raw, 10), True
        if kind == "number":
            return float(raw), True
    except ValueError:
        return raw, False
    if kind == "boolean":
        if raw.lower() in ("true", "1"):
            return True, True
        if raw.lower() in ("false", "0"):
            return False, True
        return raw, False
    return raw, True


def _fields(problems, default_name):
    fields = {}
    for where, message in problems:
        fields.setdefault(where or default_name, message)
    return fields


def write_reply(resp, reply: Reply) -> None:
    resp.status = reply.status
    for name, value in reply.headers.items():
        resp.set_header(name, value)
    for cookie in reply.cookies:
        resp.set_cookie(**cookie)
    if reply.status == 204 or reply.body is None:
        return
    resp.content_type = reply.content_type
    if hasattr(reply.body, "__aiter__"):  # streamed (exports): never built whole in memory
        resp.stream = reply.body
    else:
        resp.data = reply_data(reply)


def json_bytes(body) -> bytes:
    """A reply's JSON as the API sends it: compact UTF-8, by orjson (an order of magnitude
    faster than ``json``, on the path of every request). What orjson refuses (an integer
    beyond 64 bits, a lone surrogate in a string a client sent) falls back to ``json``,
    escaped to ASCII, never a 500."""
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(body, separators=(",", ":")).encode("ascii")


def json_text(body) -> str:
    """``json_bytes`` as text."""
    return json_bytes(body).decode("utf-8")


def reply_data(reply: Reply) -> bytes | None:
    """The bytes ``write_reply`` sends as the body (None: none, or streamed)."""
    if reply.status == 204 or reply.body is None or hasattr(reply.body, "__aiter__"):
        return None
    if isinstance(reply.body, (bytes, str)):
        return reply.body if isinstance(reply.body, bytes) else reply.body.encode("utf-8")
    return json_bytes(reply.body)


def kept_reply(reply: Reply):
    """``(content type, body)`` of a reply an idempotent POST can keep; None for a streamed one."""
    if hasattr(reply.body, "__aiter__"):
        return None
    return reply.content_type, reply_data(reply)


@dataclass
class Upgradable:
    """The handler of an operation marked ``x-slipway-websocket``: ``websocket(call, ws)``
    serves the upgrade (``ws`` a ``falcon.asgi.WebSocket``, not yet accepted; the gate has
    admitted the caller and the parameters are parsed); ``http(call)`` a plain request,
    which without one is 400 asking for the upgrade."""

    websocket: object
    http: object = None


def _upgrade_required(op: Operation):
    async def handler(call):
        raise ApiError(400, f"{op.method} {op.route} is a WebSocket: send the request as an upgrade "
                            "(Connection: Upgrade, Upgrade: websocket)")

    return handler


class OperationResource:
    """All operations of one contract path; ``on_<method>`` responders are set per operation
    (and ``on_websocket`` for an operation marked ``x-slipway-websocket``)."""

    def __init__(self):
        self.methods = []

    def bind(self, op: Operation, gate, handler, idempotency=None) -> None:
        if op.websocket != isinstance(handler, Upgradable):
            raise RuntimeError(f"{op.operation_id}: an x-slipway-websocket operation needs an Upgradable handler "
                               "and only such an operation may have one")
        if op.websocket:
            self._bind_websocket(op, gate, handler.websocket)
            handler = handler.http or _upgrade_required(op)

        async def responder(req, resp, **path_values):
            caller = await gate.admit(req, op)
            body = await read_body(req, op)
            params = parse_params(req, op, path_values)
            call = Call(req=req, op=op, params=params, body=body, caller=caller)
            if idempotency is not None and op.method == "POST":  # Idempotency-Key (app.http.idempotency)
                reply = await idempotency.run(req, op, caller, body, lambda: handler(call))
            else:
                reply = await handler(call)
            write_reply(resp, reply)
            for name, value in getattr(req.context, "rate_headers", {}).items():
                resp.set_header(name, value)

        responder.__name__ = f"on_{op.method.lower()}"
        setattr(self, responder.__name__, responder)
        self.methods.append(op.method)

    def refuse_other_methods(self, api: str, gate) -> None:
        """Methods the contract does not give this path (OPTIONS too): 405 with ``Allow``,
        after authentication and the rate limit like every other answer."""
        allow = ", ".join(self.methods)
        for method in HTTP_METHODS:
            if method not in self.methods:
                refusal = _gated_refusal(api, gate, 405, f"method not allowed here (allowed: {allow})",
                                         headers={"Allow": allow})
                setattr(self, f"on_{method.lower()}", refusal)

    def _bind_websocket(self, op: Operation, gate, handler) -> None:
        """The same checks as a request (gate, then parameters); a refusal before the
        handler accepts is an HTTP answer to the handshake (``refuse_websocket``)."""

        async def on_websocket(req, ws, **path_values):
            try:
                caller = await gate.admit(req, op)
                check_origin = getattr(gate, "check_origin", None)
                if check_origin is not None:  # a cookie-authenticated upgrade must come from the panel's origin
                    check_origin(req, caller, always=True)
                params = parse_params(req, op, path_values)
                await handler(Call(req=req, op=op, params=params, body=None, caller=caller), ws)
            except falcon.WebSocketDisconnected:
                pass
            except Exception as ex:  # noqa: BLE001 (every failure becomes a refusal or a close code)
                await refuse_websocket(req, ws, to_api_error(ex))

        self.on_websocket = on_websocket


def add_contract_routes(app: falcon.asgi.App, contract: ApiContract, gate, handlers: dict, idempotency=None) -> None:
    """Register every operation of ``contract``; an operation without a handler is an error.
    With ``idempotency`` (``app.http.idempotency.Idempotency``) its POSTs honour
    ``Idempotency-Key``."""
    resources: dict[str, OperationResource] = {}
    for op in contract.operations:
        handler = handlers.get(op.operation_id)
        if handler is None:
            raise RuntimeError(f"contract operation {op.operation_id} ({op.method} {op.route}) has no handler")
        resource = resources.setdefault(op.route, OperationResource())
        # a gate may also guard ``security: []`` operations (rate tiers), saying so
        guarded = op.secured or getattr(gate, "guards_open_operations", False)
        resource.bind(op, gate if guarded else OpenGate(), handler, idempotency)
    extra = set(handlers) - {op.operation_id for op in contract.operations}
    if extra:
        raise RuntimeError(f"handlers without a contract operation: {sorted(extra)}")
    prefix = getattr(gate, "guards_unknown_routes", None)
    if prefix:
        for resource in resources.values():
            resource.refuse_other_methods(contract.api, gate)
        app.add_sink(_unknown_route(contract.api, gate), prefix=re.compile("^" + re.escape(prefix) + "(?:/|$)"))
    for route, resource in resources.items():
        app.add_route(route, resource)


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _gated_refusal(api: str, gate, status: int, message: str, headers=None):
    """A responder that authenticates and rate-limits like an operation (so the caller
    learns nothing without a key, and the rate headers ride along), then refuses."""
    op = Operation(api=api, method="ANY", path="", route="", operation_id="", secured=True, scope="write")

    async def refuse(req, resp, ws=None, **_):
        if ws is not None:  # a WebSocket upgrade: the error handler answers the handshake
            raise falcon.HTTPNotFound()
        await gate.admit(req, op)
        raise ApiError(status, message, headers=headers)

    return refuse


def _unknown_route(api: str, gate):
    return _gated_refusal(api, gate, 404, "no such route")


__all__ = ["Call", "Reply", "Upgradable", "add_contract_routes", "api_of"]


def time_param(call, name: str):
    """A ``date-time`` query parameter as an aware UTC datetime (None when absent); a
    value the contract's format check let through but Python cannot hold is the API's
    invalid-parameter error (400 on the panel, 422 on the partner API)."""
    from app.http.timefmt import parse_rfc3339

    value = call.params.get(name)
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise ApiError(400 if call.op.api == "panel" else 422, "invalid parameters",
                       fields={name: f"not a usable date-time: {exc}"}) from None
