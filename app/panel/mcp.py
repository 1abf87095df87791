"""The MCP server at ``/api/mcp``: thirteen tools over the panel API, for AI agents.

The protocol is the official MCP SDK's (``mcp``): its low-level ``Server`` with a
``StreamableHTTPSessionManager`` in stateless JSON mode, handed the raw ASGI request by
``SlipwayApp``. Nothing of the protocol is written here; what is, is the binding of each
tool to its panel operation:

- the HTTP request is admitted by the panel gate (``PanelGate.admit``) as a request of
  the panel API: an ``Authorization: Bearer`` API key only (a session cookie does not
  count, so a browser page can never call tools with a signed-in user's rights), the
  key's own bucket, the same 401/429 JSON errors and ``X-RateLimit-*`` headers;
- a tool call then takes its operation's rate tier and permissions (``PanelGate.enter``),
  the body and parameter checks of ``app.http.pipeline`` (``check_body``,
  ``check_params``) and runs the operation's own handler with the key as caller, so
  customer scoping, limits and answers are the REST operation's, by the same code;
- a tool's input schema is built from the served contract: the operation's parameters
  and the fields of its JSON body, as arguments of the same names;
- ``tools/list`` lists the tools whose permissions the key holds; any other call is a
  tool error (``isError``) whose text is the API's JSON error body, as a refusal is.

Stateless: every POST is one exchange, authenticated on its own, so several server
processes share nothing and a revoked key stops at its next request. There is no
stream to ``GET``: GET, DELETE and other methods are 405 with ``Allow: POST``, which the
Streamable HTTP transport allows. Tool calls are not idempotent (no ``Idempotency-Key``:
they do not go through the HTTP pipeline).
"""
from __future__ import annotations

import asyncio
import logging

import falcon.asgi

from app.http.errors import ApiError, error_body, to_api_error
from app.http.openapi import Operation
from app.http.pipeline import MAX_BODY, Call, Upgradable, check_body, check_params, json_text
from app.panel.gate import PanelGate

log = logging.getLogger("slipway.mcp")
PATH = "/api/mcp"
#: tool name -> the panel operation it runs
TOOLS = {
    "list_services": "listServices", "get_service": "getService", "create_service": "createService",
    "update_service": "updateService",
    "start_service": "startService", "stop_service": "stopService", "restart_service": "restartService",
    "redeploy_service": "redeployService", "delete_service": "deleteService", "get_logs": "getServiceLogs",
    "get_events": "listServiceEvents", "list_templates": "listTemplates", "list_customers": "listPanelCustomers",
}
#: parameters of a WebSocket upgrade, which a tool call is not
UPGRADE_ONLY = frozenset({"follow", "api_key"})
#: ASGI scope key: (the falcon request, the admitted principal)
CALLER = "slipway.mcp_caller"


def _sdk():
    """The MCP SDK (``mcp_types``, ``Server``, ``StreamableHTTPSessionManager``), imported
    when the endpoint's first request comes: it is the largest import of the app (about a
    second of CPU at each start of a server process), and most processes never see an
    MCP call."""
    import mcp_types
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    return mcp_types, Server, StreamableHTTPSessionManager


