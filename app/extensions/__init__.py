"""The behaviour hooks at work (``ports.hookspecs``, ``ports.extensions``), one concern a
module: what the plugins registered, checked (``registrations``); their routes in the
panel contract (``contract``) and behind its gate, and as MCP tools (``routes``); their
auth sources (``auth_sources``); their background jobs (``jobs``); their event
subscribers fed from the persisted outbox (``outbox``, its SQL in
``app.storage.event_outbox``).

Plugin code is synchronous and runs in threads of its own (``EngineCalls`` named
``slipway-ext``), never on the event loop: a plugin that blocks slows only itself.
"""
from app.extensions.auth_sources import AUTH_SOURCE_TIMEOUT_S, AuthSources
from app.extensions.contract import PREFIX, add_to_document, operation_id, path_of
from app.extensions.jobs import ExtensionJobs
from app.extensions.outbox import OutboxDelivery
from app.extensions.registrations import RATE_TIERS, ExtensionError, Extensions
from app.extensions.routes import RouteHandler, caller_of, mcp_tools, route_handlers, tool_name

__all__ = ["AUTH_SOURCE_TIMEOUT_S", "PREFIX", "RATE_TIERS", "AuthSources", "ExtensionError", "ExtensionJobs",
           "Extensions", "OutboxDelivery", "RouteHandler", "add_to_document", "caller_of", "mcp_tools",
           "operation_id", "path_of", "route_handlers", "tool_name"]
