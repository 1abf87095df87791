"""The plugins' routes at work: each one's handler for the panel pipeline (the caller as
the plugin sees it, the handler run in a thread, its ``RouteError`` the API's error), and
the routes their plugin offers as MCP tools."""
from __future__ import annotations

import re

from app.extensions.contract import operation_id
from app.http.errors import ApiError
from app.http.pipeline import Reply
from core.panel import access
from core.panel.sessions import KeySessionPrincipal, SessionPrincipal
from ports.extensions import Caller, ExtensionContext, Route, RouteError, RouteReply, RouteRequest


def caller_of(principal) -> Caller:
    """What a plugin learns of the panel principal that called it."""
    if isinstance(principal, access.SourcePrincipal):
        role, credential = principal.role, f"source:{principal.source}"
    elif isinstance(principal, KeySessionPrincipal):
        role, credential = principal.key.role, "session"
    elif isinstance(principal, SessionPrincipal):
        role, credential = principal.user.role, "session"
    else:
        role, credential = principal.key.role, "key"
    return Caller(role=role, customer_id=principal.customer_id, permissions=frozenset(principal.permissions),
                  credential=credential)


def route_handlers(routes, context: ExtensionContext, calls) -> dict:
    """``{operation id: handler}`` for the pipeline (app.http.pipeline): each runs the
    plugin's handler in a thread, at most a quarter of the threads per caller."""
    return {operation_id(route): RouteHandler(route, context, calls) for route in routes}


class RouteHandler:
    """The pipeline's handler of one plugin route: the call made a ``RouteRequest`` (path
    values apart from the query's), the plugin's handler run on ``calls`` (the engine-call
    pool, shared fairly between callers), its ``RouteError`` made the API's error."""

    def __init__(self, route: Route, context: ExtensionContext, calls):
        self.route, self.context, self.calls = route, context, calls
        self.path_names = frozenset(re.findall(r"\{([a-z][a-z0-9_]*)\}", route.path))

    async def __call__(self, call):
        names = self.path_names
        request = RouteRequest(caller=caller_of(call.caller),
                               params={k: v for k, v in call.params.items() if k in names},
                               query={k: v for k, v in call.params.items() if k not in names},
                               body=call.body, context=self.context)
        try:
            reply = await self.calls.run_for(call.caller.bucket_id, self.route.handler, request)
        except RouteError as exc:
            raise ApiError(exc.status, exc.message, fields=exc.fields) from None
        if not isinstance(reply, RouteReply):
            raise RuntimeError(f"the plugin route {operation_id(self.route)} answered {type(reply).__name__}, "
                               "not a RouteReply")
        return Reply(reply.status, reply.body)


def tool_name(route: Route) -> str:
    """The MCP tool a route offered as one is: ``<plugin>_<operation id>``."""
    return f"{route.plugin}_{route.operation_id}"


def mcp_tools(routes) -> dict:
    """``{tool name: operation id}`` of the routes their plugin offers as MCP tools (none
    is named as a built-in tool: ``_check_routes``)."""
    return {tool_name(route): operation_id(route) for route in routes if route.mcp}