class Tool:
    """One tool: its operation, the operation's handler and the input schema."""

    def __init__(self, name: str, op: Operation, handler, contract):
        self.name, self.op = name, op
        self.handler = handler.http if isinstance(handler, Upgradable) else handler
        self.params = {p.name for p in op.params if p.name not in UPGRADE_ONLY}
        properties, required = {}, []
        for p in op.params:
            if p.name in self.params:
                properties[p.name] = {**contract.resolved(p.schema), **({"description": p.description}
                                                                          if p.description else {})}
                if p.required:
                    required.append(p.name)
        schema = {"type": "object"}
        body = contract.resolved(op.body_schema) if op.body_schema is not None else {}
        fields = dict(body.get("properties", {}))
        for rule in body.get("allOf", []):  # a deploy method's plugin may bring fields of its own
            for field, field_schema in rule.get("then", {}).get("properties", {}).items():
                fields.setdefault(field, field_schema)
        self.fields = set(fields)
        properties.update(fields)
        if op.body_required:
            required += [field for field in body.get("required", []) if field not in required]
        if "allOf" in body:  # per deploy method: the fields its plugin requires
            schema["allOf"] = body["allOf"]
        schema.update(properties=properties, required=required, additionalProperties=False)
        needs = ", ".join(op.permissions)
        description = (f"{op.summary or op.operation_id}. Runs {op.method} {op.route} ({op.operation_id})"
                       + (f"; needs {needs}" if needs else "") + ". The result is that operation's JSON answer.")
        self.schema, self.description = schema, description
        self._tool = None

    def tool(self, types):
        """The SDK's description of the tool (``types``: ``mcp_types``), made once."""
        if self._tool is None:
            read_only = self.op.method == "GET"
            self._tool = types.Tool(name=self.name, description=self.description, input_schema=self.schema,
                                    annotations=types.ToolAnnotations(
                                        read_only_hint=read_only, destructive_hint=self.op.method == "DELETE",
                                        idempotent_hint=read_only or None, open_world_hint=False))
        return self._tool

    def body(self, arguments: dict):
        """The call's JSON body (its body fields) or None; 422 for an argument the tool does
        not take (stricter than REST, which ignores unknown query parameters and fields)."""
        unknown = sorted(set(arguments) - self.params - self.fields)
        if unknown:
            raise ApiError(422, "invalid arguments", fields={name: f"is not an argument of {self.name}"
                                                             for name in unknown})
        body = {k: v for k, v in arguments.items() if k in self.fields}
        return body if self.op.body_validate is not None and (body or self.op.body_required) else None


class McpEndpoint:
    """The ``/api/mcp`` ASGI endpoint and its session manager's lifetime (``start`` and
    ``stop``, a job of the app's lifespan like the workers). The SDK's server and session
    manager are made on the first request (``_running``), not at start: see :func:`_sdk`."""

    def __init__(self, contract, gate, handlers: dict, extra_tools: dict | None = None):
        """``extra_tools``: ``{tool name: operation id}`` beyond ``TOOLS`` (the plugins'
        routes that ask to be tools)."""
        self.gate = gate
        ops = {op.operation_id: op for op in contract.operations}
        tools = {**TOOLS, **(extra_tools or {})}  # start-up refused a plugin's tool named as one of TOOLS
        self.tools = {name: Tool(name, ops[op_id], handlers[op_id], contract) for name, op_id in tools.items()}
        # the HTTP request itself: a panel request that needs a key, on its bucket only
        self.op = Operation(api="panel", method="POST", path="/mcp", route=PATH, operation_id="mcp",
                            secured=True, scope="write")
        self.version = contract.document.get("info", {}).get("version", "")
        self.types = None  # mcp_types, once the SDK is imported
        self.manager = None
        self._task = None
        self._stopping = None
        self._started = False  # between the lifespan's start and stop
        self._starting = asyncio.Lock()
        # the SDK's per-request info lines ("Terminating session: None") repeat the access log
        logging.getLogger("mcp").setLevel(logging.WARNING)

    # --- lifetime ------------------------------------------------------------------------

    async def start(self) -> None:
        """The server may now serve MCP requests; the SDK starts with the first one."""
        self._started = True

    async def _running(self) -> bool:
        """The session manager, started on the first request while the server runs (one
        manager runs only once: a fresh one in a task of its own, whose task group lives as
        long as the server, not inside a request's awaits). False when it cannot run."""
        async with self._starting:
            if self._task is not None:
                return not self._task.done()
            if not self._started:
                return False
            types, Server, StreamableHTTPSessionManager = _sdk()
            self.types = types
            server = Server("slipway", version=self.version,
                            instructions="Slipway's panel services API as tools: deploy and run "
                                         "containerised services. Each result is the REST operation's JSON.",
                            on_list_tools=self.list_tools, on_call_tool=self.call_tool,
                            get_tool_input_schema=lambda name: (self.tools[name].schema
                                                                if name in self.tools else None))
            self.manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True,
                                                        max_request_body_size=MAX_BODY)
            self._stopping, ready = asyncio.Event(), asyncio.Event()
            manager, stopping = self.manager, self._stopping

            async def run():
                async with manager.run():
                    ready.set()
                    await stopping.wait()

            self._task = asyncio.get_running_loop().create_task(run(), name="slipway-mcp")
            waiting = asyncio.ensure_future(ready.wait())
            await asyncio.wait([waiting, self._task], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if self._task.done():
                log.error("the MCP session manager did not start", exc_info=self._task.exception())
                return False
            return True

    async def stop(self) -> None:
        self._started = False
        async with self._starting:
            task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        try:
            await task
        except Exception:  # the other jobs must still stop
            log.exception("the MCP session manager failed")
        finally:
            self.manager = None

    # --- HTTP ----------------------------------------------------------------------------

    async def __call__(self, scope, receive, send):
        req = falcon.asgi.Request(scope, receive)
        try:
            principal = await self.gate.admit(req, self.op, cookies=False)
            if scope.get("method") != "POST":
                raise ApiError(405, "method not allowed here (allowed: POST): this MCP endpoint is stateless, "
                                    "without a stream to GET or a session to DELETE", headers={"Allow": "POST"})
            if not await self._running():
                raise ApiError(503, "the MCP endpoint is not running")
            if (req.content_length or 0) > MAX_BODY:  # as the panel says it (a chunked body: the SDK's 413)
                raise ApiError(413, "request body is larger than 1 MiB")
        except ApiError as err:
            await _send_error(send, req, err)
            return
        rate = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in getattr(req.context, "rate_headers", {}).items()]

        async def send_with_rate(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *rate]}
            await send(message)

        await self.manager.handle_request({**scope, CALLER: (req, principal)}, receive, send_with_rate)

    # --- MCP -----------------------------------------------------------------------------

    async def list_tools(self, ctx, params):
        _, principal = ctx.request.scope[CALLER]
        types = self.types
        # per key: never to be cached for, or shared with, another caller
        return types.ListToolsResult(tools=[t.tool(types) for t in self.tools.values() if _allows(principal, t.op)],
                                     ttl_ms=0, cache_scope="private")

    async def call_tool(self, ctx, params):
        req, principal = ctx.request.scope[CALLER]
        types = self.types
        tool = self.tools.get(params.name)
        try:
            if tool is None:
                raise ApiError(404, f"no tool named {params.name!r}")
            arguments = params.arguments or {}
            # in the pipeline's order: rate tier, permission, body, parameters, the handler
            await self.gate.enter(principal, tool.op)
            body = tool.body(arguments)
            if body is not None:
                body = check_body(tool.op, body)
            values = check_params(tool.op, lambda p: arguments.get(p.name) if p.name in tool.params else None)
            reply = await tool.handler(Call(req=req, op=tool.op, params=values, body=body, caller=principal))
        except Exception as ex:  # noqa: BLE001 (every refusal is a tool error in the API's format)
            err = to_api_error(ex)
            text = json_text(error_body("panel", err.status, err.message, err.fields, err.details, err.code))
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        if reply.status == 204 or reply.body is None:
            return types.CallToolResult(content=[])
        structured = reply.body if isinstance(reply.body, dict) else None
        return types.CallToolResult(content=[types.TextContent(type="text", text=json_text(reply.body))],
                                    structured_content=structured)


def _allows(principal, op) -> bool:
    try:
        PanelGate.permit(principal, op)
        return True
    except ApiError:
        return False


async def _send_error(send, req, err: ApiError) -> None:
    """``err`` as the panel API answers it: its JSON body, the rate and error headers."""
    body = json_text(error_body("panel", err.status, err.message, err.fields, err.details, err.code)).encode("utf-8")
    headers = {**getattr(req.context, "rate_headers", {}), **err.headers}
    raw = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in headers.items()]
    raw += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": err.status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
